package models

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/store"
)

func TestLlama2Chat(t *testing.T) {
	for _, c := range []struct {
		name string
		msgs []Message
		want string
	}{
		{"user alone", []Message{{"user", "Tell me a story."}}, "[INST] Tell me a story. [/INST]"},
		{"system and user", []Message{{"system", "Be kind."}, {"user", " Hi "}},
			"[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST]"},
		{"developer is a system message", []Message{{"developer", "A"}, {"system", "B"}, {"user", "C"}},
			"[INST] <<SYS>>\nA\nB\n<</SYS>>\n\nC [/INST]"},
		{"turns", []Message{{"system", "S"}, {"user", "1"}, {"assistant", "one"}, {"user", "2"}},
			"[INST] <<SYS>>\nS\n<</SYS>>\n\n1 [/INST] one [INST] 2 [/INST]"},
		{"system alone", []Message{{"system", "Be kind."}}, "[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\n"}, // it was lost: an empty prompt
		{"system last", []Message{{"user", "1"}, {"assistant", "one"}, {"system", "S"}},
			"[INST] 1 [/INST] one [INST] <<SYS>>\nS\n<</SYS>>\n\n"},
	} {
		if got := Llama2Chat(c.msgs); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		var zero *ChatTemplate
		if got, err := zero.Render(c.msgs); err != nil || got != c.want {
			t.Errorf("%s: nil template: %q, %v", c.name, got, err)
		}
	}
}

