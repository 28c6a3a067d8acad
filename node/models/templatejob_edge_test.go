package models

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// TestChatTemplateEscapedContent: a chat of one message of 3 MiB, within the
// API's 4 MiB body, of '<' (as in code, HTML, XML) rendered in the
// node's process with Llama 3's template; in the sandbox it ran out of
// fuel, because the request handed to the guest was JSON with Go's HTML
// escaping: each '<', '>' and '&' six bytes (\u003c), 18 MiB to parse
// (and held by every request waiting for a template slot).
func TestChatTemplateEscapedContent(t *testing.T) {
	src := chatTemplate(t, "llama3")
	content := strings.Repeat("<", 3<<20)
	msgs := []Message{{"user", content}}
	tmpl, err := jinja.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}},
		"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_generation_prompt": true})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.TrimPrefix(want, "<|begin_of_text|>")
	ct, err := NewChatTemplate(src, "<|begin_of_text|>", "<|eot_id|>", true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ct.Render(msgs)
	if err != nil || got != want {
		t.Fatalf("%d bytes, %v; want the engine's %d bytes", len(got), err, len(want))
	}
}

// TestChatTemplateCallerDeadline: a caller's own deadline that passes while
// the template renders is the caller's context error, not the template
// "exceeded its time limit of 10s" (an ErrTemplate, which the API answers
// as a 400 blaming the model's template).
func TestChatTemplateCallerDeadline(t *testing.T) {
	ct, err := NewChatTemplate(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = ct.RenderContext(ctx, []Message{{"user", "a"}})
	if errors.Is(err, ErrTemplate) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v; want the caller's deadline, not the template's limit", err)
	}
}

// TestChatTemplateCacheDirFails: the template sandbox is made once per
// process (sync.OnceValues), error and all: a compile cache directory that
// cannot be written when the first template is read (a disk full for a
// moment, a read-only home) failed every chat template of the process for
// good, where the engine in the process needed no directory. Run in a
// child process, the sandbox being the process's.
func TestChatTemplateCacheDirFails(t *testing.T) {
	if dir := os.Getenv("INFERNET_TEST_TEMPLATE_CACHE"); dir != "" {
		TemplateCacheDir = dir
		ct, err := NewChatTemplate("{{ messages[0].content }}", "", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ct.Render([]Message{{"user", "hi"}}); err != nil || got != "hi" {
			t.Fatalf("%q, %v", got, err)
		}
		return
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChatTemplateCacheDirFails$", "-test.count=1")
	cmd.Env = append(os.Environ(), "INFERNET_TEST_TEMPLATE_CACHE="+filepath.Join(file, "wasm")) // under a file: never a directory
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a cache directory that cannot be made: %v\n%s", err, out)
	}
}
