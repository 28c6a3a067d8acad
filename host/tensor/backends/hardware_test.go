//go:build gpu

package backends

// Hardware tests: the CUDA backend as providers use it, on a real NVIDIA
// GPU, run by `make gpu-check` (build tag gpu). The tag is given on
// purpose, on a machine that should have a GPU, so without the driver,
// cuBLAS or a device these tests FAIL, saying what is missing; none skips
// for it. (This package's other tests also run every backend opened here,
// CUDA included, on the GPU.)
//
// hardware-untested: written on machines without a GPU; these tests have
// compiled but never run on one.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/proofs/redundancy"
)

// The ONNX vectors are `make test`'s: a GPU machine need not have them.
func init() { onnxOptional = true }

// noCUDA is how a test or benchmark of the gpu build tag fails without
// CUDA; the error that says why follows.
const noCUDA = "no CUDA backend: build tag gpu needs the NVIDIA driver's libcuda.so.1, " +
	"a device it sees, and libcublas.so.13, .12 or .11 on the loader's path: %v"

// openCUDA opens a Set whose fast backend is CUDA, closed at the end of
// the test; without one the test fails, saying why.
func openCUDA(t testing.TB) *Set {
	t.Helper()
	set, err := Open(context.Background(), Config{Fast: CUDA})
	if err != nil {
		t.Fatalf(noCUDA, err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return set
}

// TestGPUOpen: auto mode picks CUDA and records no reason against it;
// asking for it by name gives a GPU-class backend named "cuda".
func TestGPUOpen(t *testing.T) {
	set := openCUDA(t)
	if set.Fast.Name() != CUDA || set.Fast.Class() != tensor.ClassGPU {
		t.Errorf("--backend cuda: %s (%v)", set.Fast.Name(), set.Fast.Class())
	}
	auto, err := Open(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	if auto.Fast.Name() != CUDA || auto.Unavailable[CUDA] != nil {
		t.Errorf("auto chose %s; cuda unavailable because %v", auto.Fast.Name(), auto.Unavailable[CUDA])
	}
}

// counting is a tensor.Backend that counts the operations it runs and the
// ones its backend refused (tensor.ErrUnsupported: the host then runs them
// on the reference backend).
type counting struct {
	tensor.Backend
	mu          sync.Mutex
	ran, refuse map[string]int
}

func (c *counting) count(op string, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ran == nil {
		c.ran, c.refuse = map[string]int{}, map[string]int{}
	}
	if errors.Is(err, tensor.ErrUnsupported) {
		c.refuse[op]++
	} else {
		c.ran[op]++
	}
	return err
}

func (c *counting) Gemm(ctx context.Context, p tensor.GemmParams, a, b, out tensor.Buffer) error {
	return c.count("gemm", c.Backend.Gemm(ctx, p, a, b, out))
}
func (c *counting) Binary(ctx context.Context, op abi.Op, a, b, out tensor.Buffer) error {
	return c.count("binary", c.Backend.Binary(ctx, op, a, b, out))
}
func (c *counting) Unary(ctx context.Context, op abi.Op, a, out tensor.Buffer) error {
	return c.count("unary", c.Backend.Unary(ctx, op, a, out))
}
func (c *counting) Softmax(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return c.count("softmax", c.Backend.Softmax(ctx, rows, cols, a, out))
}
func (c *counting) Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out tensor.Buffer) error {
	return c.count("reduce", c.Backend.Reduce(ctx, op, rows, cols, a, out))
}
func (c *counting) LayerNorm(ctx context.Context, rows, cols int, a, g, b, out tensor.Buffer) error {
	return c.count("layernorm", c.Backend.LayerNorm(ctx, rows, cols, a, g, b, out))
}
func (c *counting) SoftmaxCausal(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return c.count("softmax_causal", c.Backend.SoftmaxCausal(ctx, rows, cols, a, out))
}
func (c *counting) CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad tensor.Buffer) error {
	return c.count("cross_entropy", c.Backend.CrossEntropy(ctx, rows, cols, logits, targets, loss, grad))
}
func (c *counting) AdamW(ctx context.Context, p tensor.AdamWParams, w, g, m, v tensor.Buffer) error {
	return c.count("adamw", c.Backend.AdamW(ctx, p, w, g, m, v))
}
func (c *counting) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, b, out tensor.Buffer) error {
	return c.count("gemm_batched", c.Backend.GemmBatched(ctx, batch, p, a, b, out))
}
func (c *counting) Transpose(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return c.count("transpose", c.Backend.Transpose(ctx, rows, cols, a, out))
}
func (c *counting) Gather(ctx context.Context, rows, cols int, table, idx, out tensor.Buffer) error {
	return c.count("gather", c.Backend.Gather(ctx, rows, cols, table, idx, out))
}