// chatTemplate reads testdata/chat/name.jinja; a name beginning with "@"
// is the template itself.
func chatTemplate(t *testing.T, name string) string {
	t.Helper()
	if src, ok := strings.CutPrefix(name, "@"); ok {
		return src
	}
	b, err := os.ReadFile(filepath.Join("testdata", "chat", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chatCase is a template, its special tokens and a conversation.
type chatCase struct {
	template, bos, eos string
	msgs               []Message
}

// chatCases are conversations for every template of testdata/chat.
func chatCases(t *testing.T) []chatCase {
	convs := [][]Message{
		{{"user", "Hello!"}},
		{{"system", "You are terse."}, {"user", "  Name a colour.\n"}},
		{{"system", "S"}, {"user", "1"}, {"assistant", " one "}, {"user", "2 — 二 😀"}},
		{{"user", "a"}, {"assistant", "b"}, {"user", "c\n\nd"}},
	}
	var out []chatCase
	for _, tc := range []struct{ name, bos, eos string }{
		{"llama2", "<s>", "</s>"},
		{"llama3", "<|begin_of_text|>", "<|eot_id|>"},
		{"chatml", "", "<|im_end|>"},
		{"multiline", "<s>", "</s>"},
	} {
		for _, msgs := range convs {
			out = append(out, chatCase{tc.name, tc.bos, tc.eos, msgs})
		}
	}
	return out
}

func TestChatTemplate(t *testing.T) {
	const (
		l3user = "<|start_header_id|>user<|end_header_id|>\n\n"
		l3asst = "<|start_header_id|>assistant<|end_header_id|>\n\n"
		l3sys  = "<|start_header_id|>system<|end_header_id|>\n\n"
	)
	sys := []Message{{"system", "Be kind."}, {"user", " Hi "}}
	turns := []Message{{"user", "1"}, {"assistant", " one "}, {"user", "2"}}
	for _, tc := range []struct {
		name     string
		template string
		bos, eos string
		addBOS   bool
		msgs     []Message
		want     string
	}{
		{"llama3, BOS the runner's", "llama3", "<|begin_of_text|>", "<|eot_id|>", true, sys,
			l3sys + "Be kind.<|eot_id|>" + l3user + "Hi<|eot_id|>" + l3asst},
		{"llama3, BOS the template's", "llama3", "<|begin_of_text|>", "<|eot_id|>", false, sys,
			"<|begin_of_text|>" + l3sys + "Be kind.<|eot_id|>" + l3user + "Hi<|eot_id|>" + l3asst},
		{"chatml adds a system message", "chatml", "", "<|im_end|>", false, turns,
			"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n1<|im_end|>\n" +
				"<|im_start|>assistant\n one <|im_end|>\n<|im_start|>user\n2<|im_end|>\n<|im_start|>assistant\n"},
		{"llama2's own, turns as sequences", "llama2", "<s>", "</s>", true, turns,
			"[INST] 1 [/INST] one </s><s>[INST] 2 [/INST]"},
		{"llama2's own, system", "llama2", "<s>", "</s>", true, sys,
			"[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\n Hi [/INST]"}, // strip() strips the whole content's ends
		{"trim_blocks and lstrip_blocks", "multiline", "<s>", "</s>", true, append(sys, Message{"assistant", "Hello."}, Message{"user", "Bye"}),
			"[SYSTEM_PROMPT]Be kind.[/SYSTEM_PROMPT][INST] Hi [/INST]Hello.</s>[INST]Bye[/INST]    >0\n    >1\n"},
	} {
		tmpl, err := NewChatTemplate(chatTemplate(t, tc.template), tc.bos, tc.eos, tc.addBOS)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := tmpl.Render(tc.msgs)
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %q, %v\nwant %q", tc.name, got, err, tc.want)
		}
	}
}

func TestChatTemplateErrors(t *testing.T) {
	if _, err := NewChatTemplate("{% for %}", "", "", true); !errors.Is(err, ErrTemplate) {
		t.Errorf("a template that does not parse: %v", err)
	}
	l2, err := NewChatTemplate(chatTemplate(t, "llama2"), "<s>", "</s>", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l2.Render([]Message{{"user", "a"}, {"user", "b"}})
	if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "alternate") {
		t.Errorf("two user turns in a row: %v; want the template's own refusal", err)
	}
}

// withChatTemplate returns the GGUF file gg with tokenizer.chat_template
// set to source.
func withChatTemplate(t *testing.T, gg []byte, source string) []byte {
	t.Helper()
	g, err := llama.ReadGGUF(bytes.NewReader(gg), int64(len(gg)))
	if err != nil {
		t.Fatal(err)
	}
	w := llama.NewGGUFWriter()
	if err := w.Copy(g, bytes.NewReader(gg)); err != nil {
		t.Fatal(err)
	}
	if err := w.Set("tokenizer.chat_template", source); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRegistryChatTemplate(t *testing.T) {
	r, blobs, _ := testRegistry(t)
	plain := gguf(t)
	own := withChatTemplate(t, plain, chatTemplate(t, "llama3"))
	for _, m := range []struct {
		name string
		ref  store.BlobRef
		tok  store.BlobRef
	}{
		{"stories", put(t, blobs, testdata(t, "stories260K.bin")), put(t, blobs, testdata(t, "tok512.bin"))},
		{"plain", put(t, blobs, plain), store.BlobRef{}},
		{"own", put(t, blobs, own), store.BlobRef{}},
		{"broken", put(t, blobs, withChatTemplate(t, plain, "{% for m in messages %}")), store.BlobRef{}},
	} {
		if _, err := r.Add(m.name, m.ref, m.tok); err != nil {
			t.Fatal(err)
		}
	}
	msgs := []Message{{"user", "Hi"}}
	for _, tc := range []struct{ model, want string }{
		{"stories", "[INST] Hi [/INST]"},
		{"plain", "[INST] Hi [/INST]"},
		// stories260K's vocabulary: BOS is "<s>" (llama2.c's "\n<s>\n"
		// piece is not written to GGUF), and the runner adds it.
		{"own", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	} {
		for range 2 { // the second from what the registry keeps
			tmpl, err := r.ChatTemplate(tc.model)
			if err != nil {
				t.Fatalf("%s: %v", tc.model, err)
			}
			if got, err := tmpl.Render(msgs); err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.model, got, err, tc.want)
			}
		}
	}
	if _, err := r.ChatTemplate("nosuch"); !errors.Is(err, ErrUnknown) {
		t.Errorf("an unknown model: %v", err)
	}
	// A template that does not compile is kept too, its error the same
	// value: no chat reads the file and checks it again.
	_, first := r.ChatTemplate("broken")
	if _, again := r.ChatTemplate("broken"); !errors.Is(first, ErrTemplate) || again != first {
		t.Errorf("a broken template: %v, then %v; want one ErrTemplate error, kept", first, again)
	}
}

// TestChatTemplateOracle renders every template of testdata/chat on the
// conversations of chatCases as node-llama-cpp renders a GGUF's own
// template (scripts/llamacpp.sh chat: @huggingface/jinja), and wants the
// same text, or an error where it raised one. make test-llamacpp runs it
// (INFERNET_LLAMACPP_CHAT=1).
func TestChatTemplateOracle(t *testing.T) {
	if os.Getenv("INFERNET_LLAMACPP_CHAT") == "" {
		t.Skip("INFERNET_LLAMACPP_CHAT is not set: make test-llamacpp runs this test")
	}
	cases := chatCases(t)
	// Llama 3's and Qwen2.5's own templates, from their tokenizer_config.json
	// (scripts/llamacpp.sh vocabs), where the script gave their folder.
	if dir := os.Getenv("INFERNET_BPE_VOCABS"); dir != "" {
		for _, m := range []struct{ pkg, bos, eos string }{
			{"tokenizer-llama3", "<|begin_of_text|>", "<|end_of_text|>"},
			{"tokenizer-qwen2_5", "", "<|im_end|>"},
		} {
			b, err := os.ReadFile(filepath.Join(dir, m.pkg, "models", "tokenizer_config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				ChatTemplate string `json:"chat_template"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil || cfg.ChatTemplate == "" {
				t.Fatalf("%s: no chat template (%v)", m.pkg, err)
			}
			for _, c := range chatCases(t)[:4] {
				cases = append(cases, chatCase{template: "@" + cfg.ChatTemplate, bos: m.bos, eos: m.eos, msgs: c.msgs})
			}
		}
	}
	var in bytes.Buffer
	for _, c := range cases {
		line, err := json.Marshal(map[string]any{"template": chatTemplate(t, c.template), "messages": c.msgs,
			"bos_token": c.bos, "eos_token": c.eos, "add_generation_prompt": true})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "llamacpp.sh"), "chat")
	cmd.Stdin, cmd.Stderr = &in, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/llamacpp.sh chat: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	same := 0
	for i, c := range cases {
		if !sc.Scan() {
			t.Fatalf("%d answers for %d cases", i, len(cases))
		}
		var want struct{ Text, Error string }
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		tmpl, err := NewChatTemplate(chatTemplate(t, c.template), c.bos, c.eos, false)
		if err != nil {
			t.Fatalf("%s: %v", c.template, err)
		}
		got, err := tmpl.Render(c.msgs)
		switch {
		case want.Error != "" && err == nil:
			t.Errorf("%s %v: rendered %q; the oracle raised %q", c.template, c.msgs, got, want.Error)
		case want.Error == "" && (err != nil || got != want.Text):
			t.Errorf("%s %v:\n got %q, %v\nwant %q", c.template, c.msgs, got, err, want.Text)
		default:
			same++
		}
	}
	t.Logf("chat templates: %d of %d conversations rendered as node-llama-cpp renders them (%d templates)", same, len(cases), len(cases)/4)
	if same != len(cases) {
		t.Errorf("%d of %d differ", len(cases)-same, len(cases))
	}
}

func TestReadMessages(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{`[{"role": "user", "content": "hi"}]`, "user:hi", ""},
		{`[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]`, "user:ab", ""},
		{`[]`, "", "non-empty array"},
		{`{"role": "user"}`, "", "non-empty array"},
		{`[{"role": "tool", "content": "x"}]`, "", "role"},
		{`[{"role": "user", "content": [{"type": "image_url", "text": ""}]}]`, "", "image_url"},
		{`[{"role": "user", "content": 3}]`, "", "must be text"},
	} {
		msgs, err := ReadMessages(json.RawMessage(c.in))
		var got []string
		for _, m := range msgs {
			got = append(got, m.Role+":"+m.Content)
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.in, err, c.err)
			}
		} else if err != nil || strings.Join(got, ",") != c.want {
			t.Errorf("%s: %v, %v; want %s", c.in, got, err, c.want)
		}
	}
}

// TestLlama2ChatLinear: a chat request's body is at most 4 MiB, and
// Llama2Chat's work must be linear in it. It joined system messages with
// system += …, copying the whole system text again for each one: 100,000
// system messages of 10 bytes (about 3 MiB of JSON) took 227 s of CPU and
// tens of GB of garbage (a red team's find). Counted in bytes allocated,
// not time.
func TestLlama2ChatLinear(t *testing.T) {
	msgs := make([]Message, 100_000)
	for i := range msgs {
		msgs[i] = Message{Role: "system", Content: "0123456789"}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := Llama2Chat(msgs)
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(16*len(out)); got > limit {
		t.Errorf("Llama2Chat of %d system messages allocated %d bytes for %d bytes out; want at most %d", len(msgs), got, len(out), limit)
	}
}
