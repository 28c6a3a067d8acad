package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/wire"
)

// TestResult: a run in a sandbox of Open's, its output spooled, becomes the
// result replicas vote on: how it ended (exited with its code, stopped
// with the class of its stop and none of the run's own detail, timed
// out, failed before it ran), the output's digest and size, the
// output inline when small, and in the node's blob store (pinned) when
// too big for the run's record.
func TestResult(t *testing.T) {
	ctx := context.Background()
	sb, set, err := Open(ctx, Config{Backend: "reference", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sb.Close(ctx)
		set.Close()
	})
	blobs := partstest.New(t, partstest.Hosts(t, 1)[0]).Blobs
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxRecordedOutput/16+1)
	base := wire.Terms{Memory: 32 << 20, TimeoutMS: 30_000, MaxOutput: 1 << 20}
	for _, tc := range []struct {
		name, module string
		input        []byte
		edit         func(*wire.Terms)
		outcome      wire.Outcome
		exit         uint32
		err          string // the result's Error
		output       []byte // nil: not checked
	}{
		{"exited", "jobs/cat/cat.wasm", []byte("hello\n"), nil, wire.OutcomeExited, 0, "", []byte("hello\n")},
		{"exit code", "bad/proc_exit3.wasm", nil, nil, wire.OutcomeExited, 3, "", []byte("exiting with 3\n")},
		{"output too big for the record", "jobs/cat/cat.wasm", big, nil, wire.OutcomeExited, 0, "", big},
		{"trap", "bad/trap_unreachable.wasm", nil, nil, wire.OutcomeStopped, 0, host.ErrTrap.Error(), nil},
		{"output limit", "bad/output_flood.wasm", nil, func(m *wire.Terms) { m.MaxOutput = 1000 }, wire.OutcomeStopped, 0, host.ErrOutputLimit.Error(), nil},
		{"invalid module", "bad/garbage.wasm", nil, nil, wire.OutcomeStopped, 0, host.ErrInvalidModule.Error(), []byte{}},
		// A later ABI's function: this provider's limit, not the job's.
		{"module of a later ABI", "bad/future_import.wasm", nil, nil, wire.OutcomeFailed, 0, "", nil},
		{"timeout", "bad/infinite_loop.wasm", nil, func(m *wire.Terms) { m.TimeoutMS = 100 }, wire.OutcomeTimeout, 0, "", []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			module, err := os.ReadFile(filepath.Join(testdata(t), tc.module))
			if err != nil {
				t.Fatal(err)
			}
			terms := base
			if tc.edit != nil {
				tc.edit(&terms)
			}
			sp, err := NewSpool(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Remove()
			an := &wire.JobAnnounce{Terms: terms, Deadline: time.Now().Add(time.Minute).UnixMilli()}
			out, runErr := sb.Run(ctx, host.Job{Module: module, Input: tc.input, Stdout: sp}, JobConfig(&terms, [32]byte{}))
			res := Result(blobs, &wire.Result{}, out, runErr, an, sp)
			if res.Outcome != tc.outcome || res.ExitCode != tc.exit {
				t.Fatalf("outcome %v, exit %d (%v); want %v, exit %d", res.Outcome, res.ExitCode, res.Error, tc.outcome, tc.exit)
			}
			if tc.err != "" && res.Error != tc.err {
				t.Fatalf("error %q, want the stop's class %q", res.Error, tc.err)
			}
			if res.Outcome == wire.OutcomeStopped && runErr.Error() != res.Error && !strings.Contains(string(res.Stderr), "[infernet: "+runErr.Error()+"]") {
				t.Errorf("stderr %q; want the stop's detail %q, which its class leaves out", res.Stderr, runErr)
			}
			if tc.output == nil {
				return
			}
			if res.Output != blob.Sum(tc.output) || res.OutputSize != int64(len(tc.output)) {
				t.Fatalf("output %s of %d bytes; want %s of %d", res.Output.Short(), res.OutputSize, blob.Sum(tc.output).Short(), len(tc.output))
			}
			if len(tc.output) > 0 && !bytes.Equal(res.OutputData, tc.output) {
				t.Fatalf("inline output %q, want %q", res.OutputData, tc.output)
			}
			stored, err := blobs.Bytes(res.Output, int64(len(tc.output)))
			if wantStored := len(tc.output) > MaxRecordedOutput; wantStored != (err == nil) || wantStored && !bytes.Equal(stored, tc.output) {
				t.Fatalf("the output in the blob store: %d bytes, %v; want it there: %v", len(stored), err, wantStored)
			}
			if len(tc.output) > MaxRecordedOutput {
				// Kept until the client has had time to fetch it.
				if _, err := blobs.GC(func(blob.Digest) bool { return false }, 0); err != nil {
					t.Fatal(err)
				}
				if _, ok := blobs.Has(res.Output); !ok {
					t.Fatal("the stored output was collected: not pinned")
				}
			}
		})
	}

	t.Run("stderr", func(t *testing.T) {
		// A flood of stderr runs to its time limit; the result carries the
		// end of it.
		module, err := os.ReadFile(filepath.Join(testdata(t), "bad/stderr_flood.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		sp, err := NewSpool(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Remove()
		terms := base
		terms.TimeoutMS = 100
		out, runErr := sb.Run(ctx, host.Job{Module: module, Stdout: sp}, JobConfig(&terms, [32]byte{}))
		res := Result(blobs, &wire.Result{}, out, runErr, &wire.JobAnnounce{Terms: terms}, sp)
		if res.Outcome != wire.OutcomeTimeout || len(res.Stderr) != wire.MaxResultStderr || res.Stderr[len(res.Stderr)-1] != 'e' {
			t.Errorf("outcome %v, stderr of %d bytes; want a timeout with the last %d bytes of its stderr", res.Outcome, len(res.Stderr), wire.MaxResultStderr)
		}
	})

	t.Run("no run", func(t *testing.T) {
		sp, err := NewSpool(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Remove()
		runErr := errors.New("compiling: out of disk")
		res := Result(blobs, &wire.Result{}, nil, runErr, &wire.JobAnnounce{}, sp)
		if res.Outcome != wire.OutcomeFailed || res.Error != runErr.Error() || !res.Output.IsZero() {
			t.Errorf("outcome %v, error %q, output %s; want failed, no output", res.Outcome, res.Error, res.Output.Short())
		}
	})
}

// TestProviderFailures: a run that failed on the provider's side (a GPU
// that faulted, a model cache too small, a proof it could not make, a
// precision it does not offer, a cancel) is reported as the provider's
// failure, never as the job's outcome, even when the guest had run.
// (Moved from node.)
func TestProviderFailures(t *testing.T) {
	// A disk too full for the output too: signed as a stop, it was a vote
	// against every honest replica, and an audit's own run like it
	// convicted them (a red-team run).
	for _, cause := range []error{host.ErrDeviceLost, host.ErrModelCache, host.ErrProof, host.ErrPrecision, host.ErrCanceled,
		host.ErrOutputWrite, host.ErrHostTooOld, errors.New("a cause no one listed")} {
		runErr := fmt.Errorf("tensor backend cuda: %w: detail", cause)
		res := Result(nil, &wire.Result{}, &host.Result{ExitCode: 0}, runErr, nil, nil)
		if res.Outcome != wire.OutcomeFailed || res.Error != runErr.Error() || res.OutputData != nil {
			t.Errorf("%v: outcome %v, error %q", cause, res.Outcome, res.Error)
		}
	}
}

// TestStopClass: a stop is named by its cause alone, however it was
// wrapped, so that replicas that stopped alike agree.
func TestStopClass(t *testing.T) {
	for _, e := range []error{host.ErrInvalidModule, host.ErrImportNotAllowed, host.ErrTrap, host.ErrMemoryLimit,
		host.ErrOutputLimit, host.ErrFuelLimit, host.ErrProofLimit} {
		if got := StopClass(fmt.Errorf("at 0x%x in guest: %w", 1234, e)); got != e.Error() {
			t.Errorf("StopClass of a wrapped %q: %q", e, got)
		}
	}
	if got := StopClass(errors.New("something else")); got != "something else" {
		t.Errorf("StopClass of another error: %q", got)
	}
}

// TestSpool: the spool hashes what is written as it goes, reads it back,
// and a rewrite replaces both the output and its digest.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	sp, err := NewSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hello, ", "world\n"} {
		if _, err := sp.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := sp.Bytes(); err != nil || string(b) != "hello, world\n" || sp.Digest() != blob.Sum(b) {
		t.Fatalf("spooled %q, %v; digest %s", b, err, sp.Digest().Short())
	}
	if err := sp.Rewrite(bytes.ToUpper); err != nil {
		t.Fatal(err)
	}
	if b, err := sp.Bytes(); err != nil || string(b) != "HELLO, WORLD\n" || sp.Digest() != blob.Sum([]byte("HELLO, WORLD\n")) {
		t.Fatalf("rewritten %q, %v; digest %s", b, err, sp.Digest().Short())
	}
	sp.Remove()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d files left after Remove", len(left))
	}
}