// check logs the operations run and refused since the last check, fails
// the test if none was a GEMM or a GEMM was refused, and resets the counts.
func (c *counting) check(t *testing.T, what string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ran["gemm"]+c.ran["gemm_batched"] == 0 || c.refuse["gemm"]+c.refuse["gemm_batched"] > 0 {
		t.Errorf("%s: %d GEMMs ran on %s, %d refused", what, c.ran["gemm"]+c.ran["gemm_batched"], c.Name(), c.refuse["gemm"]+c.refuse["gemm_batched"])
	}
	var s []string
	for op, n := range c.ran {
		s = append(s, fmt.Sprintf("%s %d", op, n))
	}
	for op, n := range c.refuse {
		s = append(s, fmt.Sprintf("%s %d refused", op, n))
	}
	sort.Strings(s)
	c.ran, c.refuse = nil, nil
	t.Logf("%s on %s: %s", what, c.Name(), strings.Join(s, ", "))
}

// TestGPUHostJobs runs tolerance-mode jobs through the host module with
// the CUDA backend selected, as a provider with a GPU does, and compares
// them with the same jobs on the cpu backend:
//   - mlp (testdata/jobs/mlp) on its example input: the outputs must agree
//     as the network compares tolerance-mode replicas by default (--compare
//     text, rtol 1e-5, atol 1e-8), so a GPU provider's result would verify
//     against a CPU provider's;
//   - chargpt (testdata/jobs/chargpt) on README.md: 10 training steps, then
//     the held-out evaluation of each checkpoint. Training amplifies
//     rounding (AdamW's update of a near-zero gradient is ±LR whatever its
//     size), so the checkpoints are compared in aggregate: training loss
//     and held-out bits per character within 1e-3 relative, and the
//     parameters within 1e-2 of their norm. (The cpu backend against the
//     reference backend: 3e-4 of the norm, loss and bits/char the same to
//     4 digits.)
//
// The GEMMs must have run on the GPU; operations the CUDA backend refused
// (run by the reference backend instead) are logged.
func TestGPUHostJobs(t *testing.T) {
	hostJobsAgree(t, openCUDA(t).Fast, cpu.New(cpu.Config{}))
}

