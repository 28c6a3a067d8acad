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

// strftimeNow is strftime_now(format), which templates such as Llama
// 3.1's call for today's date, at now: the engine's own would read the
// sandbox's clock, which is fixed.
func strftimeNow(now time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 && args[0].IsString() {
			format = args[0].AsString()
		}
		return jinja.NewString(strftime(format, now)), nil
	})
}

// strftime formats t as C's strftime does format, for the directives chat
// templates use (%d %b %Y and their kin); another is written as it is.
func strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch c := format[i]; c {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&b, "%c%02d%02d", sign, off/3600, off/60%60)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String()
}
