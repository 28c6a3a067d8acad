package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/shard"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// GenerateOptions are the settings of `infernet generate`.
type GenerateOptions struct {
	// SubmitOptions are the job's terms and the node to talk to, as
	// submit's (--replicas, --mode, --timeout, --json, ...), and --shards.
	SubmitOptions
	// Model is MODEL: a named model, or a model file with Tokenizer.
	Model, Tokenizer string
	// Prompt is --prompt (PromptSet tells an empty prompt from none);
	// Prompts is --prompts, a file of requests (- for stdin).
	Prompt    string
	PromptSet bool
	Prompts   string
	// Chat is --chat, a user's message, and System --system, the system
	// message before it: the prompt is the model's chat template with
	// them.
	Chat, System string
	// Request holds the terms of --max-tokens, --temperature, --top-p and
	// --seed: those of --prompt, and the defaults of --prompts' lines.
	// Without SeedSet (no --seed), a sampled request without a seed gets a
	// random one, as the OpenAI API's do.
	Request llama.Request
	SeedSet bool
	// Local runs the job in this process, on --backend, with compiled
	// modules cached in --cache-dir.
	Local    bool
	Backend  string
	CacheDir string
	// Profile (with Local) times the runner's host calls by function and
	// prints them.
	Profile bool
	// Runner is a runner module file that replaces the built-in one
	// (hidden --runner, for development and tests).
	Runner string

	stops map[int][]string // the requests' stop strings by ID (requests)
}