// hostJobsAgree is TestGPUHostJobs with fast in the place of CUDA and base
// in the place of cpu.
func hostJobsAgree(t *testing.T, fast, base tensor.Backend) {
	ctx := context.Background()
	gpu := &counting{Backend: fast}
	sandbox := func(fast tensor.Backend) *host.Sandbox {
		sb, err := host.New(ctx, host.Config{Fast: fast})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(ctx) })
		return sb
	}
	onGPU, onCPU := sandbox(gpu), sandbox(base)
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	run := func(t *testing.T, sb *host.Sandbox, job host.Job, cfg host.JobConfig) []byte {
		t.Helper()
		res, err := sb.Run(ctx, job, cfg)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v exit %d: %s", err, res.ExitCode, res.Stderr)
		}
		if sb == onGPU && res.Backend != fast.Name() {
			t.Errorf("ran on %q, want %s", res.Backend, fast.Name())
		}
		t.Logf("%s: %v, %d tensor ops, %.3g flops", res.Backend, res.Duration.Round(time.Millisecond), res.TensorOps, res.Flops)
		return res.Output
	}
	cfg := host.NewJobConfig().WithMode(abi.ModeTolerance)

	t.Run("mlp", func(t *testing.T) {
		dir := "../../../testdata/jobs/mlp/"
		job := host.Job{Module: read(dir + "mlp.wasm"), Input: read(dir + "input.txt")}
		got, want := run(t, onGPU, job, cfg), run(t, onCPU, job, cfg)
		gpu.check(t, "mlp")
		tl := &redundancy.Tolerance{Rtol: 1e-5, Atol: 1e-8, Format: redundancy.FormatText}
		if ok, d := redundancy.Equal(got, want, tl); !ok {
			t.Errorf("%s and %s outputs differ beyond the network's default tolerance: %v\n%[1]s:\n%[4]s\n%[2]s:\n%[5]s", fast.Name(), base.Name(), d, got, want)
		}
		if ok, d := redundancy.Equal(got, read(dir+"output.txt"), tl); !ok {
			t.Errorf("%s output and the exact output.txt differ beyond tolerance: %v", fast.Name(), d)
		}
	})

	t.Run("chargpt", func(t *testing.T) {
		job := host.Job{Module: read("../../../testdata/jobs/chargpt/chargpt.wasm"),
			Data: map[string]string{"text": "../../../README.md"}}
		cfg := cfg.WithMemoryLimit(256 << 20).WithTimeout(5 * time.Minute)
		train := cfg.WithArgs("train", "10")
		ckGPU, ckCPU := run(t, onGPU, job, train), run(t, onCPU, job, train)
		gpu.check(t, "chargpt train")
		if len(ckGPU) != len(ckCPU) || len(ckGPU) < 20 || !bytes.Equal(ckGPU[:12], ckCPU[:12]) || !bytes.Equal(ckGPU[16:20], ckCPU[16:20]) {
			t.Fatalf("checkpoints of %d and %d bytes, headers %x and %x", len(ckGPU), len(ckCPU), ckGPU[:min(20, len(ckGPU))], ckCPU[:min(20, len(ckCPU))])
		}
		f32 := func(b []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) }
		near := func(what string, x, y, rel float64) {
			t.Helper()
			if !(math.Abs(x-y) <= rel*math.Max(math.Abs(x), math.Abs(y))) {
				t.Errorf("%s: %g on %s, %g on %s: more than %g apart (relative)", what, x, fast.Name(), y, base.Name(), rel)
			}
		}
		near("training loss", f32(ckGPU[12:]), f32(ckCPU[12:]), 1e-3)
		var diff, norm float64
		for i := 20; i+4 <= len(ckGPU); i += 4 {
			x, y := f32(ckGPU[i:]), f32(ckCPU[i:])
			diff += (x - y) * (x - y)
			norm += y * y
		}
		t.Logf("checkpoints: |%s - %s| / |%[2]s| = %.3g over %d floats", fast.Name(), base.Name(), math.Sqrt(diff/norm), (len(ckGPU)-20)/4)
		if !(math.Sqrt(diff/norm) <= 1e-2) {
			t.Errorf("checkpoints differ by %.3g of their norm", math.Sqrt(diff/norm))
		}
		bits := func(report []byte) float64 {
			var b float64
			if _, err := fmt.Sscanf(string(report), "%f bits/char", &b); err != nil {
				t.Fatalf("eval said %q: %v", report, err)
			}
			return b
		}
		eval := cfg.WithArgs("eval")
		job.Input = ckGPU
		bGPU := bits(run(t, onGPU, job, eval))
		job.Input = ckCPU
		bCPU := bits(run(t, onCPU, job, eval))
		gpu.check(t, "chargpt eval")
		t.Logf("held-out bits/char %.4f on %s, %.4f on %s", bGPU, fast.Name(), bCPU, base.Name())
		near("held-out bits/char", bGPU, bCPU, 1e-3)
	})
}
