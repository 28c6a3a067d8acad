package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// TestSubmitProofs: --proofs asks the node for proof mode, and the summary
// counts the accepted result's proofs.
func TestSubmitProofs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"job.wasm"}, false},
		{[]string{"job.wasm", "--proofs"}, true},
	} {
		var got *SubmitOptions
		var stderr bytes.Buffer
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &stderr},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		req, err := got.request()
		if err != nil || req.Proofs != tt.want {
			t.Errorf("%v: request proofs %v, %v; want %v", tt.args, req.Proofs, err, tt.want)
		}
	}
	job := &store.Job{State: store.JobVerified, Proofs: make([]gemmproof.Proof, 3)}
	if s := summarize(job, time.Second); s.Proofs != 3 {
		t.Errorf("summary counts %d proofs, want 3", s.Proofs)
	}
}

// TestSubmitPrecision: --precision goes to the node as the wire writes it
// (f32 as ""), needs tolerance mode for tf32 and bf16, and leaves the
// tolerance of a numeric comparison to the node (the precision's) unless
// --rtol or --atol is given.
func TestSubmitPrecision(t *testing.T) {
	tol := []string{"job.wasm", "--mode", "tolerance"}
	for _, tt := range []struct {
		args       []string
		precision  string
		rtol, atol float64
		err        string // in the refusal; "" for none
	}{
		{args: []string{"job.wasm"}},
		{args: append(tol, "--precision", "f32")},
		{args: append(tol, "--precision", "bf16"), precision: "bf16"},
		{args: append(tol, "--precision", "tf32", "--compare", "text"), precision: "tf32"},
		{args: append(tol, "--precision", "tf32", "--compare", "text", "--rtol", "0.1"), precision: "tf32", rtol: 0.1, atol: 1e-8},
		{args: append(tol, "--precision", "bf16", "--compare", "f32", "--atol", "0.5"), precision: "bf16", rtol: 1e-5, atol: 0.5},
		{args: append(tol, "--compare", "text"), rtol: 1e-5, atol: 1e-8},
		{args: []string{"job.wasm", "--precision", "bf16"}, err: "--precision bf16 needs --mode tolerance"},
		{args: append(tol, "--precision", "fp16"), err: `--precision: precision "fp16"`},
		{args: append(tol, "--rtol", "0.1"), err: "--rtol and --atol go with --compare"},
		{args: []string{"job.wasm", "--same-backend"}, err: "--same-backend needs --mode tolerance"},
	} {
		var got *SubmitOptions
		var stderr bytes.Buffer
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &stderr},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		req, err := got.request()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: %v, want an error saying %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || req.Precision != tt.precision || req.Rtol != tt.rtol || req.Atol != tt.atol {
			t.Errorf("%v: precision %q rtol %g atol %g, %v; want %q, %g, %g", tt.args, req.Precision, req.Rtol, req.Atol, err, tt.precision, tt.rtol, tt.atol)
		}
	}
}

