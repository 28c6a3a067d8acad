package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/infernet/infernet/guest/go/chattemplate"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/store"
)

// Message is one message of a chat: a role (system, developer, user or
// assistant) and its text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ReadMessages reads a chat's messages as the OpenAI API gives them: a
// non-empty array of roles and text content, each a string or an array of
// text parts.
func ReadMessages(raw json.RawMessage) ([]Message, error) {
	var in []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in) == 0 {
		return nil, errors.New("messages must be a non-empty array of messages")
	}
	out := make([]Message, len(in))
	for i, m := range in {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			return nil, fmt.Errorf("messages[%d].role %q: want system, developer, user or assistant", i, m.Role)
		}
		var text string
		if err := json.Unmarshal(m.Content, &text); err != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return nil, fmt.Errorf("messages[%d].content must be text", i)
			}
			for _, p := range parts {
				if p.Type != "text" {
					return nil, fmt.Errorf("messages[%d].content: %q parts are not supported", i, p.Type)
				}
				text += p.Text
			}
		}
		out[i] = Message{Role: m.Role, Content: text}
	}
	return out, nil
}

// ErrTemplate wraps the errors of a model's chat template: one that does
// not compile, that refuses a conversation (raise_exception, such as
// Llama 2's "Conversation roles must alternate"), or that went past the
// limits of its job (TemplateMemory, TemplateTimeout, TemplateFuel,
// TemplateOutput).
var ErrTemplate = errors.New("chat template")

// ChatTemplate turns a conversation into a model's prompt. A GGUF model's
// own template (tokenizer.chat_template, Jinja) is rendered as Hugging
// Face's apply_chat_template renders it (github.com/ardanlabs/jinja, with
// its trim_blocks and lstrip_blocks), given messages, bos_token, eos_token
// and add_generation_prompt true; a model without one gets Llama 2's
// (Llama2Chat). The zero ChatTemplate is Llama 2's.
//
// A template is the GGUF's maker's code: it is compiled and rendered in
// the sandbox, a job of the chattemplate guest with the limits of
// TemplateMemory, TemplateTimeout, TemplateFuel and TemplateOutput, never
// in this process. A ChatTemplate is safe for concurrent use.
type ChatTemplate struct {
	// Source is the Jinja text, "" for Llama 2's built-in rendering.
	Source string
	// BOS and EOS are the texts of the vocabulary's begin- and
	// end-of-sequence tokens, the template's bos_token and eos_token.
	BOS, EOS string
	// AddBOS is set when the runner puts BOS before every prompt (GGUF's
	// tokenizer.ggml.add_bos_token, true unless the file says not): a
	// template's own leading bos_token is then dropped from the text, or
	// the prompt would begin with two.
	AddBOS bool

	compiled bool // NewChatTemplate compiled Source
}

// NewChatTemplate compiles source, a Jinja chat template, in the sandbox;
// "" is Llama 2's. A template that does not compile is an ErrTemplate
// error.
func NewChatTemplate(source, bos, eos string, addBOS bool) (*ChatTemplate, error) {
	t := &ChatTemplate{Source: source, BOS: bos, EOS: eos, AddBOS: addBOS}
	if source == "" {
		return t, nil
	}
	if _, err := runTemplate(context.Background(), chattemplate.Request{Template: source, Check: true}); err != nil {
		return nil, err
	}
	t.compiled = true
	return t, nil
}

// Render returns the prompt of msgs, ending where the assistant's next
// message begins: RenderContext with no deadline of the caller's.
func (t *ChatTemplate) Render(msgs []Message) (string, error) {
	return t.RenderContext(context.Background(), msgs)
}

// RenderContext returns the prompt of msgs, ending where the assistant's
// next message begins. The template renders in the sandbox; ctx stops it
// early (an error that is not ErrTemplate).
func (t *ChatTemplate) RenderContext(ctx context.Context, msgs []Message) (string, error) {
	if t == nil || !t.compiled {
		return Llama2Chat(msgs), nil
	}
	q := chattemplate.Request{
		Template:            t.Source,
		BOSToken:            t.BOS,
		EOSToken:            t.EOS,
		AddGenerationPrompt: true,
		Messages:            make([]chattemplate.Message, len(msgs)),
	}
	for i, m := range msgs {
		q.Messages[i] = chattemplate.Message(m)
	}
	now := time.Now()
	q.Now = now.UnixNano()
	q.Zone, q.ZoneOffset = now.Zone()
	out, err := runTemplate(ctx, q)
	if err != nil {
		return "", err
	}
	if t.AddBOS && t.BOS != "" {
		out = strings.TrimPrefix(out, t.BOS)
	}
	return out, nil
}

