package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostileChatTemplate: a GGUF's tokenizer.chat_template is Jinja from
// whoever made the file. Rendered in the node's own process, one that
// recursed, or asked for a huge range or string, killed the whole node
// (fatal stack overflow, out of memory: no recover stops either), and
// nested loops held a CPU for hours, on the first chat request or on the
// first whose content the template chose (red team 58). In the sandbox
// each is an ErrTemplate error, and the process goes on rendering.
func TestHostileChatTemplate(t *testing.T) {
	for _, tc := range []struct {
		name, template string
		limit          bool // stopped by a limit of the job, not the engine
	}{
		{"recursion", `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`, true},
		{"mutual recursion", `{% macro a(x) %}{{ b(x) }}{% endmacro %}{% macro b(x) %}{{ a(x) }}{% endmacro %}{{ a(1) }}`, true},
		{"recursion on a chosen content", `{% macro a(x) %}{{ b(x) }}{% endmacro %}{% macro b(x) %}{{ a(x) }}{% endmacro %}` +
			`{% for m in messages %}{% if m.content == "boom" %}{{ a(1) }}{% endif %}{{ m.content }}{% endfor %}`, true},
		{"recursive loop", `{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}`, false},
		{"huge range", `{% for i in range(4000000000) %}{% endfor %}ok`, false},
		{"huge string", `{{ ("x" * 100000) * 100000 }}`, false},
		{"strings past the memory", `{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}`, false},
		{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, true},
		{"negative repeat", `{{ "x" * -1 }}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := NewChatTemplate(tc.template, "<s>", "</s>", true)
			if err == nil {
				_, err = ct.Render([]Message{{"user", "boom"}})
			}
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("%v, want an ErrTemplate error", err)
			}
			if tc.limit && !strings.Contains(err.Error(), "the model's chat template exceeded its") {
				t.Errorf("%v, want the limit it went past", err)
			}
		})
	}
	// The content the template waits for is refused; any other renders.
	ct, err := NewChatTemplate(`{% macro a(x) %}{{ b(x) }}{% endmacro %}{% macro b(x) %}{{ a(x) }}{% endmacro %}`+
		`{% for m in messages %}{% if m.content == "boom" %}{{ a(1) }}{% endif %}{{ m.content }}{% endfor %}`, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ct.Render([]Message{{"user", "calm"}}); err != nil || got != "calm" {
		t.Errorf("a content the template does not wait for: %q, %v", got, err)
	}
	// A real template renders after all of them, in the same process.
	l3, err := NewChatTemplate(chatTemplate(t, "llama3"), "<|begin_of_text|>", "<|eot_id|>", true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got, err := l3.Render([]Message{{"user", "Hi"}}); err != nil || got != want {
		t.Errorf("llama3 after the hostile templates: %q, %v; want %q", got, err, want)
	}
}

// TestChatTemplateRange: Qwen's templates walk the messages backwards
// with range, which renders as Jinja's does (red team 58's case).
func TestChatTemplateRange(t *testing.T) {
	ct, err := NewChatTemplate(`{% for i in range(messages|length - 1, -1, -1) %}{{ i }}{{ messages[i].content }}{% endfor %}`+
		`{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(0, 7, 3) %}{{ i }}{% endfor %}`, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ct.Render([]Message{{"user", "a"}, {"assistant", "b"}})
	if err != nil || out != "1b0a012036" {
		t.Fatalf("%q %v", out, err)
	}
}

// TestChatTemplateNow: strftime_now formats this process's clock, in its
// zone, as the engine did in this process (the sandbox's own clock is
// fixed).
func TestChatTemplateNow(t *testing.T) {
	ct, err := NewChatTemplate(`{{ strftime_now("%d %b %Y %H:%M %Z") }}|{{ strftime_now() }}`, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	got, err := ct.Render([]Message{{"user", "a"}})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	const layout = "02 Jan 2006 15:04 MST|2006-01-02"
	if got != before.Format(layout) && got != after.Format(layout) {
		t.Errorf("%q, want %q", got, after.Format(layout))
	}
}

// TestChatTemplateCanceled: a caller gone stops its render with its
// context's error, not the template's.
func TestChatTemplateCanceled(t *testing.T) {
	ct, err := NewChatTemplate(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ct.RenderContext(ctx, []Message{{"user", "a"}}); err == nil || errors.Is(err, ErrTemplate) {
		t.Errorf("%v, want the context's error", err)
	}
}

// BenchmarkChatTemplateRender: one chat of two messages with Llama 3's
// template, a job of the sandbox (instantiate and run; the guest is
// compiled once, before).
func BenchmarkChatTemplateRender(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "chat", "llama3.jinja"))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := NewChatTemplate(string(src), "<|begin_of_text|>", "<|eot_id|>", true)
	if err != nil {
		b.Fatal(err)
	}
	msgs := []Message{{"system", "Be kind."}, {"user", "Hi"}}
	for b.Loop() {
		if _, err := ct.Render(msgs); err != nil {
			b.Fatal(err)
		}
	}
}
