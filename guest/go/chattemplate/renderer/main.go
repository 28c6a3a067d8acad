// Command renderer is the chat-template guest (see package chattemplate):
// it reads one chattemplate.Request, JSON, on stdin, and writes the
// rendered prompt to stdout, or the template's error, one line, to stderr
// with exit code chattemplate.ExitTemplate.
//
// Build it for infernet with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -ldflags=-s -o ../renderer.wasm .
//
// (make -C testdata does); package chattemplate embeds the result.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/infernet/infernet/guest/go/chattemplate"
)

// maxStack caps a goroutine's stack: a template that recurses without end
// stops here ("fatal error: stack overflow", exit 2) long before the
// job's memory limit, and no template a model ships nests a thousandth as
// deep.
const maxStack = 64 << 20

// heapLimit is the heap the Go runtime collects at, and not before: a job
// is short and its garbage goes with its memory, so a real template's
// render does not collect at all (a 4 MiB request took a quarter of the
// time). It is below the job's memory (node/models.TemplateMemory, 256
// MiB), so that a heap that is only garbage is collected before the
// limit.
const heapLimit = 160 << 20

func main() {
	debug.SetMaxStack(maxStack)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(heapLimit)
	out, err := run(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(chattemplate.ExitTemplate)
	}
	if _, err := io.WriteString(os.Stdout, out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run compiles and renders the request read from r. A panic of the engine
// (strings.Repeat of a negative count, an index out of range) is the
// template's error.
func run(r io.Reader) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("rendering failed: %v", p)
		}
	}()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("reading the request: %w", err)
	}
	var q chattemplate.Request
	if err := json.Unmarshal(b, &q); err != nil {
		return "", fmt.Errorf("reading the request: %w", err)
	}
	b = nil
	t, err := jinja.Compile(q.Template)
	if err != nil || q.Check {
		return "", err
	}
	list := make([]any, len(q.Messages))
	for i, m := range q.Messages {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	// What jinja's Template.Render makes of these, and strftime_now.
	data := map[string]any{
		"messages":              list,
		"bos_token":             q.BOSToken,
		"eos_token":             q.EOSToken,
		"add_generation_prompt": q.AddGenerationPrompt,
	}
	vals := make(map[string]jinja.Value, len(data)+1)
	for k, v := range data {
		vals[k] = jinja.FromGoValue(v)
	}
	now := time.Unix(0, q.Now).In(time.FixedZone(q.Zone, q.ZoneOffset))
	vals["strftime_now"] = strftimeNow(now)
	return t.RenderValues(vals)
}

// strftimeNow is the engine's strftime_now (jinja v1.8.0's
// builtinStrftimeNow, whose time.Now would read the sandbox's fixed
// clock) at now.
func strftimeNow(now time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 {
			format = printValue(args[0])
		}
		return jinja.NewString(now.Format(strftimeToGo.Replace(format))), nil
	})
}

// strftimeToGo turns a Python strftime format into a Go time layout, as
// jinja v1.8.0's strftimeToGo does.
var strftimeToGo = strings.NewReplacer(
	"%Y", "2006",
	"%m", "01",
	"%d", "02",
	"%H", "15",
	"%M", "04",
	"%S", "05",
	"%B", "January",
	"%b", "Jan",
	"%A", "Monday",
	"%a", "Mon",
	"%p", "PM",
	"%I", "03",
	"%Z", "MST",
	"%%", "%",
)

// printValue is a value's text, as jinja v1.8.0's printValue writes it.
func printValue(v jinja.Value) string {
	switch {
	case v.IsUndefined(), v.IsNone(), v.IsCallable():
		return ""
	case v.IsBool():
		if v.AsBool() {
			return "True"
		}
		return "False"
	case v.IsInt():
		return fmt.Sprintf("%d", v.AsInt())
	case v.IsFloat():
		return fmt.Sprintf("%g", v.AsFloat())
	case v.IsString():
		return v.AsString()
	}
	return v.String()
}