// TestSubmitArgsAndShards: job arguments come only after --, and the
// shard flags cut the input as asked or are refused.
func TestSubmitArgsAndShards(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in")
	if err := os.WriteFile(input, []byte("a\nb\nc\nd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		want   []string // job arguments
		shards int      // -1: the shards are refused
		parse  bool     // the command line itself is refused
		note   string   // on stderr
	}{
		{args: []string{"job.wasm"}, shards: 1},
		{args: []string{"job.wasm", "--", "-x", "y"}, want: []string{"-x", "y"}, shards: 1},
		{args: []string{"job.wasm", "x"}, parse: true},
		{args: []string{"job.wasm", "--input", input, "--shards", "3"}, shards: 3},
		{args: []string{"job.wasm", "--input", input, "--shards", "9"}, shards: 4,
			note: "--shards 9: the input has 4 lines (--split lines), so 4 shards"},
		{args: []string{"job.wasm", "--input", input, "--shards", "2", "--split", "records:c"}, shards: 2},
		{args: []string{"job.wasm", "--input", input, "--shards", "2", "--split", "words"}, shards: -1},
		{args: []string{"job.wasm", "--shards", "2"}, shards: -1}, // no input
		{args: []string{"job.wasm", "--input-dir", dir}, shards: 1},
		{args: []string{"job.wasm", "--input-dir", dir, "--input", input}, shards: -1},
		{args: []string{"job.wasm", "--spot-check", "2"}, parse: true}, // an aggregator's terms, without --via
		{args: []string{"job.wasm", "--max-fee", "5"}, parse: true},
		{args: []string{"job.wasm", "--via", "12D3KooWEx", "--spot-check", "2"}, shards: 1},
	}
	for _, tt := range tests {
		var got *SubmitOptions
		var stderr bytes.Buffer
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &stderr},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if tt.parse {
			if err == nil {
				t.Errorf("%v: accepted, want refused", tt.args)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if req, err := got.request(); err != nil || !slices.Equal(req.Args, tt.want) {
			t.Errorf("%v: job args %q, %v; want %q", tt.args, req.Args, err, tt.want)
		}
		if got.Shards <= 1 && got.InputDir == "" {
			continue
		}
		shards, err := got.shardInputs()
		switch {
		case tt.shards < 0 && err == nil:
			t.Errorf("%v: %d shards, want refused", tt.args, len(shards))
		case tt.shards >= 0 && (err != nil || len(shards) != tt.shards):
			t.Errorf("%v: %d shards, %v; want %d", tt.args, len(shards), err, tt.shards)
		}
		if got := strings.TrimSpace(stderr.String()); got != tt.note {
			t.Errorf("%v: stderr %q, want %q", tt.args, got, tt.note)
		}
	}
}

func TestDataFlags(t *testing.T) {
	tests := []struct {
		flags []string
		want  map[string]string
	}{
		{nil, map[string]string{}},
		{[]string{"w.bin=/tmp/w", "v=rel/v.txt"}, map[string]string{"w.bin": "/tmp/w", "v": "rel/v.txt"}},
		{[]string{"a=b=c"}, map[string]string{"a": "b=c"}},
		{[]string{"w"}, nil},
		{[]string{"=f"}, nil},
		{[]string{"w="}, nil},
		{[]string{"a/b=f"}, nil},
		{[]string{"..=f"}, nil},
		{[]string{"w=1", "w=2"}, nil},
	}
	for _, tt := range tests {
		got, err := dataFiles("--data", tt.flags)
		if (err != nil) != (tt.want == nil) || (tt.want != nil && !maps.Equal(got, tt.want)) {
			t.Errorf("dataFiles(%q) = %v, %v; want %v", tt.flags, got, err, tt.want)
		}
	}
}

// TestSubmitSummaryNotRun: a job every replica agrees could not run (a
// compile bomb refused as an invalid module) reads as not run, not as
// verified, and its replicas as not run rather than "0.0 ms on".
func TestSubmitSummaryNotRun(t *testing.T) {
	job := &store.Job{State: store.JobVerified, Agree: 2, Outcome: wire.OutcomeStopped, Error: "invalid module",
		Replicas: []store.Replica{{Index: 0, Provider: "12D3KooWprovider0000", State: store.ReplicaDone, Result: &wire.Result{}},
			{Index: 1, Provider: "12D3KooWprovider1111", State: store.ReplicaDone, Result: &wire.Result{}}}}
	var stderr bytes.Buffer
	if err := printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second); err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if strings.Contains(out, "verified") || !strings.Contains(out, "not run: invalid module (2 of 2 replicas agree)") ||
		strings.Contains(out, " ms on ") || strings.Count(out, "(not run)") != 2 {
		t.Errorf("summary:\n%s", out)
	}
	if err := submitExit(job); err == nil || !strings.Contains(err.Error(), "invalid module") {
		t.Errorf("exit: %v, want ExitNotRun naming the cause", err)
	}
	// --json says so too: "verified" with exit code 0 had read as a
	// success to a script (a newcomer's walk).
	var js bytes.Buffer
	if err := printSummary(&SubmitOptions{IO: IO{Out: &js, Err: io.Discard}, JSON: true}, job, time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"outcome": "stopped"`) {
		t.Errorf("--json of a job not run: %s", js.String())
	}
	// Results that agreed on nothing have no outcome (its zero value had
	// read "exited": a red team's read).
	failed := &store.Job{State: store.JobFailed, Error: "no replica finished in time",
		Replicas: []store.Replica{{Provider: "12D3KooWprovider0000", State: store.ReplicaDone, Result: &wire.Result{Outcome: wire.OutcomeTimeout}}}}
	if s := summarize(failed, time.Second); s.Outcome != "" {
		t.Errorf("a job with no verdict: outcome %q", s.Outcome)
	}
	// Unverified (one replica), it still says why the job did not run.
	job.State, job.Agree, job.Error, job.Replicas = store.JobUnverified, 1, "trap", job.Replicas[:1]
	stderr.Reset()
	if err := printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second); err != nil {
		t.Fatal(err)
	}
	if out := stderr.String(); !strings.Contains(out, "unverified: not run: trap (1 replica said so, unchecked)") {
		t.Errorf("an unverified stop's summary:\n%s", out)
	}
}

// TestSubmitSummaryBacking: a verified job's summary says what stood
// behind it besides the vote, naming why there was no collateral, and
// what a paid job paid at most.
func TestSubmitSummaryBacking(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  wire.JobAnnounce
		want []string
	}{
		{"free", wire.JobAnnounce{}, []string{"no collateral (free mode)"}},
		{"paid", wire.JobAnnounce{Price: 5000, Collateral: 250000}, []string{"250000 msat of collateral", "paid at most 5000 msat per replica"}},
		{"paid, default collateral", wire.JobAnnounce{Price: 5000, Collateral: 250000, CollateralTimes: 50},
			[]string{"collateral of 50 times each provider's price (at most 250000 msat)"}},
		{"none asked", wire.JobAnnounce{Price: 5000}, []string{"(none asked: --collateral -1)", "paid at most 5000"}},
		{"fair", wire.JobAnnounce{Price: 5000, Settle: wire.SettleFair}, []string{"(fair exchange", "paid at most 5000"}},
	} {
		job := &store.Job{State: store.JobVerified, Agree: 1, Announce: tc.ann}
		var stderr bytes.Buffer
		if err := printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, stderr.String(), w)
			}
		}
		if tc.ann.Price == 0 && strings.Contains(stderr.String(), "paid") {
			t.Errorf("%s: %q", tc.name, stderr.String())
		}
	}
}

// TestSubmitOutputWithJSON: with --json, stdout is the summary's, so a
// job's output goes to --output alone; without it, stderr says the output
// was not written, and how to have it.
func TestSubmitOutputWithJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		name, output, stderr string
	}{
		{"no --output", "", "not written: with --json, stdout is the summary's; give --output FILE"},
		{"--output", file, ""},
	} {
		var out, errOut bytes.Buffer
		o := &SubmitOptions{JSON: true, Output: c.output, IO: IO{Out: &out, Err: &errOut}}
		if err := writeSubmitOutput(o, []byte("the job's output")); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 || !strings.Contains(errOut.String(), c.stderr) || (c.stderr == "") != (errOut.Len() == 0) {
			t.Errorf("%s: stdout %q, stderr %q; want nothing on stdout and %q on stderr", c.name, out.String(), errOut.String(), c.stderr)
		}
		if c.output != "" {
			if b, err := os.ReadFile(c.output); err != nil || string(b) != "the job's output" {
				t.Errorf("%s: file holds %q, %v", c.name, b, err)
			}
		}
	}
}

// TestExitOf: `jobs --runs` shows an exit status only for a run to its
// end; a failed, stopped or timed-out run's 0 is no status.
func TestExitOf(t *testing.T) {
	for _, tc := range []struct {
		res  *wire.Result
		want string
	}{
		{nil, "-"},
		{&wire.Result{Outcome: wire.OutcomeExited, ExitCode: 3}, "3"},
		{&wire.Result{Outcome: wire.OutcomeExited}, "0"},
		{&wire.Result{Outcome: wire.OutcomeFailed}, "-"},
		{&wire.Result{Outcome: wire.OutcomeStopped}, "-"},
		{&wire.Result{Outcome: wire.OutcomeTimeout}, "-"},
	} {
		if got := exitOf(tc.res); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.res, got, tc.want)
		}
	}
}

// TestRunTime: `jobs --runs` shows a run's time from its result, and the
// time so far of one still fetching or running.
func TestRunTime(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		run  store.Run
		want string
	}{
		{store.Run{State: store.RunDelivered, Result: &wire.Result{RunMicros: 1_500_000}}, "1.5s"},
		{store.Run{State: store.RunRunning, Started: now.Add(-90 * time.Second)}, "1m30s so far"},
		{store.Run{State: store.RunAccepted, Started: now.Add(-2 * time.Second)}, "2s so far"},
		{store.Run{State: store.RunFailed, Started: now.Add(-time.Minute)}, "-"},
	} {
		if got := runTime(&tc.run, now); got != tc.want {
			t.Errorf("%v run: %q, want %q", tc.run.State, got, tc.want)
		}
	}
}

// TestPrintJSONEmpty: an empty listing prints [], not null (peers,
// earnings and spending had printed null, jobs and models []).
func TestPrintJSONEmpty(t *testing.T) {
	var out bytes.Buffer
	var none []store.Payment
	if err := printJSON(IO{Out: &out}, none); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("an empty list: %q, %v", out.String(), err)
	}
}

// TestSubmitRefusals: terms no provider could run, and an --output that
// cannot be written, are refused before anything is sent.
func TestSubmitRefusals(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(dir, "job.wasm")
	os.WriteFile(module, []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x07\x0a\x01\x06_start\x00\x00\x0a\x04\x01\x02\x00\x0b"), 0o600) // (module (func (export "_start")))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "5"}, "--memory 5: under one 64 KiB page"},
		{[]string{"--shards", "0"}, "--shards 0: want 1 to"},
		{[]string{"--collateral", "-7"}, "--collateral -7: want millisatoshi"},
		{[]string{"--split", "bytes"}, "--split cuts the input into --shards N"},
		{[]string{"--output", filepath.Join(dir, "absent", "out")}, "no directory"},
		{[]string{"--output", dir}, "a directory"},
	} {
		var got *SubmitOptions
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(append([]string{module}, tc.args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		_, err := got.request()
		if err == nil {
			err = got.checkFiles()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestSubmitSummaryExitStatus: a verified job that exited non-zero says
// so in the summary, not only in the command's status.
func TestSubmitSummaryExitStatus(t *testing.T) {
	job := &store.Job{State: store.JobVerified, Agree: 2, Outcome: wire.OutcomeExited, ExitCode: 2,
		Replicas: []store.Replica{{Index: 0, Provider: "12D3KooWprovider0000", State: store.ReplicaDone, Result: &wire.Result{}},
			{Index: 1, Provider: "12D3KooWprovider1111", State: store.ReplicaDone, Result: &wire.Result{}}}}
	var stderr bytes.Buffer
	if err := printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "the job exited with status 2") {
		t.Errorf("summary:\n%s", stderr.String())
	}
	// With the end of its stderr, the provider's word, its last lines and
	// no terminal escapes.
	job.Replicas[1].Result.Stderr = []byte("line 0\n" + strings.Repeat("noise\n", 19) + "evil \u202egnp.exe\u200b\u2028" + strings.Repeat("x", 300) + "\npanic: boom \x1b[2J\n\tmain.go:7\n")
	stderr.Reset()
	printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second)
	out := stderr.String()
	if !strings.Contains(out, "as replica 1's provider sent it") || !strings.Contains(out, "| panic: boom \uFFFD[2J") ||
		strings.Contains(out, "\x1b") || strings.Contains(out, "line 0") || strings.Count(out, "    | ") != stderrLines ||
		strings.ContainsAny(out, "\u202e\u200b\u2028") || !strings.Contains(out, "evil \uFFFDgnp.exe\uFFFD\uFFFD"+strings.Repeat("x", jobs.StderrWidth-15)+"…\n") {
		t.Errorf("a failed job's stderr in its summary:\n%s", out)
	}
	// --json carries it whole.
	stderr.Reset()
	printSummary(&SubmitOptions{IO: IO{Out: &stderr, Err: io.Discard}, JSON: true}, job, time.Second)
	var js struct {
		Stderr string `json:"stderr"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &js); err != nil || !strings.HasSuffix(js.Stderr, "\tmain.go:7\n") {
		t.Errorf("--json's stderr: %q, %v", js.Stderr, err)
	}
	job.Replicas[1].Result.Stderr = nil
	job.ExitCode = 0
	stderr.Reset()
	printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second)
	if strings.Contains(stderr.String(), "exited with status") {
		t.Errorf("a job that exited 0:\n%s", stderr.String())
	}
}

// TestSubmitSummaryConvicted: a liar this node's own run proved wrong is
// said convicted, its collateral taken when the job had some; one only
// outvoted is said outvoted.
func TestSubmitSummaryConvicted(t *testing.T) {
	job := &store.Job{State: store.JobVerified, Agree: 1, Outcome: wire.OutcomeExited, Verification: "audit",
		Liars: []string{"12D3KooWliar0000aaaa", "12D3KooWliar1111bbbb"}, Convicted: []string{"12D3KooWliar0000aaaa"}}
	job.Announce.Collateral = 5000
	var stderr bytes.Buffer
	if err := printSummary(&SubmitOptions{IO: IO{Out: io.Discard, Err: &stderr}}, job, time.Second); err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if !strings.Contains(out, "convicted: …0000aaaa (its result proved wrong here: banned, and its collateral on this job taken)") ||
		!strings.Contains(out, "outvoted: …1111bbbb (recorded here as a liar") {
		t.Errorf("summary:\n%s", out)
	}
}
