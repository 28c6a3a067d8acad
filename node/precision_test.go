package node

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/reference"
	"github.com/infernet/infernet/node/internal/client"
	iclient "github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/redundancy"
)

// fakeGPUSandbox is a sandbox whose fast backend is package cuda on its
// FAKE driver (host/tensor/cuda/testdata/fakecuda.c; fake driver: checks
// our call sequence, not a GPU): a device of compute capability 8.0 that
// offers tf32 and bf16, run on host memory. It skips without a C compiler.
func fakeGPUSandbox(t *testing.T) (*host.Sandbox, *backends.Set) {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skip("no C compiler to build the fake CUDA driver")
	}
	src := "../host/tensor/cuda/testdata/fakecuda.c"
	// The compiler reads these, not this process: stat them so go test's
	// cache notices when they change.
	for _, f := range []string{src, "../host/tensor/cuda/kernels.cu"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", lib, src, "-lm", "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	gpu, err := cuda.New(cuda.Config{Driver: lib, CUBLAS: lib})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gpu.Close() })
	set := &backends.Set{Reference: reference.New(reference.Config{}), Fast: gpu}
	sb, err := host.New(context.Background(), host.Config{Reference: set.Reference, Fast: gpu, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb, set
}

// TestPrecision: a bf16 job goes to the two providers whose (fake) GPU
// offers bf16 and runs at it there, never to the CPU provider, which
// refuses it when asked; with more replicas than providers offering it
// the client says so; exact mode and unknown names are refused before
// anything is announced; a numeric comparison without a tolerance of its
// own gets the precision's.
func TestPrecision(t *testing.T) {
	t.Parallel() // waits far more than it computes
	sb, set := fakeGPUSandbox(t)
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide && i < 2 {
			c.Sandbox, c.Backends = sb, set
		} else {
			c.Backend = "cpu"
		}
		if c.Provide {
			i++
		}
	}).vouch()
	gpus := []string{net.providers[0].ID().String(), net.providers[1].ID().String()}
	for k, want := range [][]string{{"tf32", "bf16"}, {"tf32", "bf16"}, nil} {
		if got := net.providers[k].provider.Capabilities().Precisions; !slices.Equal(got, want) {
			t.Errorf("provider %d advertises precisions %v, want %v", k, got, want)
		}
	}

	module, input := readTestdata(t, "jobs/mlp/mlp.wasm"), readTestdata(t, "jobs/mlp/input.txt")
	local := func(p tensor.Precision) []byte {
		cfg := host.NewJobConfig().WithMode(1).WithPrecision(p)
		res, err := sb.Run(context.Background(), host.Job{Module: module, Input: input}, cfg)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("local run at %v: %v", p, err)
		}
		return res.Output
	}
	atBF16, atF32 := local(tensor.BF16), local(tensor.F32)
	if bytes.Equal(atBF16, atF32) {
		t.Fatal("the mlp job's output is the same at bf16 and f32: it shows nothing")
	}

	s := spec(t, net.client, module, input)
	s.Mode, s.Precision = wire.ModeTolerance, "bf16"
	for range 2 {
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("bf16 job: %+v, %v", job, err)
		}
		if job.Announce.Precision != "bf16" {
			t.Errorf("announced precision %q", job.Announce.Precision)
		}
		for _, r := range job.Replicas {
			if !slices.Contains(gpus, r.Provider) || r.Result == nil || r.Result.Backend != "cuda" {
				t.Fatalf("replica on %s (%+v); want the fake GPUs only", r.Provider, r.Result)
			}
		}
		if out, err := net.client.Blob(job.Output, 1<<20); err != nil || !bytes.Equal(out, atBF16) {
			t.Fatalf("output %q, %v; want the bf16 run's %q", out, err, atBF16)
		}
	}

	// Compared as numbers with no tolerance given: bf16's.
	num := s
	num.Format = uint8(redundancy.FormatText)
	job, err := net.client.Submit(context.Background(), num, nil)
	rtol, atol := tensor.BF16.Tolerance()
	if err != nil || job.State != store.JobVerified || job.Announce.Rtol != rtol || job.Announce.Atol != atol {
		t.Fatalf("bf16 job compared as text: %+v, %v; want verified within rtol %g atol %g", job, err, rtol, atol)
	}

	// Three replicas: only two providers offer bf16.
	three := s
	three.Replicas = 3
	job, err = net.client.Submit(context.Background(), three, nil)
	if !errors.Is(err, jobs.ErrNoProviders) || !strings.Contains(err.Error(), "precision bf16") || job == nil || job.State != store.JobFailed {
		t.Fatalf("three bf16 replicas: %+v, %v; want jobs.ErrNoProviders naming the precision", job, err)
	}

	// The CPU provider refuses a bf16 announce, and bids on an f32 one.
	terms := s
	client.SetDefaults(&terms)
	ann := net.client.client.Announce(terms, time.Now())
	if b := net.providers[2].provider.Bid(ann); b.Accept || !strings.Contains(b.Reason, "precision bf16 not offered") {
		t.Errorf("CPU provider's bid on bf16: %+v", b)
	}
	ann.Precision = ""
	if b := net.providers[2].provider.Bid(ann); !b.Accept {
		t.Errorf("CPU provider's bid on f32: %+v", b)
	}

	// The client (on the CPU) does not audit a bf16 job compared as
	// numbers: an f32 run would prove nothing of the replicas.
	ann.Precision, ann.Format = "bf16", uint8(redundancy.FormatText)
	if _, err := net.client.client.Audit(context.Background(), ann, input); !errors.Is(err, iclient.ErrNoAudit) || !strings.Contains(err.Error(), "precision bf16") {
		t.Errorf("audit of a bf16 job on a CPU client: %v, want iclient.ErrNoAudit naming the precision", err)
	}

	for _, c := range []struct {
		name      string
		mode      uint8
		precision string
		msg       string
	}{
		{"exact", wire.ModeExact, "bf16", "needs tolerance mode"},
		{"unknown", wire.ModeTolerance, "fp8", `precision "fp8"`},
	} {
		bad := s
		bad.Mode, bad.Precision = c.mode, c.precision
		if job, err := net.client.Submit(context.Background(), bad, nil); err == nil || job != nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %+v, %v; want an error saying %q", c.name, job, err, c.msg)
		}
	}
}

// TestCheckJobRunsAtF32: a job verified by a check job (verification by
// prefill) is refused at a reduced precision, before anything is sent: the
// generation's decode steps sum in f32 whatever the precision, and its
// check's batched passes at the precision would differ by more than a
// near-tie.
func TestCheckJobRunsAtF32(t *testing.T) {
	n, err := New(context.Background(), testConfig(t, false))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	q := llama.Request{Prompt: "The end", MaxTokens: 4}
	_, err = n.Submit(context.Background(), jobs.Spec{Replicas: 1, Terms: wire.Terms{Mode: wire.ModeTolerance,
		Precision: "bf16"}, Check: models.Check{q}}, nil)
	if err == nil || !strings.Contains(err.Error(), "runs at f32") {
		t.Fatalf("a bf16 job verified by a check: %v, want refused", err)
	}
}
