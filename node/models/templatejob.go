package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/guest/go/chattemplate"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/reference"
)

// The limits of a chat template's job: a GGUF's template is whoever made
// the file's code, so it is compiled and rendered in the sandbox (the
// chattemplate guest), never in the node's own process, where one that
// recursed, or asked for range(4000000000), killed the node.
const (
	// TemplateMemory is the job's memory: the guest's heap, the request
	// (up to the API's 4 MiB body) and the prompt.
	TemplateMemory = 256 << 20
	// TemplateFuel is the job's work, the bound of its CPU time that is
	// the same on every machine: reading a request of the API's largest
	// (4 MiB of messages of 10 kB) takes 34e9 units and rendering it 1e9,
	// a chat of a few messages 0.07e9 in all. A request of tens of
	// thousands of messages of a few bytes each passes it.
	TemplateFuel = 100_000_000_000
	// TemplateTimeout is the job's wall-clock time, a backstop of the
	// fuel's on a loaded machine (100e9 units take 1 to 4 s).
	TemplateTimeout = 10 * time.Second
	// TemplateOutput caps the prompt's bytes (the API's 4 MiB body, and
	// the template's own text between messages).
	TemplateOutput = 8 << 20
	// templateStderr caps the template's error.
	templateStderr = 64 << 10
)

// TemplateCacheDir is where the chattemplate guest, compiled, is kept
// across processes (host.Config.CacheDir), or "" for none: its compile
// takes 2–3 s, which `infernet generate --chat` would pay on every run.
// The user's cache directory by default, which `infernet node` and `run`
// share; a program sets it before its first chat template.
var TemplateCacheDir = host.DefaultCacheDir()

// templateJob is the job config of every chat template's job.
var templateJob = host.NewJobConfig().
	WithMemoryLimit(TemplateMemory).
	WithTimeout(TemplateTimeout).
	WithFuelLimit(TemplateFuel).
	WithMaxOutput(TemplateOutput).
	WithMaxStderr(templateStderr)

// templateRunner is the sandbox of chat templates, shared by the process:
// one sandbox, its guest compiled once, on first use, and at most a job
// per CPU at once (each may take TemplateMemory).
type templateRunner struct {
	sb     *host.Sandbox
	module []byte
	digest digest.Digest
	slots  chan struct{} // a token per job running
}

// templates returns the process's template runner, made on first use.
// The sandbox is made once, error and all: a TemplateCacheDir that cannot
// be made or written (a read-only home, a disk full at the first chat) is
// passed over for a cache in memory, or every template of the process
// would fail for good, where the engine in the process needed no disk.
var templates = sync.OnceValues(func() (*templateRunner, error) {
	r, err := newTemplateRunner(TemplateCacheDir)
	if err != nil && TemplateCacheDir != "" {
		r, err = newTemplateRunner("")
	}
	return r, err
})

// newTemplateRunner makes a template runner whose compiled guest is kept in
// cacheDir ("" for in memory only).
func newTemplateRunner(cacheDir string) (*templateRunner, error) {
	ctx := context.Background()
	sb, err := host.New(ctx, host.Config{
		Reference:  reference.New(reference.Config{Threads: 1}), // the guest makes no tensors
		ModelCache: -1,
		CacheDir:   cacheDir,
	})
	if err != nil {
		return nil, fmt.Errorf("chat template sandbox: %w", err)
	}
	r := &templateRunner{sb: sb, module: chattemplate.Module(), slots: make(chan struct{}, runtime.NumCPU())}
	if r.digest, err = sb.Compile(ctx, r.module, templateJob); err != nil {
		sb.Close(ctx)
		return nil, fmt.Errorf("chat template sandbox: %w", err)
	}
	return r, nil
}

// runTemplate runs the chattemplate guest on q and returns its stdout. An
// error of the template, or a template past its job's limits, is an
// ErrTemplate error; a cancelled ctx, or a sandbox that would not run,
// another.
func runTemplate(ctx context.Context, q chattemplate.Request) (string, error) {
	r, err := templates()
	if err != nil {
		return "", err
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-ctx.Done():
		return "", fmt.Errorf("chat template: %w", ctx.Err())
	}
	// Encoded once a slot is held, so that the requests waiting for one
	// hold only their messages, and without Go's HTML escaping: each '<',
	// '>' and '&' of a message was six bytes (\u003c) for the guest to
	// read, and a 3 MiB message of code ran out of fuel.
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(q); err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	res, err := r.sb.Run(ctx, host.Job{Module: r.module, Digest: r.digest, Input: in.Bytes()}, templateJob)
	if err != nil {
		if ctx.Err() != nil {
			// The caller's deadline or cancel, which the sandbox reads
			// as its own timeout: not the template's doing.
			return "", fmt.Errorf("chat template: %w", ctx.Err())
		}
		return "", limitError(err)
	}
	switch res.ExitCode {
	case 0:
		return string(res.Output), nil
	case chattemplate.ExitTemplate:
		return "", fmt.Errorf("%w: %s", ErrTemplate, strings.TrimSuffix(string(res.Stderr), "\n"))
	}
	// The Go runtime's own exit: out of memory, a stack past the guest's
	// cap (a template that recursed without end).
	return "", fmt.Errorf("%w: the model's chat template exceeded its memory limit of %d MiB (%s)",
		ErrTemplate, TemplateMemory>>20, fatalLine(res.Stderr))
}

// limitError is the error of a template job the sandbox stopped.
func limitError(err error) error {
	switch {
	case errors.Is(err, host.ErrTimeout), errors.Is(err, host.ErrFuelLimit):
		return fmt.Errorf("%w: the model's chat template exceeded its time limit of %v: %w", ErrTemplate, TemplateTimeout, err)
	case errors.Is(err, host.ErrMemoryLimit), errors.Is(err, host.ErrTrap):
		return fmt.Errorf("%w: the model's chat template exceeded its memory limit of %d MiB: %w", ErrTemplate, TemplateMemory>>20, err)
	case errors.Is(err, host.ErrOutputLimit):
		return fmt.Errorf("%w: the model's chat template wrote more than its limit of %d MiB: %w", ErrTemplate, TemplateOutput>>20, err)
	}
	return fmt.Errorf("chat template: %w", err)
}

// fatalLine is the Go runtime's "fatal error: ..." line of a guest's
// stderr, or its first line.
func fatalLine(stderr []byte) string {
	lines := bytes.Split(bytes.TrimSpace(stderr), []byte("\n"))
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("fatal error:")) {
			return string(l)
		}
	}
	return string(lines[0])
}