// Llama2Chat renders messages with Llama 2's chat template, the default of
// the llama family and of llama2.c checkpoints, which carry no template: a
// system (or developer) message goes into the first user turn between
// <<SYS>> markers, each user turn is wrapped in [INST] ... [/INST], and
// each assistant turn follows its user turn. The runner adds BOS; later
// turns are joined by a space where Llama 2 would end the turn with EOS
// and start a new sequence with BOS: this template serves llama2.c
// checkpoints too, whose tokenizer.bin has no token types, so "</s><s>"
// would be read there as the text "<", "/", "s", ">", ... A GGUF
// vocabulary reads the special tokens written in a prompt as those
// tokens, as llama.cpp's parse_special does, so a GGUF model's own
// template that writes eos_token and bos_token between turns (Mistral's,
// Llama 2's) gets them.
//
//	[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} [INST] {user} [/INST]
//
// A system message with no user turn after it opens one.
func Llama2Chat(msgs []Message) string {
	var b strings.Builder
	// The system text is built, not concatenated: system += m.Content
	// copied it all again for each message (100000 of them, in a 4 MiB
	// request, took minutes of CPU).
	var sys strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case "system", "developer":
			if sys.Len() > 0 {
				sys.WriteString("\n")
			}
			sys.WriteString(m.Content)
		case "user":
			if b.Len() > 0 {
				b.WriteString(" ")
			}
			b.WriteString("[INST] ")
			if sys.Len() > 0 {
				b.WriteString("<<SYS>>\n" + sys.String() + "\n<</SYS>>\n\n")
				sys.Reset()
			}
			b.WriteString(strings.TrimSpace(m.Content) + " [/INST]")
		case "assistant":
			b.WriteString(" " + strings.TrimSpace(m.Content))
		}
	}
	if system := sys.String(); system != "" {
		// No user turn after it: the system prompt opens one, as
		// llama.cpp's llama2 template writes it, rather than being lost.
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n")
	}
	return b.String()
}

// ChatTemplate returns the chat template of the model named name: its
// GGUF's own, or Llama 2's. A model's template is read from its file once
// and kept with its digest, and so is a template that does not compile
// (ErrTemplate): each chat had read the file and checked it again, a job
// of up to TemplateTimeout.
func (r *Registry) ChatTemplate(name string) (*ChatTemplate, error) {
	m, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	if m.Format != store.ModelGGUF {
		return &ChatTemplate{}, nil
	}
	r.mu.RLock()
	kept, ok := r.templates[m.Model.Digest]
	r.mu.RUnlock()
	if ok {
		return kept.t, kept.err
	}
	f, size, err := r.blobs.Open(m.Model.Digest)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	defer f.Close()
	t, err := ggufChatTemplate(f, size)
	if err != nil {
		err = fmt.Errorf("model %s: %w", name, err)
		if !errors.Is(err, ErrTemplate) {
			return nil, err // the file's reading, or the sandbox's: try again next time
		}
	}
	r.mu.Lock()
	r.templates[m.Model.Digest] = keptTemplate{t, err}
	r.mu.Unlock()
	return t, err
}

// keptTemplate is a model's chat template as Registry.ChatTemplate read
// it: the template, or the ErrTemplate error of one that does not compile.
type keptTemplate struct {
	t   *ChatTemplate
	err error
}

// ReadChatTemplate returns the chat template of the model file at path: a
// GGUF's own, or Llama 2's (a llama2.c checkpoint, or a GGUF without one).
func ReadChatTemplate(path string) (*ChatTemplate, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := Sniff(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if info.Format != store.ModelGGUF {
		return &ChatTemplate{}, nil
	}
	t, err := ggufChatTemplate(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ggufChatTemplate is the chat template the metadata of the GGUF file r
// gives: tokenizer.chat_template with the texts of its BOS and EOS tokens,
// or Llama 2's where there is none.
func ggufChatTemplate(r io.ReaderAt, size int64) (*ChatTemplate, error) {
	g, err := llama.ReadGGUF(r, size)
	if err != nil {
		return nil, err
	}
	source, _, err := g.String("tokenizer.chat_template")
	if err != nil || source == "" {
		return &ChatTemplate{}, err
	}
	v, err := g.Vocab()
	if err != nil {
		return nil, err
	}
	piece := func(id int) string {
		if id < 0 || id >= len(v.Pieces) {
			return ""
		}
		return v.Pieces[id]
	}
	addBOS := true
	if x, ok := g.Get("tokenizer.ggml.add_bos_token"); ok {
		if b, isBool := x.(bool); isBool {
			addBOS = b
		}
	}
	return NewChatTemplate(source, piece(v.BOS), piece(v.EOS), addBOS)
}