// TestStderrTail: a result carries the end of stderr, and, where the end
// left it out, the line that says why a Go guest died ("fatal error: out
// of memory" before a long dump of goroutines: a newcomer's walk saw the
// frames alone).
func TestStderrTail(t *testing.T) {
	frames := bytes.Repeat([]byte("goroutine 1 [running]:\n\tmain.main()\n"), 400)
	for _, tc := range []struct {
		name        string
		stderr      []byte
		first, last string
	}{
		{"short", []byte("fatal error: out of memory\nframes\n"), "fatal error: out of memory", "frames\n"},
		{"Go out of memory", append([]byte("runtime: out of memory: cannot allocate\nfatal error: out of memory\n\n"), frames...), "fatal error: out of memory\n…\n", "main.main()\n"},
		{"no cause", frames, "", "main.main()\n"},
		{"a mark mid-line first", append([]byte("log: no panic: here\npanic: runtime error: index out of range\n"), frames...), "panic: runtime error: index out of range\n…\n", "main.main()\n"},
	} {
		got := stderrTail(tc.stderr)
		if len(got) > wire.MaxResultStderr || !bytes.HasPrefix(got, []byte(tc.first)) || !bytes.HasSuffix(got, []byte(tc.last)) {
			t.Errorf("%s: %d bytes, %q…%q", tc.name, len(got), got[:min(len(got), 40)], got[max(0, len(got)-20):])
		}
		if tc.first == "" && !bytes.Equal(got, tc.stderr[len(tc.stderr)-wire.MaxResultStderr:]) {
			t.Errorf("%s: not the end of stderr", tc.name)
		}
	}
}