// NewCmdGenerate returns `infernet generate`. runF replaces the action in
// tests.
func NewCmdGenerate(stdio IO, runF func(context.Context, *GenerateOptions) error) *cobra.Command {
	o := &GenerateOptions{SubmitOptions: SubmitOptions{IO: stdio, Settle: "escrow"}}
	cmd := &cobra.Command{
		Use:   "generate MODEL (--prompt TEXT | --chat TEXT | --prompts FILE.jsonl)",
		Short: "Complete a prompt with a language model, on the network or locally",
		Long: `Complete text with a Llama-architecture language model: MODEL is a model the
local node holds by name (infernet models), or else a file, a llama2.c
checkpoint (.bin, with --tokenizer) or a GGUF file. The job runs infernet's
llama runner guest (built in) on the model, its weights held by the host; on
the network, --replicas providers run it and their outputs are compared like
any job's (infernet submit), so a greedy or seeded completion is verified.
In tolerance mode they run on one tensor backend class, as outputs compared
byte for byte must, unless --mixed-backends.

stdout is the completion alone, the text after the prompt, then a newline,
printed as it grows: with --local as it is generated, from the network as
the replicas' streamed outputs agree on it (no token before it is verified;
a summary goes to stderr). --json prints one JSON object
instead: completion, prompt_tokens, completion_tokens, stop ("eos", "stop" or
"length"), the seed of a sampled completion, tokens_per_second, the timings
and, for a network job, the job, its verification and replicas. tokens_per_second is completion_tokens over
run_ms, the wall time of the runner's job (the weights' loading and the
prompt's tokens included, module compilation not): locally this process's
run, on the network the mean of the agreeing replicas' runs as their
providers report them. Locally first_token_ms (from the local job's start,
the sandbox's setup included, to the first token: it may exceed run_ms on a
short completion), load_ms (the part of it spent making the weights' tensors) and
decode_tokens_per_second (the tokens after the first over the time after it)
come too.

--chat MESSAGE (with --system MESSAGE) asks as a chat: the prompt is the
model's chat template with the messages, as the OpenAI API's
/v1/chat/completions renders them (a GGUF's tokenizer.chat_template, else
Llama 2's), and the completion is the assistant's reply.

The sampler chain is llama.Shape's: --repeat-penalty, --frequency-penalty
and --presence-penalty, then --top-k and --min-p, then --temperature, --top-p
and the draw; with none of the first five, tokens are chosen as llama2.c's
run.c chooses them. --stop ends the completion at a stop string (stop
"stop"), which is cut from the text, streamed or not. A sampled request
(--temperature above 0) without a seed gets a random one, as the OpenAI
API's do: --seed (or a line's "seed") makes a completion repeatable.

--prompts runs a batch: one JSON object per line, {"prompt": "..."} or a
chat, {"messages": [...]}, with any of "max_tokens", "temperature",
"top_p", "seed", "top_k", "min_p", "repetition_penalty",
"frequency_penalty", "presence_penalty", "stop" (a string or an array) and
"logprobs" (a count of top tokens, or true with "top_logprobs"), as the
OpenAI API takes them (the flags give the rest); a request's id is its line
number. stdout is one JSON line per request in input order: id,
completion, counts, stop, error. With --shards N the lines are cut into N
shards, each a job of its own on other providers. A bad line is refused
before anything runs; so is a --prompt longer than the model's context.

Exit status: as infernet submit's (0, 122 unverified, 123 no result, 125
could not run, 1 other errors); 1 also when the runner refused a request
(its error on stderr; with --prompts the other requests' lines are still
printed).`,
		Example: `  infernet generate stories --prompt "Once upon a time"
  infernet generate ./stories260K.bin --tokenizer ./tok512.bin --prompt "Lily" --local
  infernet generate stories --prompt "Tom" --temperature 0.8 --seed 42 --replicas 3 --json
  infernet generate ./tinyllama-chat.Q4_K_M.gguf --local --system "Answer briefly." --chat "Why is the sky blue?"
  infernet generate stories --prompts batch.jsonl --shards 4 > completions.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model, o.PromptSet, o.SeedSet = args[0], cmd.Flags().Changed("prompt"), cmd.Flags().Changed("seed")
			if cmd.Flags().Changed("chat") && o.Chat == "" {
				return errors.New("--chat: an empty message")
			}
			o.Request.Logprobs = cmd.Flags().Changed("logprobs")
			if o.Request.Temperature <= 0 && o.Prompts == "" {
				// Greedy: they change nothing, and said nothing of it
				// (a batch's lines may sample, with these as defaults).
				var idle []string
				for _, name := range []string{"seed", "top-k", "min-p", "top-p"} {
					if cmd.Flags().Changed(name) {
						idle = append(idle, "--"+name)
					}
				}
				if len(idle) > 0 {
					fmt.Fprintf(o.IO.Err, "warning: %s: no effect without --temperature (at temperature 0 the most likely token is chosen each time)\n", strings.Join(idle, ", "))
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runGenerate(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Tokenizer, "tokenizer", "", "the llama2.c tokenizer.bin `FILE` of a .bin MODEL file")
	f.StringVarP(&o.Prompt, "prompt", "p", "", "the `TEXT` to complete")
	f.StringVar(&o.Prompts, "prompts", "", "a batch of requests, one JSON object per line (`FILE`.jsonl, - for stdin)")
	f.StringVar(&o.Chat, "chat", "", "a user's `MESSAGE`: the prompt is the model's chat template with it (its GGUF's own, else Llama 2's)")
	f.StringVar(&o.System, "system", "", "with --chat: the system `MESSAGE` before it")
	f.IntVar(&o.Request.MaxTokens, "max-tokens", llama.DefaultMaxTokens, fmt.Sprintf("most tokens to generate (at most the model's context less the prompt; 0: %d)", llama.DefaultMaxTokens))
	f.Float32Var(&o.Request.Temperature, "temperature", 0, "sampling temperature (0: greedy, the most likely token)")
	f.Float32Var(&o.Request.TopP, "top-p", 0.9, "with --temperature: sample from the smallest set of tokens of this total probability (1: all, the OpenAI API's default: with the same --seed, --top-p 1 gives its text; 0: the most likely token alone, greedy)")
	f.IntVar(&o.Request.TopK, "top-k", 0, "with --temperature: sample from the `K` most likely tokens alone (0: all)")
	f.Float32Var(&o.Request.MinP, "min-p", 0, "with --temperature: drop the tokens less likely than this fraction of the most likely one's probability (0: none)")
	f.Float32Var(&o.Request.RepetitionPenalty, "repeat-penalty", 0, fmt.Sprintf("penalize the tokens of the last %d (llama.cpp's repeat_penalty: positive logits divided by it, negative multiplied; 0 or 1: off)", llama.RepeatLastN))
	f.Float32Var(&o.Request.FrequencyPenalty, "frequency-penalty", 0, "lower each token's logit by this times its count in the completion so far (-2 to 2, OpenAI's)")
	f.Float32Var(&o.Request.PresencePenalty, "presence-penalty", 0, "lower the logit of each token already in the completion by this (-2 to 2, OpenAI's)")
	f.StringArrayVar(&o.Request.Stop, "stop", nil, fmt.Sprintf("end the completion before this `TEXT`, which is not printed (repeatable, at most %d)", llama.MaxStops))
	f.IntVar(&o.Request.TopLogprobs, "logprobs", 0, fmt.Sprintf("with --json or --prompts: each token's log probability, and the `N` most likely tokens at its place (0 to %d)", llama.MaxTopLogprobs))
	f.Uint64Var(&o.Request.Seed, "seed", 0, "with --temperature: seed of the sampler's generator, the same on every provider (none: a random one, in --json's seed; 0 is 1)")
	f.BoolVar(&o.Local, "local", false, "run in this process, without a network (like infernet run)")
	f.StringVar(&o.Backend, "backend", "auto", "with --local: tensor backend for tolerance mode: auto, "+backends.Names())
	f.StringVar(&o.CacheDir, "cache-dir", defaultCacheDir(), "with --local: compiled-module cache directory (empty: memory only)")
	f.BoolVar(&o.Profile, "profile", false, "with --local: time the runner's tensor calls by kind and print them per token, on stderr (in --json, as profile); on a GPU worker, its own time and the device's per op too (device_profile)")
	f.StringVar(&o.Runner, "runner", "", "a runner module `FILE` instead of the built-in one (development)")
	f.MarkHidden("runner")
	addTermsFlags(f, &o.SubmitOptions)
	f.IntVar(&o.Shards, "shards", 1, "with --prompts: cut the requests into `N` shards, each a job of its own")
	f.Lookup("json").Usage = "print the completion, counts and timings as one JSON object on stdout"
	return cmd
}

// single reports whether one request runs (--prompt or --chat), not a
// batch (--prompts).
func (o *GenerateOptions) single() bool { return o.Prompts == "" }

// requests checks the flags and returns the requests to run; a chat is
// rendered with MODEL's template (chatTemplate).
func (o *GenerateOptions) requests(ctx context.Context) ([]llama.Request, error) {
	given := 0
	for _, set := range []bool{o.PromptSet, o.Chat != "", o.Prompts != ""} {
		if set {
			given++
		}
	}
	switch {
	case given != 1:
		return nil, errors.New("give one of --prompt TEXT, --chat MESSAGE or --prompts FILE")
	case o.System != "" && o.Chat == "":
		return nil, errors.New("--system goes with --chat (a --prompts line gives its own \"messages\")")
	case o.Prompts != "" && o.JSON:
		return nil, errors.New("--json is for one prompt: --prompts prints a JSON line per request")
	case o.Shards != 1 && o.Prompts == "":
		return nil, errors.New("--shards needs --prompts")
	case o.Shards != 1 && o.Local:
		return nil, errors.New("--shards is for the network, not --local")
	case o.Request.Logprobs && !o.JSON && o.Prompts == "":
		return nil, errors.New("--logprobs needs --json or --prompts: the text alone has no room for them")
	case o.Profile && !o.Local:
		return nil, errors.New("--profile needs --local: a provider's calls are timed where it runs them")
	case o.Backend != backends.Auto && !o.Local:
		return nil, errors.New("--backend needs --local: on the network, each provider runs its own (--require 'has(\"cuda\")' asks for a GPU)")
	case o.Shards < 1 || o.Shards > wire.MaxShards:
		return nil, fmt.Errorf("--shards: want 1 to %d", wire.MaxShards)
	}
	// The sampling flags, in the flags' words (the API's check below
	// would name the request's fields).
	if err := llama.CheckSampling(o.Request); err != nil {
		msg := err.Error()
		param, _, _ := strings.Cut(msg, " ")
		param = strings.TrimSuffix(param, ":")
		if f, ok := samplingFlags[param]; ok {
			msg = "--" + f + strings.TrimPrefix(msg, param)
		}
		return nil, errors.New(msg)
	}
	chat := o.chatRenderer(ctx)
	var seed func() uint64
	if !o.SeedSet {
		seed = models.RandomSeed
	}
	if o.single() {
		q := o.Request
		q.Prompt = o.Prompt
		if seed != nil && q.Temperature > 0 {
			q.Seed = seed()
		}
		if o.Chat != "" {
			var msgs []models.Message
			if o.System != "" {
				msgs = append(msgs, models.Message{Role: "system", Content: o.System})
			}
			var err error
			if q.Prompt, err = chat(append(msgs, models.Message{Role: "user", Content: o.Chat})); errors.Is(err, models.ErrTemplate) {
				return nil, fmt.Errorf("--chat: %w", err)
			} else if err != nil {
				return nil, err // the model's: as a --prompt would say it
			}
		}
		models.TopPZeroGreedy(&q)
		if err := models.CheckRequest(q); err != nil {
			return nil, err
		}
		o.stops = models.StopsOf([]llama.Request{q})
		return []llama.Request{q}, nil
	}
	var r io.Reader = o.IO.In
	if o.Prompts != "-" {
		f, err := os.Open(o.Prompts)
		if err != nil {
			return nil, fmt.Errorf("--prompts: %w", err)
		}
		defer f.Close()
		r = f
	}
	reqs, err := models.ReadRequests(r, o.Request, models.LineOptions{Chat: chat, Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("--prompts %s: %w", o.Prompts, err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("--prompts %s: no requests", o.Prompts)
	}
	o.stops = models.StopsOf(reqs)
	return reqs, nil
}

// chatRenderer returns a function that renders a chat with MODEL's chat
// template, read when it is first needed; a GGUF's template renders in
// the sandbox (models.ChatTemplate), stopped with ctx.
func (o *GenerateOptions) chatRenderer(ctx context.Context) func([]models.Message) (string, error) {
	var t *models.ChatTemplate
	return func(msgs []models.Message) (string, error) {
		if t == nil {
			var err error
			if t, err = o.chatTemplate(ctx); err != nil {
				return "", err
			}
		}
		return t.RenderContext(ctx, msgs)
	}
}

// chatTemplate reads MODEL's chat template: a GGUF's own, or Llama 2's. A
// named model's file is this data directory's blob; a node elsewhere
// (--api) has the only copy, and its OpenAI API renders chats itself.
func (o *GenerateOptions) chatTemplate(ctx context.Context) (*models.ChatTemplate, error) {
	var files *modelFiles
	if models.CheckName(o.Model) != nil {
		f, err := checkModelFiles(o.Model, o.Tokenizer)
		if err != nil {
			return nil, err
		}
		files = &f
	}
	m, files, err := o.resolveModel(files, func() (*store.Model, error) { return o.localModel(ctx) })
	if err != nil {
		return nil, err
	}
	if files != nil {
		return models.ReadChatTemplate(files.model)
	}
	path := api.BlobPath(o.DataDir, m.Model.Digest)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("model %s: its file is not in %s, so its chat template cannot be read here (the node's /v1/chat/completions renders chats with it)", o.Model, o.DataDir)
	}
	return models.ReadChatTemplate(path)
}

// samplingFlags are the flags of the sampling terms by the request's
// field (llama.CheckSampling's words).
var samplingFlags = map[string]string{
	"max_tokens": "max-tokens", "temperature": "temperature", "top_p": "top-p", "top_k": "top-k", "min_p": "min-p",
	"repetition_penalty": "repeat-penalty", "frequency_penalty": "frequency-penalty", "presence_penalty": "presence-penalty",
	"stop": "stop", "top_logprobs": "logprobs",
}

func runGenerate(ctx context.Context, o *GenerateOptions) error {
	reqs, err := o.requests(ctx)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	// A MODEL that cannot be a name is a file: checked before anything
	// starts.
	var files *modelFiles
	if models.CheckName(o.Model) != nil {
		f, err := checkModelFiles(o.Model, o.Tokenizer)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		files = &f
	}
	if o.Local {
		return o.runLocal(ctx, reqs, files)
	}
	return o.runNetwork(ctx, reqs, files)
}

// resolveModel finds the named model MODEL, with lookup, unless files
// (MODEL as a file) are given; when no model has that name, MODEL is a
// file after all. It returns either the model or the files, checked.
func (o *GenerateOptions) resolveModel(files *modelFiles, lookup func() (*store.Model, error)) (*store.Model, *modelFiles, error) {
	if files != nil {
		return nil, files, nil
	}
	m, err := lookup()
	if err == nil {
		if o.Tokenizer != "" {
			return nil, nil, fmt.Errorf("--tokenizer goes with a model file: model %s has its own", o.Model)
		}
		return m, nil, nil
	}
	if !errors.Is(err, models.ErrUnknown) {
		return nil, nil, err
	}
	if _, statErr := os.Stat(o.Model); statErr != nil {
		return nil, nil, fmt.Errorf("%w, and there is no file %s (models are kept per data directory: this looked in %s; --datadir names another)", err, o.Model, o.DataDir)
	}
	f, err := checkModelFiles(o.Model, o.Tokenizer)
	if err != nil {
		return nil, nil, err
	}
	return nil, &f, nil
}

// checkPrompts refuses a --prompt the runner would refuse for the model
// (longer than its context) before the weights are loaded or sent
// anywhere: it reads the model files, or a named model's blobs where this
// data directory has them (a node elsewhere leaves it to the runner). A
// --prompts batch is left to the runner, which answers such a line with
// its error and runs the others.
func (o *GenerateOptions) checkPrompts(reqs []llama.Request, m *store.Model, files *modelFiles) error {
	if !o.single() {
		return nil
	}
	model, tokenizer := "", ""
	switch {
	case files != nil:
		model, tokenizer = files.model, files.tokenizer
	case m != nil:
		model = api.BlobPath(o.DataDir, m.Model.Digest)
		if !m.Tokenizer.Digest.IsZero() {
			tokenizer = api.BlobPath(o.DataDir, m.Tokenizer.Digest)
		}
		if _, err := os.Stat(model); err != nil {
			return nil
		}
	}
	p, err := models.ReadPromptFiles(model, tokenizer)
	if err != nil {
		return fmt.Errorf("model %s: %w", o.Model, err)
	}
	if err := p.Check(reqs[0]); err != nil {
		return fmt.Errorf("--prompt: %w", err)
	}
	return nil
}

// The local run.

// runLocal runs the requests in this process's sandbox, as `infernet run`
// runs a job, the model files mounted as the job's data.
func (o *GenerateOptions) runLocal(ctx context.Context, reqs []llama.Request, files *modelFiles) error {
	m, files, err := o.resolveModel(files, func() (*store.Model, error) { return o.localModel(ctx) })
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if err := o.checkPrompts(reqs, m, files); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	// A named model's files are the node's blobs: their digests are known,
	// and key the model cache without hashing the files again.
	data, digests := map[string]string{}, map[string]digest.Digest{}
	if m != nil {
		for _, d := range models.JobData(m) {
			data[d.Name], digests[d.Name] = api.BlobPath(o.DataDir, d.Digest), d.Digest
			if _, err := os.Stat(data[d.Name]); err != nil {
				return &exitError{Code: ExitError, Err: fmt.Errorf("model %s: its %s blob: %w", o.Model, d.Name, err)}
			}
		}
	} else {
		data[llama.DataModel] = files.model
		if files.tokenizer != "" {
			data[llama.DataTokenizer] = files.tokenizer
		}
	}
	module := llama.Runner()
	if o.Runner != "" {
		if module, err = os.ReadFile(o.Runner); err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("--runner: %w", err)}
		}
	}
	if len(module) == 0 {
		return &exitError{Code: ExitError, Err: models.ErrNoRunner}
	}
	ro := &RunOptions{IO: o.IO, Timeout: o.Timeout, Memory: o.Memory, MaxOutput: o.MaxOutput, Mode: o.Mode, Fuel: o.Fuel,
		Backend: o.Backend, CacheDir: o.CacheDir, Shard: "0/1", ModelCache: host.DefaultModelCache}
	// The weights are this process's own: a model larger than the default
	// cache gets a cache that holds it, rather than failing.
	for _, path := range data {
		if st, err := os.Stat(path); err == nil {
			ro.ModelCache += st.Size()
		}
	}
	if ro.MaxOutput == "" {
		ro.MaxOutput = "64MiB"
	}
	cfg, err := ro.jobConfig()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	cfg = cfg.WithProfile(o.Profile)
	sb, fast, closeSandbox, err := ro.openSandbox(ctx)
	if err != nil {
		return err
	}
	defer closeSandbox()
	// A GPU worker times its own side too: its thread's and the device's.
	var device tensor.Profiler
	if p, ok := fast.(tensor.Profiler); ok && o.Profile {
		if _, err := p.Profile(ctx, true); err == nil {
			device = p
		}
	}

	out := newGenerationOutput(o, reqs)
	dec := &models.Decoder{OnText: out.text, OnDone: out.done, Stops: o.stops}
	start := time.Now()
	out.start = start
	job := host.Job{Module: module, Input: models.EncodeRequests(reqs), Stdout: dec, Data: data, DataDigests: digests}
	res, runErr := sb.Run(ctx, job, cfg)
	decErr := dec.Close()
	if res != nil {
		o.IO.Err.Write(res.Stderr)
	}
	switch {
	case runErr != nil:
		return &exitError{Code: ExitNotRun, Err: runErr}
	case res.ExitCode != 0:
		return &exitError{Code: ExitError, Err: fmt.Errorf("the runner exited with status %d", res.ExitCode)}
	case decErr != nil:
		return &exitError{Code: ExitError, Err: decErr}
	}
	g := out.local(res, start)
	if o.Profile {
		tokens := 0
		for _, c := range dec.Completions() {
			tokens += c.CompletionTokens
		}
		g.Profile = profileOf(res, tokens)
		if device != nil {
			times, err := device.Profile(ctx, false)
			if err != nil {
				return &exitError{Code: ExitError, Err: fmt.Errorf("the %s worker's profile: %w", fast.Name(), err)}
			}
			g.DeviceProfile = deviceProfileOf(times, tokens, res.Duration)
		}
		if err := out.finish(g, dec.Completions()); err != nil || o.JSON {
			return err
		}
		printProfile(o.IO.Err, g.Profile, tokens, res.Duration)
		if device != nil {
			printDeviceProfile(o.IO.Err, g.DeviceProfile, fast.Name())
		}
		return nil
	}
	return out.finish(g, dec.Completions())
}

// OpProfile is one kind of the runner's host calls in a --profile run.
type OpProfile struct {
	Op string `json:"op"`
	// Calls and PerToken count them, in all and per generated token.
	Calls    uint64  `json:"calls"`
	PerToken float64 `json:"per_token"`
	// HostMS is their time on the host; MeanUS its mean per call.
	HostMS float64 `json:"host_ms"`
	MeanUS float64 `json:"mean_us"`
	// Share is HostMS's share of the run.
	Share float64 `json:"share"`
}

// profileOf returns res's profile, per token of tokens generated.
func profileOf(res *host.Result, tokens int) []OpProfile {
	var out []OpProfile
	for _, t := range res.Profile {
		p := OpProfile{Op: t.Op, Calls: t.Calls, HostMS: ms(t.Time), MeanUS: float64(t.Time.Nanoseconds()) / 1e3 / float64(t.Calls)}
		if tokens > 0 {
			p.PerToken = float64(t.Calls) / float64(tokens)
		}
		if res.Duration > 0 {
			p.Share = float64(t.Time) / float64(res.Duration)
		}
		out = append(out, p)
	}
	return out
}

// printProfile writes a profile as a table.
func printProfile(w io.Writer, prof []OpProfile, tokens int, run time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "op\tcalls\tper token\thost ms\tµs per call\tof the run\t\n")
	var sum time.Duration
	for _, p := range prof {
		fmt.Fprintf(tw, "%s\t%7d\t%9.1f\t%7.1f\t%11.1f\t%9.1f%%\t\n", p.Op, p.Calls, p.PerToken, p.HostMS, p.MeanUS, 100*p.Share)
		sum += time.Duration(p.HostMS * float64(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d tokens in %v; host calls %v of it, the guest's own work and the waits between them the rest.\n",
		tokens, run.Round(time.Millisecond), sum.Round(time.Millisecond))
	fmt.Fprintln(w, "A queued call's time is the host's until its work is queued; a call that waits for the device (argmax, tensor_read) includes the work queued before it.")
}

// DeviceOpProfile is one kind of operation on a GPU worker in a --profile
// run: the runner's calls as the worker ran them.
type DeviceOpProfile struct {
	Op string `json:"op"`
	// Calls and PerToken count them, in all and per generated token.
	Calls    uint64  `json:"calls"`
	PerToken float64 `json:"per_token"`
	// WorkerUS is the worker's own time per call, queueing the device's
	// work; DeviceUS the device's, between events before and after each.
	WorkerUS float64 `json:"worker_us"`
	DeviceUS float64 `json:"device_us"`
	// DeviceMS is the device's time in all, and Share its share of the run.
	DeviceMS float64 `json:"device_ms"`
	Share    float64 `json:"share"`
}

// deviceProfileOf returns a worker's times per token of tokens generated,
// the most device time first.
func deviceProfileOf(times []tensor.OpTime, tokens int, run time.Duration) []DeviceOpProfile {
	var out []DeviceOpProfile
	for _, t := range times {
		calls := float64(max(t.Calls, 1))
		p := DeviceOpProfile{Op: t.Op, Calls: t.Calls, WorkerUS: float64(t.Host.Nanoseconds()) / 1e3 / calls,
			DeviceUS: float64(t.Device.Nanoseconds()) / 1e3 / calls, DeviceMS: ms(t.Device)}
		if tokens > 0 {
			p.PerToken = float64(t.Calls) / float64(tokens)
		}
		if run > 0 {
			p.Share = float64(t.Device) / float64(run)
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b DeviceOpProfile) int { return cmp.Compare(b.DeviceMS, a.DeviceMS) })
	return out
}

// printDeviceProfile writes a worker's profile as a table.
func printDeviceProfile(w io.Writer, prof []DeviceOpProfile, backend string) {
	fmt.Fprintf(w, "\nOn the %s worker: its thread's time per call, queueing the work, and the device's, between events before and after each:\n", backend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "op\tcalls\tper token\tworker µs per call\tdevice µs per call\tdevice ms\tof the run\t\n")
	for _, p := range prof {
		fmt.Fprintf(tw, "%s\t%7d\t%9.1f\t%18.1f\t%18.1f\t%9.1f\t%9.1f%%\t\n", p.Op, p.Calls, p.PerToken, p.WorkerUS, p.DeviceUS, p.DeviceMS, 100*p.Share)
	}
	tw.Flush()
	if !slices.ContainsFunc(prof, func(p DeviceOpProfile) bool { return p.DeviceMS > 0 }) {
		fmt.Fprintln(w, "The worker's driver has no events: the device's times are unmeasured.")
	}
}

// localModel finds the named model MODEL for a local run: through the
// node's API when a node runs for --datadir, else in its database.
func (o *GenerateOptions) localModel(ctx context.Context) (*store.Model, error) {
	c, err := dialNode(o.IO.Err, o.DataDir, o.API)
	if err == nil {
		var m *store.Model
		if m, err = c.Model(ctx, o.Model); err == nil || !errors.Is(err, api.ErrNoNode) {
			return m, err
		}
	}
	if !errors.Is(err, api.ErrNoNode) || o.API != "" {
		return nil, err
	}
	return api.LocalModel(o.DataDir, o.Model)
}

// The network run.

// runNetwork runs the requests as a job (with --shards, a sharded job) of
// the runner through the local node.
func (o *GenerateOptions) runNetwork(ctx context.Context, reqs []llama.Request, files *modelFiles) error {
	defer o.closeLocal()
	req, err := o.request()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	// Replicas vote byte for byte, and in tolerance mode kernels of
	// different backend classes may break a near-tie differently: a
	// generation runs on one class unless --mixed-backends (the node does
	// the same for streamed jobs; --json and --shards do not stream).
	req.SameBackend = req.SameBackend || req.Mode == wire.ModeTolerance && !o.Mixed
	c, err := o.connect(ctx)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	m, files, err := o.resolveModel(files, func() (*store.Model, error) { return c.Model(ctx, o.Model) })
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if err := o.checkPrompts(reqs, m, files); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if m == nil {
		model, tok, err := files.upload(ctx, c)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		m = &store.Model{Model: model, Tokenizer: tok}
	}
	req.Data = models.JobData(m)
	runner, err := o.runnerBlob(ctx, c)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	req.Module, req.ModuleSize = runner.Digest, runner.Size
	input := models.EncodeRequests(reqs)
	out := newGenerationOutput(o, reqs)
	start := time.Now()
	if o.Shards > 1 {
		return o.runShards(ctx, c, req, input, out, start)
	}
	ib, err := c.PutBlob(ctx, input)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("input: %w", err)}
	}
	req.Input, req.InputSize = ib.Digest, ib.Size
	prog := newProgress(&o.SubmitOptions, req.Replicas)
	// The text is printed as the replicas agree on it, never before.
	var onOutput func([]byte)
	if !o.JSON {
		dec := &models.Decoder{OnText: out.text, OnDone: out.done, Stops: o.stops}
		onOutput = func(b []byte) { dec.Write(b) }
	}
	job, err := c.SubmitStreaming(ctx, req, prog.event, onOutput)
	prog.done()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	elapsed := time.Since(start)
	if !o.JSON {
		out.endLine()
		if err := printSummary(&o.SubmitOptions, job, elapsed); err != nil {
			return err
		}
	}
	ran := job.State == store.JobVerified || job.State == store.JobUnverified
	if !ran || job.Outcome == wire.OutcomeStopped {
		return submitExit(job)
	}
	if job.ExitCode != 0 {
		return &exitError{Code: ExitError, Err: fmt.Errorf("job %s: the runner exited with status %d", job.ID, job.ExitCode)}
	}
	cs, err := o.decodeOutput(ctx, c, job.Output, job.OutputSize)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("job %s: %w", job.ID, err)}
	}
	// An unverified result is printed, then exits 122, as submit's.
	err = out.finish(out.network(job, elapsed), cs)
	if job.State == store.JobUnverified {
		return submitExit(job)
	}
	return err
}

// runShards runs the requests as a sharded job: their lines cut into
// --shards shards.
func (o *GenerateOptions) runShards(ctx context.Context, c *api.Client, req api.SubmitRequest, input []byte,
	out *generationOutput, start time.Time) error {
	for _, b := range shard.Lines.Cut(input, o.Shards) {
		ib, err := c.PutBlob(ctx, b)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		req.Shards = append(req.Shards, jobs.ShardInput{Input: ib.Digest, InputSize: ib.Size})
	}
	sj, err := c.SubmitShards(ctx, req, shardProgress(&o.SubmitOptions, len(req.Shards)))
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if err := printShardedSummary(&o.SubmitOptions, sj, time.Since(start)); err != nil {
		return err
	}
	if sj.Output.IsZero() {
		return shardedExit(sj)
	}
	// What came is printed even if some of the output is bad: the
	// requests without an answer get a line saying so.
	cs, decErr := o.decodeOutput(ctx, c, sj.Output, sj.OutputSize)
	err = out.finish(nil, cs)
	if sj.State == store.JobUnverified {
		return shardedExit(sj)
	}
	if decErr != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("sharded job %s: %w", sj.ID, decErr)}
	}
	return err
}

// runnerBlob is the job's module: --runner, or the node's runner guest.
func (o *GenerateOptions) runnerBlob(ctx context.Context, c *api.Client) (store.BlobRef, error) {
	if o.Runner != "" {
		bi, err := putFile(ctx, c, o.Runner)
		if err != nil {
			return bi, fmt.Errorf("--runner: %w", err)
		}
		return bi, nil
	}
	return c.Runner(ctx)
}

// decodeOutput fetches a job's output and decodes the runner's events.
func (o *GenerateOptions) decodeOutput(ctx context.Context, c *api.Client, d digest.Digest, size int64) ([]models.Completion, error) {
	b, err := c.Blob(ctx, d, size)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	return models.DecodeStops(b, o.stops)
}

// The output.

// Generation is the --json output of generate: the completion, the
// runner's counts, and timings (see NewCmdGenerate for how each is
// measured); for a network job also the job, its verification and its
// replicas.
type Generation struct {
	models.Completion
	// Seed is a sampled completion's seed: --seed Seed gives its text
	// again.
	Seed            *uint64 `json:"seed,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	RunMS           float64 `json:"run_ms"`
	ElapsedMS       float64 `json:"elapsed_ms"`
	// FirstTokenMS, DecodeTokensPerSecond, CompileMS, LoadMS and Backend
	// are the local run's. LoadMS is the part of the run spent making the
	// weights' tensors (reading them, faulting their memory in), which
	// varies from run to run with the page cache and the memory's state.
	FirstTokenMS          float64 `json:"first_token_ms,omitempty"`
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second,omitempty"`
	CompileMS             float64 `json:"compile_ms,omitempty"`
	LoadMS                float64 `json:"load_ms,omitempty"`
	Backend               string  `json:"backend,omitempty"`
	// Profile is --profile's; DeviceProfile its GPU worker's, when the
	// backend runs in one.
	Profile       []OpProfile       `json:"profile,omitempty"`
	DeviceProfile []DeviceOpProfile `json:"device_profile,omitempty"`
	// Job, State, Verification, Agree and Replicas are the network job's,
	// as in submit's summary.
	Job          string        `json:"job,omitempty"`
	State        string        `json:"state,omitempty"`
	Verification string        `json:"verification,omitempty"`
	Agree        int           `json:"agree,omitempty"`
	Replicas     []ProviderRun `json:"replicas,omitempty"`
}

// generationOutput prints a generation: the one prompt's text as it grows
// (locally), a batch's lines as their requests end, or everything at the
// end (finish).
type generationOutput struct {
	o       *GenerateOptions
	reqs    []llama.Request
	batch   bool
	printed map[int]bool // requests whose text or line is out
	// ended is whether the streamed text's line has its newline (endLine).
	ended bool
	// start is when the run started; first and last when its first token
	// and last Done event came.
	start, first, last time.Time
}

func newGenerationOutput(o *GenerateOptions, reqs []llama.Request) *generationOutput {
	return &generationOutput{o: o, reqs: reqs, batch: o.Prompts != "", printed: map[int]bool{}}
}

// text is the Decoder's OnText: one prompt's text goes out as it comes,
// unless --json.
func (g *generationOutput) text(id int, s string) {
	if g.first.IsZero() {
		g.first = time.Now()
	}
	if !g.batch && !g.o.JSON {
		io.WriteString(g.o.IO.Out, s)
		g.printed[id] = true
	}
}

// endLine ends the line of one prompt's streamed text on stdout before
// the summary goes to stderr: on a terminal the two share the screen, and
// the summary's first line was glued to the completion's last.
func (g *generationOutput) endLine() {
	if !g.batch && !g.o.JSON && len(g.printed) > 0 && !g.ended {
		io.WriteString(g.o.IO.Out, "\n")
		g.ended = true
	}
}

// done is the Decoder's OnDone: a batch's line goes out as its request
// ends.
func (g *generationOutput) done(c models.Completion) {
	g.last = time.Now()
	if g.batch {
		g.printed[c.ID] = true
		g.printLine(c)
	}
}

// batchLine is a --prompts line of output: the completion, with a
// sampled request's seed, which gives its text again.
type batchLine struct {
	models.Completion
	Seed *uint64 `json:"seed,omitempty"`
}

// printLine prints request c.ID's line of a batch.
func (g *generationOutput) printLine(c models.Completion) {
	line := batchLine{Completion: c}
	if i := slices.IndexFunc(g.reqs, func(q llama.Request) bool { return q.ID == c.ID }); i >= 0 {
		line.Seed = seedOf(g.reqs[i])
	}
	printJSONLine(g.o.IO.Out, line)
}

// seedOf is a sampled request's seed, nil for a greedy one.
func seedOf(q llama.Request) *uint64 {
	if q.Temperature <= 0 {
		return nil
	}
	return &q.Seed
}

// local returns the timings of a local run that started at start.
func (g *generationOutput) local(res *host.Result, start time.Time) *Generation {
	gen := &Generation{RunMS: ms(res.Duration), ElapsedMS: ms(time.Since(start)), CompileMS: ms(res.Compile), LoadMS: ms(res.DataTime),
		Backend: res.Backend}
	if !g.first.IsZero() {
		gen.FirstTokenMS = ms(g.first.Sub(start) - res.Compile)
	}
	return gen
}

// network returns the record of a network job that took elapsed.
func (g *generationOutput) network(job *store.Job, elapsed time.Duration) *Generation {
	s := summarize(job, elapsed)
	gen := &Generation{ElapsedMS: s.ElapsedMS, Job: s.Job, State: s.State, Verification: s.Verification, Agree: s.Agree, Replicas: s.Providers}
	var runs float64
	for _, p := range s.Providers {
		if p.State == store.ReplicaDone.String() {
			gen.RunMS += p.RunMS
			runs++
		}
	}
	if runs > 0 {
		gen.RunMS /= runs
	}
	return gen
}

// finish prints what is not out yet and returns the error of a request
// the runner refused, or that has no answer.
func (g *generationOutput) finish(gen *Generation, cs []models.Completion) error {
	g.endLine() // before a notice on stderr
	byID := map[int]models.Completion{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	var failed []string
	for _, q := range g.reqs {
		c, ok := byID[q.ID]
		if !ok {
			c = models.Completion{ID: q.ID, Error: "no answer from the runner"}
		}
		if c.Error != "" {
			failed = append(failed, fmt.Sprintf("request %d: %s", c.ID, c.Error))
		}
		if c.Error == "" && c.Stop == "length" && c.CompletionTokens < q.MaxTokens {
			// The runner stops at the model's context, short of max_tokens:
			// said, not silent.
			who := "the completion"
			if g.batch {
				who = fmt.Sprintf("request %d", c.ID)
			}
			fmt.Fprintf(g.o.IO.Err, "infernet: %s stopped at the model's context after %d tokens (its prompt has %d), short of the %d asked\n",
				who, c.CompletionTokens, c.PromptTokens, q.MaxTokens)
		}
		switch {
		case g.batch:
			if !g.printed[c.ID] {
				g.printLine(c)
			}
		case g.o.JSON:
			gen.Completion = c
			gen.Seed = seedOf(q)
			if gen.RunMS > 0 {
				gen.TokensPerSecond = float64(c.CompletionTokens) / (gen.RunMS / 1000)
			}
			if d := g.last.Sub(g.first); c.CompletionTokens > 1 && !g.first.IsZero() && d > 0 {
				gen.DecodeTokensPerSecond = float64(c.CompletionTokens-1) / d.Seconds()
			}
			if err := printJSON(g.o.IO, gen); err != nil {
				return err
			}
		default:
			if !g.printed[c.ID] {
				io.WriteString(g.o.IO.Out, c.Completion)
			}
			if !g.ended {
				io.WriteString(g.o.IO.Out, "\n")
			}
		}
	}
	switch {
	case len(failed) == 1 && !g.batch:
		return &exitError{Code: ExitError, Err: fmt.Errorf("the runner: %s", failed[0])}
	case len(failed) > 0:
		return &exitError{Code: ExitError, Err: fmt.Errorf("%d of %d requests failed (their lines say why): %s", len(failed), len(g.reqs), strings.Join(failed, "; "))}
	}
	return nil
}

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) {
	json.NewEncoder(w).Encode(v)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
