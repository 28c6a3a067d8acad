// Package chattemplate is the chat-template guest: a WebAssembly module
// (./renderer, GOOS=wasip1) that compiles and renders a model's Jinja chat
// template (a GGUF's tokenizer.chat_template) with
// github.com/ardanlabs/jinja, so that a hostile template runs in the
// sandbox (package host), under its memory, fuel and time limits, and
// never in the node's own process.
//
// A job reads one Request, JSON, on stdin. It writes the rendered prompt
// to stdout and exits 0; or one line, the template's error, to stderr and
// exits 1 (ExitTemplate). Anything else (the Go runtime's exit 2 when the
// template took all the job's memory, a trap, a limit of the sandbox) is
// the template going past the job's limits.
package chattemplate

// Request is one job of the guest: a template and what it renders.
type Request struct {
	// Template is the Jinja source.
	Template string `json:"template"`
	// Check, when set, only compiles Template: the job writes nothing to
	// stdout and exits 0 when it compiles.
	Check bool `json:"check,omitempty"`
	// BOSToken, EOSToken and AddGenerationPrompt are the template's
	// bos_token, eos_token and add_generation_prompt.
	BOSToken            string `json:"bos_token"`
	EOSToken            string `json:"eos_token"`
	AddGenerationPrompt bool   `json:"add_generation_prompt"`
	// Messages are the template's messages.
	Messages []Message `json:"messages"`
	// Now is the time strftime_now formats, in Unix nanoseconds, and Zone
	// and ZoneOffset (seconds east of UTC) its time zone: the host's
	// clock, as the engine's own strftime_now reads it in the host's
	// process (the sandbox's clock is fixed).
	Now        int64  `json:"now"`
	Zone       string `json:"zone"`
	ZoneOffset int    `json:"zone_offset"`
}

// Message is one message of a conversation: its role and its text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ExitTemplate is the exit code of a template that does not compile, or
// that refused to render (raise_exception, an undefined operation): its
// error is the job's stderr, one line.
const ExitTemplate = 1
