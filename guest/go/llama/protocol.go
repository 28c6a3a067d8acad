// Package llama runs Llama-architecture language models as infernet jobs:
// the readers of their files (llama2.c checkpoints and tokenizers, GGUF),
// the tokenizer, and the runner guest, a WebAssembly module embedded in
// this package (Runner) that generates text with the tensor ops of ABI v3,
// its weights held by the host.
//
// # The runner's protocol
//
// The runner finds its model among the job's data files (under /data):
//
//	model      a llama2.c checkpoint (.bin) or a GGUF file (by its magic)
//	tokenizer  a llama2.c tokenizer.bin; needed with a .bin model, ignored with GGUF
//
// Its stdin is JSON lines, one Request per line; for each, in order, it
// writes Events to stdout as JSON lines while it generates: one per token
// (Text set), then one with Done set. The output is a function of the
// model, the requests and the job's mode alone, so replicas agree.
//
// Generation is llama2.c's run.c: the prompt is encoded with BOS (unless
// a GGUF vocabulary says not: Tokenizer.AddsBOS), its tokens fill the KV
// cache, and each next token is the
// argmax of the logits (temperature 0) or drawn by the host's sampler with
// a coin from the request's RNG, after the guest's penalties, top-k and
// min-p when the request asks for them (Shape); it stops when the model
// writes BOS (and, with GGUF, its EOS and end-of-turn tokens), at a stop
// string (Request.Stop), after MaxTokens, or at the end of the context (at
// most context − prompt + 1 tokens, as run.c's seq_len steps). A line that
// is not a valid request (unknown fields, sampling terms CheckSampling
// refuses, a prompt longer than the context, more than 1 MiB)
// is answered with a Done event with Error, and the runner goes on. A job
// without a usable model, tokenizer or ABI v3 host fails at once (exit
// status 1, the reason on stderr).
//
// # Files
//
// ReadCheckpoint, ReadGGUF (with (*GGUF).Model) and Open read a model's
// configuration and where its tensors lie, reading no weights: the runner
// makes them host tensors with tensor.FromData. ReadTokenizerBin and
// (*GGUF).Vocab read vocabularies. GGUFWriter writes GGUF files and
// ConvertToGGUF converts a llama2.c checkpoint to GGUF with F32, F16, BF16
// or Q8_0 weights. Readers check every count, length and dimension against
// fixed limits and the file's size before allocating, and report a
// malformed file with an error wrapping ErrFormat.
package llama

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Data file names the runner reads (under /data).
const (
	DataModel     = "model"
	DataTokenizer = "tokenizer"
)

// Request is one prompt to complete.
type Request struct {
	// ID is echoed in the request's events (for batches split over shards).
	ID int `json:"id"`
	// Prompt is the text to continue.
	Prompt string `json:"prompt"`
	// MaxTokens caps the tokens generated (default DefaultMaxTokens, at
	// most the model's context less the prompt).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature 0 is greedy (argmax); above 0, tokens are sampled.
	Temperature float32 `json:"temperature,omitempty"`
	// TopP is the nucleus of top-p sampling; 0 or >= 1 samples from all.
	TopP float32 `json:"top_p,omitempty"`
	// Seed seeds the sampler's generator (llama2.c's xorshift; 0 means 1).
	Seed uint64 `json:"seed,omitempty"`
	// TopK keeps the k most likely tokens (0: all); MinP the tokens at
	// least MinP times as likely as the top one (0: all);
	// RepetitionPenalty penalizes the last RepeatLastN tokens (0 or 1:
	// off); FrequencyPenalty and PresencePenalty the tokens generated so
	// far, OpenAI's way. See Shape for the sampler chain and CheckSampling
	// for their ranges.
	TopK              int     `json:"top_k,omitempty"`
	MinP              float32 `json:"min_p,omitempty"`
	RepetitionPenalty float32 `json:"repetition_penalty,omitempty"`
	FrequencyPenalty  float32 `json:"frequency_penalty,omitempty"`
	PresencePenalty   float32 `json:"presence_penalty,omitempty"`
	// Stop ends generation when the completion's text (the events' Text
	// joined) contains one of these strings (at most MaxStops, each 1 to
	// MaxStopBytes bytes): the token that completes it is the last
	// written, with a Done event of Stop "stop". The runner writes the
	// stop string's tokens; readers cut the text before it
	// (node/models.Decoder), streamed or not.
	Stop []string `json:"stop,omitempty"`
	// Claim, when set, asks the runner to check a completion instead of
	// generating one (verification by prefill): Claim is its tokens (the
	// Token of its events). The runner computes every position of prompt
	// and claim in batched forward passes, as a prompt's, and writes the
	// events that generating would have written, choosing each token
	// itself from that position's logits (with the request's sampler and
	// generator), up to the first position where its choice is not the
	// claimed token (nor a near-tie, with Tie): there it writes its own
	// choice and a Done event with Stop "claim". The output is thus byte for byte the generation's
	// exactly when the claim is what the model generates, at a batched
	// pass's cost instead of one pass per token. An empty claim (a
	// completion of no tokens) is written as [], not left out, which
	// would ask for a generation.
	Claim []int `json:"claim,omitzero"`
	// Tie, checking a greedy Claim, is the near-tie bound in logits (0 to
	// MaxTie; 0 checks exactly): where the claimed token is not the
	// runner's own choice but its logit is within Tie of the top one, the
	// runner takes the claimed token as its own and goes on, counting a
	// near-tie (Event.Ties). Kernels of another backend class (a GPU's, a
	// CPU's) sum in another order, and where the top two logits are
	// closer than that error honest providers choose differently; within
	// Tie the claim is a completion the model could have produced, and the
	// output is still the claim's byte for byte (but for the Done event's
	// Ties and TieGap). Where the claim ends before MaxTokens, it claims a
	// stop token, which passes likewise when the nearest stop token's logit
	// is within Tie of the top one. A liar may choose near-tie tokens on
	// purpose, and gains no more than that choice: the checker computes
	// the logits itself, so no token farther than Tie from the top passes,
	// and MaxTie caps what a client may allow. Sampled claims (Temperature
	// above 0) are checked exactly: their coin decides among all tokens.
	Tie float32 `json:"tie,omitempty"`
	// Logits asks for the logits the last token (or the stop) was chosen
	// from in the Done event (Event.Logits); with MaxTokens 1, the prompt's
	// next-token logits. Not with a Claim, whose output must not depend on
	// the checker's arithmetic.
	Logits bool `json:"logits,omitempty"`
	// Logprobs asks for each token's log probability in its event
	// (Event.Logprobs), with the TopLogprobs (0 to MaxTopLogprobs) most
	// likely tokens at its position.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
}

// MaxTie caps Request.Tie: one logit, a runner-up at least e⁻¹ (37 %) as
// likely as the top token.
const MaxTie = 1

// CheckTie returns an error unless tie is a valid Request.Tie: finite,
// 0 to MaxTie.
func CheckTie(tie float32) error {
	if !(tie >= 0 && tie <= MaxTie) {
		return fmt.Errorf("tie %g: want 0 to %d logits", tie, MaxTie)
	}
	return nil
}

// DefaultMaxTokens is a Request's MaxTokens when it gives none.
const DefaultMaxTokens = 256

// Event is one line of the runner's output.
type Event struct {
	ID int `json:"id"`
	// Text is the decoded piece of one generated token as run.c prints it
	// (Tokenizer.Decode, then Printable): it may be empty, for a lone byte
	// that is not printable.
	Text string `json:"text,omitempty"`
	// Token is the generated token's id, with Text.
	Token int `json:"token,omitempty"`
	// Logprobs, with Text, are the token's log probability and its
	// position's most likely tokens, when the request asked for them
	// (Request.Logprobs).
	Logprobs *Logprobs `json:"logprobs,omitempty"`
	// Done ends the request's events; the counts and Stop come with it.
	Done             bool `json:"done,omitempty"`
	PromptTokens     int  `json:"prompt_tokens,omitempty"`
	CompletionTokens int  `json:"completion_tokens,omitempty"`
	// Stop says why generation ended: "eos" (the model's end-of-sequence
	// token, or BOS as llama2.c's run.c stops), "stop" (a stop string of
	// Request.Stop) or "length"; or, checking a
	// Claim, "claim" where the model's choice is not the claimed token.
	Stop string `json:"stop,omitempty"`
	// Error, with Done, says why the request failed (a prompt too long for
	// the context, say); the runner goes on with the next request.
	Error string `json:"error,omitempty"`
	// Logits, with Done of a request that asked for them (Request.Logits),
	// are the whole vocabulary's logits at the last position run: those
	// the last token or the stop was chosen from. Their last digits depend
	// on the kernels (they are bit for bit the same only in exact mode).
	// A logit that is not finite fails the request (Error) instead.
	Logits []float32 `json:"logits,omitempty"`
	// Ties and TieGap, with Done of a check with a Tie bound, count the
	// claimed tokens taken as near-ties and give the largest of their gaps
	// (the top logit less the claimed token's). They are the only bytes of
	// a check's output that depend on the checker's arithmetic; they come
	// last, so that the claim's own bytes are the line without them
	// (node/models.Check.Confirms strips them).
	Ties   int     `json:"ties,omitempty"`
	TieGap float32 `json:"tie_gap,omitempty"`
}

// Line is the event as the runner writes it: one line of JSON, without
// HTML escaping ("<" stays "<"), ending in a newline. A verifier that
// compares an event's bytes encodes the event it read with Line.
func (e Event) Line() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
