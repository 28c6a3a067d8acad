package remote

// The workers of these tests are this test binary run again (TestMain
// sees workerEnv): the reference backend, for the protocol itself, and
// the CUDA backend on the FAKE driver (cudatest), for faults.
//
// fake driver: checks our call sequence, not a GPU.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
	"github.com/infernet/infernet/host/tensor/reference"
)

// Environment of a worker run by the tests.
const (
	workerEnv = "REMOTE_TEST_WORKER" // "reference" or "cuda"
	driverEnv = "REMOTE_TEST_DRIVER" // the fake library, for "cuda"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(workerEnv); kind != "" {
		os.Exit(worker(kind))
	}
	code := m.Run()
	cudatest.Remove()
	os.Exit(code)
}

// workers open the backend of each kind of test worker; hardware_test.go
// adds one.
var workers = map[string]func() (tensor.Backend, error){
	"reference": func() (tensor.Backend, error) { return reference.New(reference.Config{Threads: 1}), nil },
	"cuda": func() (tensor.Backend, error) {
		drv := os.Getenv(driverEnv)
		b, err := cuda.New(cuda.Config{Driver: drv, CUBLAS: drv})
		if err != nil {
			return nil, err
		}
		return b, nil
	},
}

// worker is a test worker's main: exit status 3 for a lost device.
func worker(kind string) int {
	be, err := workers[kind]()
	if err != nil {
		_ = Refuse(os.Stdout, err)
		return 0
	}
	if err := Serve(context.Background(), os.Stdin, os.Stdout, be); err != nil {
		fmt.Fprintln(os.Stderr, "test worker:", err)
		return 3
	}
	return 0
}

// starts counts the workers a command factory made.
type starts struct{ n atomic.Int32 }

// command returns a factory of test workers of kind with the environment
// env, and first in the first one only (a failure injected into the fake
// driver).
func (s *starts) command(kind string, env, first []string) func() *exec.Cmd {
	return func() *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			panic(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(append(os.Environ(), workerEnv+"="+kind), env...)
		if s.n.Add(1) == 1 {
			cmd.Env = append(cmd.Env, first...)
		}
		return cmd
	}
}

// open starts a Backend on a worker of kind, closed at the end of the
// test; first is the environment of the first worker only.
func open(t testing.TB, kind string, first ...string) (*Backend, *starts) {
	t.Helper()
	s := &starts{}
	var env []string
	if kind == "cuda" {
		drv, _ := cudatest.Build(t)
		env = append(env, driverEnv+"="+drv)
	}
	b, err := New(context.Background(), Config{Command: s.command(kind, env, first), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b, s
}

// bufSpec is one buffer of a round-trip case: its type, length and
// elements' range (I32: [0, max); F32: uniform in [-2, 2)).
type bufSpec struct {
	dt  abi.DType
	n   int
	max int
}

// fill returns random little-endian elements for s.
func fill(r *rand.Rand, s bufSpec) []byte {
	out := make([]byte, s.dt.Bytes(s.n))
	for i := range s.n {
		switch s.dt {
		case abi.F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(4*r.Float32()-2))
		case abi.I32:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(r.IntN(max(s.max, 1))))
		case abi.I8:
			out[i] = byte(r.IntN(256))
		}
	}
	return out
}

// tr returns be's language-model ops.
func tr(be tensor.Backend) tensor.Transformer { return be.(tensor.Transformer) }

// roundTrips are every Backend and Transformer operation with small
// operands; run returns the index of Argmax and Sample.
var roundTrips = []struct {
	name string
	bufs []bufSpec
	run  func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error)
}{
	{"gemm f32", []bufSpec{{abi.F32, 15, 0}, {abi.F32, 20, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Gemm(ctx, tensor.GemmParams{M: 3, N: 4, K: 5, TransB: true, Accumulate: true}, b[0], b[1], b[2])
	}},
	{"gemm i8", []bufSpec{{abi.I8, 16, 0}, {abi.I8, 16, 0}, {abi.I32, 16, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Gemm(ctx, tensor.GemmParams{M: 4, N: 4, K: 4, TransA: true}, b[0], b[1], b[2])
	}},
	{"gemm_batched", []bufSpec{{abi.F32, 16, 0}, {abi.F32, 24, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.GemmBatched(ctx, 2, tensor.GemmParams{M: 2, N: 3, K: 4}, b[0], b[1], b[2])
	}},
	{"binary f32", []bufSpec{{abi.F32, 12, 0}, {abi.F32, 4, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Binary(ctx, abi.OpMul, b[0], b[1], b[2])
	}},
	{"binary i32", []bufSpec{{abi.I32, 6, 100}, {abi.I32, 3, 100}, {abi.I32, 6, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Binary(ctx, abi.OpAdd, b[0], b[1], b[2])
	}},
	{"unary", []bufSpec{{abi.F32, 9, 0}, {abi.F32, 9, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Unary(ctx, abi.OpGELU, b[0], b[1])
	}},
	{"softmax", []bufSpec{{abi.F32, 12, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Softmax(ctx, 3, 4, b[0], b[1])
	}},
	{"reduce", []bufSpec{{abi.F32, 12, 0}, {abi.F32, 3, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Reduce(ctx, abi.OpMax, 3, 4, b[0], b[1])
	}},
	{"layernorm", []bufSpec{{abi.F32, 12, 0}, {abi.F32, 4, 0}, {abi.F32, 4, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.LayerNorm(ctx, 3, 4, b[0], b[1], b[2], b[3])
	}},
	{"softmax_causal", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 8, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.SoftmaxCausal(ctx, 4, 2, b[0], b[1])
	}},
	{"cross_entropy", []bufSpec{{abi.F32, 12, 0}, {abi.I32, 3, 4}, {abi.F32, 3, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.CrossEntropy(ctx, 3, 4, b[0], b[1], b[2], b[3])
	}},
	{"adamw", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 8, 0}, {abi.F32, 8, 0}, {abi.F32, 8, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		p := tensor.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decay: 0.01, Step: 3}
		// v must not be negative: square it first.
		if err := be.Binary(ctx, abi.OpMul, b[3], b[3], b[3]); err != nil {
			return 0, err
		}
		return 0, be.AdamW(ctx, p, b[0], b[1], b[2], b[3])
	}},
	{"transpose", []bufSpec{{abi.F32, 12, 0}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Transpose(ctx, 3, 4, b[0], b[1])
	}},
	{"gather", []bufSpec{{abi.F32, 15, 0}, {abi.I32, 4, 5}, {abi.F32, 12, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, be.Gather(ctx, 5, 3, b[0], b[1], b[2])
	}},
	{"matmul", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 12, 0}, {abi.F32, 6, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).MatMul(ctx, 2, 3, 4, b[0], b[1], b[2])
	}},
	{"embed", []bufSpec{{abi.F32, 15, 0}, {abi.F32, 9, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).Embed(ctx, 5, 3, b[0], []int32{1, 4, 0}, b[1])
	}},
	{"rmsnorm", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 4, 0}, {abi.F32, 8, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).RMSNorm(ctx, 2, 4, 1e-5, b[0], b[1], b[2])
	}},
	{"rope", []bufSpec{{abi.F32, 16, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).RoPE(ctx, tensor.RoPEParams{Rows: 2, Cols: 8, HeadDim: 4, Pos: 3, Theta: 10000, Style: abi.RoPEHalves}, b[0])
	}},
	{"rope_factors", []bufSpec{{abi.F32, 16, 0}, {abi.F32, 2, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).RoPE(ctx, tensor.RoPEParams{Rows: 2, Cols: 8, HeadDim: 4, Pos: 3, Theta: 10000, Factors: b[1]}, b[0])
	}},
	{"matmul_add", []bufSpec{{abi.F32, 2 * 8, 0}, {abi.F32, 3 * 8, 0}, {abi.F32, 2 * 3, 0}, {abi.F32, 2 * 3, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tensor.MatMulAdd(ctx, be, 2, 3, 8, b[0], b[1], b[2], b[3])
	}},
	{"matmul_swiglu", []bufSpec{{abi.F32, 2 * 8, 0}, {abi.F32, 3 * 8, 0}, {abi.F32, 3 * 8, 0}, {abi.F32, 2 * 3, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tensor.MatMulSwiGLU(ctx, be, 2, 3, 8, b[0], b[1], b[2], b[3])
	}},
	// q [2, 8], k and v [2, 4], the caches [5, 4]: rows 3 and 4 written.
	{"rope_kv", []bufSpec{{abi.F32, 16, 0}, {abi.F32, 8, 0}, {abi.F32, 8, 0}, {abi.F32, 20, 0}, {abi.F32, 20, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tensor.RoPEKV(ctx, be, tensor.RoPEParams{Rows: 2, Cols: 4, HeadDim: 4, Pos: 3, Theta: 10000, Style: abi.RoPEHalves}, 8, b[0], b[1], b[2], b[3], b[4])
	}},
	{"rope_kv_factors", []bufSpec{{abi.F32, 16, 0}, {abi.F32, 8, 0}, {abi.F32, 8, 0}, {abi.F32, 20, 0}, {abi.F32, 20, 0}, {abi.F32, 2, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tensor.RoPEKV(ctx, be, tensor.RoPEParams{Rows: 2, Cols: 4, HeadDim: 4, Pos: 3, Theta: 10000, Factors: b[5]}, 8, b[0], b[1], b[2], b[3], b[4])
	}},
	{"swiglu", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 8, 0}, {abi.F32, 8, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).SwiGLU(ctx, b[0], b[1], b[2])
	}},
	{"copy_rows", []bufSpec{{abi.F32, 8, 0}, {abi.F32, 16, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).CopyRows(ctx, 1, 4, b[0], b[1])
	}},
	{"attention", []bufSpec{{abi.F32, 16, 0}, {abi.F32, 16, 0}, {abi.F32, 16, 0}, {abi.F32, 16, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return 0, tr(be).Attention(ctx, tensor.AttentionParams{Rows: 2, Heads: 2, KVHeads: 1, HeadDim: 4, Pos: 1}, b[0], b[1], b[2], b[3])
	}},
	{"argmax", []bufSpec{{abi.F32, 10, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return tr(be).Argmax(ctx, b[0])
	}},
	{"sample", []bufSpec{{abi.F32, 10, 0}}, func(ctx context.Context, be tensor.Backend, b []tensor.Buffer) (int, error) {
		return tr(be).Sample(ctx, tensor.SampleParams{Temperature: 0.8, TopP: 0.9, Coin: 0.3}, b[0])
	}},
}

// TestRoundTrip: every operation, run in a reference worker, leaves every
// buffer with the bits the reference backend in process gives, and
// returns the same index; the worker's name and class are the backend's.
func TestRoundTrip(t *testing.T) {
	b, _ := open(t, "reference")
	ref := reference.New(reference.Config{Threads: 1})
	if b.Name() != ref.Name() || b.Class() != tensor.ClassReference {
		t.Errorf("worker backend %q (%v), want %q (reference)", b.Name(), b.Class(), ref.Name())
	}
	if _, ok := b.Backend().(tensor.Transformer); !ok {
		t.Error("Backend() hides the language-model ops of a worker that has them")
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range roundTrips {
		t.Run(c.name, func(t *testing.T) {
			var got, want []tensor.Buffer
			for _, s := range c.bufs {
				data := fill(r, s)
				got = append(got, upload(t, b, s.dt, s.n, data))
				want = append(want, upload(t, ref, s.dt, s.n, data))
			}
			gi, gerr := c.run(ctx, b, got)
			wi, werr := c.run(ctx, ref, want)
			if gerr != nil || werr != nil || gi != wi {
				t.Fatalf("worker: %d, %v; in process: %d, %v", gi, gerr, wi, werr)
			}
			for i := range got {
				if g, w := download(t, b, got[i]), download(t, ref, want[i]); !bytes.Equal(g, w) {
					t.Errorf("buffer %d: worker %x, in process %x", i, g, w)
				}
				b.Free(got[i])
			}
		})
	}
}

func upload(t testing.TB, be tensor.Backend, dt abi.DType, n int, data []byte) tensor.Buffer {
	t.Helper()
	x, err := be.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Write(x, data); err != nil {
		t.Fatal(err)
	}
	return x
}

func download(t testing.TB, be tensor.Backend, x tensor.Buffer) []byte {
	t.Helper()
	out := make([]byte, x.DType().Bytes(x.Len()))
	if err := be.Read(x, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func f32bytes(v ...float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// TestConcurrentJobs: jobs sharing a Backend each get their own results,
// their queued operations interleaved in the one pipe.
func TestConcurrentJobs(t *testing.T) {
	b, _ := open(t, "reference")
	ctx := context.Background()
	errs := make(chan error, 4)
	for j := range 4 {
		go func() {
			errs <- func() error {
				x, err := b.Alloc(abi.F32, 2)
				if err != nil {
					return err
				}
				defer b.Free(x)
				if err := b.Write(x, f32bytes(float32(j), 1)); err != nil {
					return err
				}
				for range 50 {
					if err := b.Binary(ctx, abi.OpAdd, x, x, x); err != nil { // doubles
						return err
					}
					if err := b.Binary(ctx, abi.OpMul, x, x, x); err != nil { // squares
						return err
					}
					got := make([]byte, 8)
					if err := b.Read(x, got); err != nil {
						return err
					}
					if err := b.Write(x, f32bytes(float32(j), 1)); err != nil {
						return err
					}
					if want := f32bytes(float32(4*j*j), 4); !bytes.Equal(got, want) {
						return fmt.Errorf("job %d: %x, want %x", j, got, want)
					}
				}
				return nil
			}()
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestHostChecks: calls the parent can refuse fail at once, before
// anything reaches the worker, and the worker keeps serving.
func TestHostChecks(t *testing.T) {
	b, _ := open(t, "reference")
	other, _ := open(t, "reference")
	ctx := context.Background()
	x := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
	y, _ := other.Alloc(abi.F32, 4)
	freed, _ := b.Alloc(abi.F32, 4)
	b.Free(freed)
	b.Free(freed) // a no-op
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"short write", b.Write(x, make([]byte, 12)), "write of 12 bytes"},
		{"long read", b.Read(x, make([]byte, 20)), "read of 4 elements"},
		{"another backend's buffer", b.Unary(ctx, abi.OpReLU, y, x), "not allocated by this backend"},
		{"a freed buffer", b.Binary(ctx, abi.OpAdd, x, freed, x), "used after Free"},
		{"a done context", b.Unary(done, abi.OpReLU, x, x), "context canceled"},
		{"a bad alloc", func() error { _, err := b.Alloc(abi.Q8_0, 5); return err }(), "alloc of 5 elements"},
		{"a GEMM past its buffers", b.Gemm(ctx, tensor.GemmParams{M: 1, N: 1, K: 1 << 30}, x, x, x), "buffers of 4, 4, 4 elements"},
		{"a GEMM of i32", func() error {
			i32, _ := b.Alloc(abi.I32, 1)
			err := b.Gemm(ctx, tensor.GemmParams{M: 1, N: 1, K: 1}, x, x, i32)
			if !errors.Is(err, tensor.ErrUnsupported) {
				return fmt.Errorf("not ErrUnsupported: %w", err)
			}
			return err
		}(), "→i32: tensor operation unsupported"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
	if got := download(t, b, x); !bytes.Equal(got, f32bytes(1, 2, 3, 4)) {
		t.Errorf("after refused calls: %v", got)
	}
}

// TestQueuedFailureNamesTheOp: a queued operation that fails returns nil,
// and the failure comes back from the next Read of a buffer it wrote,
// naming the operation and the CUDA error (the fake driver's launch
// failure, which is not sticky); operations on that buffer fail with it
// too, other buffers (its inputs among them) read fine, the worker keeps serving, and writing the
// buffer whole clears the failure.
func TestQueuedFailureNamesTheOp(t *testing.T) {
	b, s := open(t, "cuda", "FAKECUDA_FAIL=cuLaunchKernel:701:1")
	ctx := context.Background()
	x := upload(t, b, abi.F32, 4, f32bytes(-1, 2, -3, 4))
	other := upload(t, b, abi.F32, 4, f32bytes(5, 6, 7, 8))
	out, _ := b.Alloc(abi.F32, 4)
	if err := b.Unary(ctx, abi.OpReLU, x, out); err != nil { // the launch the fake lets through
		t.Fatal(err)
	}
	if got := download(t, b, out); !bytes.Equal(got, f32bytes(0, 2, 0, 4)) {
		t.Fatalf("relu: %v", got)
	}
	if err := b.Unary(ctx, abi.OpReLU, x, out); err != nil {
		t.Fatalf("a queued op returned %v; its failure belongs to the next Read", err)
	}
	if err := b.Binary(ctx, abi.OpAdd, out, out, out); err != nil { // on the failed output
		t.Fatal(err)
	}
	err := b.Read(out, make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "unary") || !strings.Contains(err.Error(), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") {
		t.Fatalf("Read after a failed unary: %v, want it named with the CUDA error", err)
	}
	if errors.Is(err, tensor.ErrDeviceLost) || errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("a launch failure reads as %v", err)
	}
	if got := download(t, b, other); !bytes.Equal(got, f32bytes(5, 6, 7, 8)) {
		t.Errorf("an untouched buffer: %v", got)
	}
	// The failed op's input (as a model's weights, shared by every job)
	// keeps no failure: it only read it.
	if got := download(t, b, x); !bytes.Equal(got, f32bytes(-1, 2, -3, 4)) {
		t.Errorf("the failed op's input: %v", got)
	}
	if err := b.Write(out, f32bytes(9, 9, 9, 9)); err != nil {
		t.Fatal(err)
	}
	if got := download(t, b, out); !bytes.Equal(got, f32bytes(9, 9, 9, 9)) {
		t.Errorf("a rewritten buffer: %v", got)
	}
	if n := s.n.Load(); n != 1 {
		t.Errorf("%d workers started; a failed op must not restart it", n)
	}
}

// TestUnsupported: a queued operation the worker's backend refuses
// (cuda's batched GEMM whose C aliases A) runs on the reference backend
// in the worker, with its bits; a synchronous one (cuda's Argmax of i32)
// returns tensor.ErrUnsupported for the host module to fall back.
func TestUnsupported(t *testing.T) {
	b, _ := open(t, "cuda")
	ref := reference.New(reference.Config{Threads: 1})
	ctx := context.Background()
	if b.Name() != "cuda" || b.Class() != tensor.ClassGPU {
		t.Errorf("worker backend %q (%v)", b.Name(), b.Class())
	}
	r := rand.New(rand.NewPCG(3, 4))
	p := tensor.GemmParams{M: 2, N: 2, K: 2}
	a, bm := fill(r, bufSpec{abi.F32, 8, 0}), fill(r, bufSpec{abi.F32, 8, 0})
	ga, gb := upload(t, b, abi.F32, 8, a), upload(t, b, abi.F32, 8, bm)
	wa, wb := upload(t, ref, abi.F32, 8, a), upload(t, ref, abi.F32, 8, bm)
	if err := b.GemmBatched(ctx, 2, p, ga, gb, ga); err != nil {
		t.Fatal(err)
	}
	if err := ref.GemmBatched(ctx, 2, p, wa, wb, wa); err != nil {
		t.Fatal(err)
	}
	if g, w := download(t, b, ga), download(t, ref, wa); !bytes.Equal(g, w) {
		t.Errorf("aliased batched GEMM in the worker: %x, reference %x", g, w)
	}
	gi := upload(t, b, abi.I32, 2, make([]byte, 8))
	if _, err := b.Argmax(ctx, gi); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("Argmax of i32 on cuda: %v, want ErrUnsupported", err)
	}
}

// TestHeldWeights: the worker's greeting says which weight types its
// backend holds (the CUDA backend: every one, the v4 block types too; the
// reference: none, its data tensors being host buffers), and Alloc refuses
// the others at once with tensor.ErrUnsupported, so the host module keeps
// those weights in host memory.
func TestHeldWeights(t *testing.T) {
	for _, c := range []struct {
		kind string
		held []abi.DType
	}{
		{"cuda", []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q5_1, abi.Q4_K, abi.Q6_K}},
		{"reference", []abi.DType{abi.F32}},
	} {
		b, _ := open(t, c.kind)
		for _, dt := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q5_1, abi.Q4_K, abi.Q6_K} {
			held := slices.Contains(c.held, dt)
			if got := tensor.HoldsWeights(b, dt); got != held {
				t.Errorf("%s: HoldsWeights(%v) = %v, want %v", c.kind, dt, got, held)
			}
			x, err := b.Alloc(dt, 256)
			if held != (err == nil) || !held && !errors.Is(err, tensor.ErrUnsupported) {
				t.Errorf("%s: Alloc of 256 %v: %v", c.kind, dt, err)
			}
			if err == nil {
				b.Free(x)
			}
		}
	}
}

// lostCases lose the worker mid-job: a sticky CUDA fault in a queued
// operation (the fake driver's, injected at the worker's second launch or
// its first cuBLAS call), and the worker killed.
var lostCases = []struct {
	name string
	kind string
	env  []string
	lose func(t *testing.T, b *Backend, x, out tensor.Buffer) error
	want string // in the error
}{
	{"sticky fault", "cuda", []string{"FAKECUDA_FAIL=cuLaunchKernel:700:1"}, func(t *testing.T, b *Backend, x, out tensor.Buffer) error {
		if err := b.Unary(context.Background(), abi.OpReLU, x, out); err != nil {
			t.Fatalf("the faulting op, queued: %v", err)
		}
		return b.Read(out, make([]byte, 16))
	}, "unary: unary_f32: cuda: cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS (700)"},
	// A fault in cuBLAS's kernel: cuBLAS answers CUBLAS_STATUS_EXECUTION_FAILED
	// and the context is poisoned, as on the H100 (TestGPU_WorkerFaultRecovers).
	{"cuBLAS fault", "cuda", []string{"FAKECUDA_FAIL=cublasSgemm_v2:700"}, func(t *testing.T, b *Backend, x, out tensor.Buffer) error {
		if err := b.Gemm(context.Background(), tensor.GemmParams{M: 2, N: 2, K: 2}, x, x, out); err != nil {
			t.Fatalf("the faulting op, queued: %v", err)
		}
		return b.Read(out, make([]byte, 16))
	}, "cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED (13)"},
	{"killed", "reference", nil, func(t *testing.T, b *Backend, x, out tensor.Buffer) error {
		b.mu.Lock()
		p := b.cur.cmd.Process
		b.mu.Unlock()
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return b.Read(out, make([]byte, 16))
	}, "signal: killed"},
}

// TestLostWorker: the call that meets a lost worker and every later use
// of its buffers fail with tensor.ErrDeviceLost, saying why; the next
// Alloc starts a new worker, which computes correctly.
func TestLostWorker(t *testing.T) {
	ctx := context.Background()
	for _, c := range lostCases {
		t.Run(c.name, func(t *testing.T) {
			b, s := open(t, c.kind, c.env...)
			x := upload(t, b, abi.F32, 4, f32bytes(-1, 2, -3, 4))
			out, _ := b.Alloc(abi.F32, 4)
			if err := b.Unary(ctx, abi.OpReLU, x, out); err != nil {
				t.Fatal(err)
			}
			if got := download(t, b, out); !bytes.Equal(got, f32bytes(0, 2, 0, 4)) {
				t.Fatalf("before: %v", got)
			}
			err := c.lose(t, b, x, out)
			if !errors.Is(err, tensor.ErrDeviceLost) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the call that lost the worker: %v, want ErrDeviceLost saying %q", err, c.want)
			}
			for name, err := range map[string]error{
				"write": b.Write(x, f32bytes(1, 1, 1, 1)),
				"read":  b.Read(x, make([]byte, 16)),
				"unary": b.Unary(ctx, abi.OpReLU, x, out),
			} {
				if !errors.Is(err, tensor.ErrDeviceLost) {
					t.Errorf("%s of a lost worker's buffer: %v, want ErrDeviceLost", name, err)
				}
			}
			b.Free(x) // a no-op
			y := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
			if err := b.Binary(ctx, abi.OpMul, y, y, y); err != nil {
				t.Fatal(err)
			}
			if got := download(t, b, y); !bytes.Equal(got, f32bytes(1, 4, 9, 16)) {
				t.Errorf("on the new worker: %v", got)
			}
			if n := s.n.Load(); n != 2 {
				t.Errorf("%d workers started, want 2", n)
			}
		})
	}
}

// TestAllocAfterACrash: an Alloc after the worker died gets a buffer of a
// new worker; the dead worker's buffers say it was lost.
func TestAllocAfterACrash(t *testing.T) {
	b, s := open(t, "reference")
	x := upload(t, b, abi.F32, 1, f32bytes(1))
	b.mu.Lock()
	c := b.cur
	b.mu.Unlock()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done // an Alloc is queued: one sent before the death is noticed fails at its first wait, as any queued op
	y := upload(t, b, abi.F32, 1, f32bytes(2))
	if got := download(t, b, y); !bytes.Equal(got, f32bytes(2)) || s.n.Load() != 2 {
		t.Errorf("a buffer after the crash: %v after %d starts", got, s.n.Load())
	}
	if err := b.Read(x, make([]byte, 4)); !errors.Is(err, tensor.ErrDeviceLost) {
		t.Errorf("the dead worker's buffer: %v", err)
	}
}

// TestRestartBackoff: a worker that dies at once is started again at the
// next Alloc; after a second failure in a row, Allocs fail with
// tensor.ErrDeviceLost without starting one until Backoff has passed.
func TestRestartBackoff(t *testing.T) {
	s := &starts{}
	good := s.command("reference", nil, nil)
	cmd := func() *exec.Cmd {
		if s.n.Load() == 0 {
			return good()
		}
		s.n.Add(1)
		return exec.Command("true") // exits without a greeting
	}
	b, err := New(context.Background(), Config{Command: cmd, Logger: slog.New(slog.DiscardHandler), Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Alloc(abi.F32, 1); err != nil { // the worker served: its loss is a first failure
		t.Fatal(err)
	}
	b.mu.Lock()
	p := b.cur.cmd.Process
	b.mu.Unlock()
	_ = p.Kill()
	<-b.cur.done
	for i, want := range []int32{2, 2, 2} {
		if _, err := b.Alloc(abi.F32, 1); !errors.Is(err, tensor.ErrDeviceLost) {
			t.Errorf("Alloc %d: %v, want ErrDeviceLost", i, err)
		}
		if n := s.n.Load(); n != want {
			t.Errorf("after Alloc %d: %d starts, want %d", i, n, want)
		}
	}
}

// TestRefused: a worker whose backend cannot open (no CUDA driver) makes
// New fail with tensor.ErrUnavailable, saying why.
func TestRefused(t *testing.T) {
	s := &starts{}
	_, err := New(context.Background(), Config{Command: s.command("cuda", []string{driverEnv + "=/nonexistent/libcuda.so.1"}, nil)})
	if !errors.Is(err, tensor.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Errorf("New with a worker without a driver: %v, want ErrUnavailable naming the library", err)
	}
}

// TestCloseStopsTheWorker: Close ends the worker process; later calls
// fail, and a second Close is a no-op.
func TestCloseStopsTheWorker(t *testing.T) {
	b, _ := open(t, "reference")
	x := upload(t, b, abi.F32, 1, f32bytes(1))
	c := b.cur
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned before the worker exited")
	}
	if st := c.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("the worker's exit: %v, want a clean exit", st)
	}
	if _, err := b.Alloc(abi.F32, 1); !errors.Is(err, errClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := b.Write(x, f32bytes(2)); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseAfterTheWorkerDied: Close of a backend whose worker is gone
// (killed, or lost to a sticky fault, and reaped: exec's Wait closes the
// pipe to it) stops nothing and says nothing went wrong.
func TestCloseAfterTheWorkerDied(t *testing.T) {
	b, _ := open(t, "reference")
	upload(t, b, abi.F32, 1, f32bytes(1))
	b.mu.Lock()
	c := b.cur
	b.mu.Unlock()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done // reaped
	if err := b.Close(); err != nil {
		t.Errorf("Close after the worker died: %v", err)
	}
}

// TestServeEndsWithItsInput: Serve returns nil when the parent closes the
// pipe, and an error for a frame it cannot read.
func TestServeEndsWithItsInput(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	ctx := context.Background()
	if err := Serve(ctx, bytes.NewReader(nil), io.Discard, ref); err != nil {
		t.Errorf("Serve at the end of its input: %v", err)
	}
	if err := Serve(ctx, bytes.NewReader([]byte{byte(opAlloc), 3, 0}), io.Discard, ref); err == nil {
		t.Error("Serve accepted a truncated frame")
	}
	bad := appendFrame(nil, 200, nil, 0)
	if err := Serve(ctx, bytes.NewReader(bad), io.Discard, ref); err == nil {
		t.Error("Serve accepted an unknown operation")
	}
}

// BenchmarkQueuedOp measures the parent's cost of a queued operation: a
// Binary op of 16 elements sent b.N times, then one Read that waits for
// the worker to run them all (reference backend, one thread).
func BenchmarkQueuedOp(bm *testing.B) {
	b, _ := open(bm, "reference")
	ctx := context.Background()
	x := upload(bm, b, abi.F32, 16, make([]byte, 64))
	dst := make([]byte, 64)
	bm.ResetTimer()
	for range bm.N {
		if err := b.Binary(ctx, abi.OpAdd, x, x, x); err != nil {
			bm.Fatal(err)
		}
	}
	if err := b.Read(x, dst); err != nil {
		bm.Fatal(err)
	}
}

// TestPrecision: a worker's backend offers its reduced precisions through
// the worker (the fake CUDA device's tf32 and bf16), and a view's Gemm,
// batched Gemm and prefill MatMul run at the precision in the worker: the
// bits of the in-process backend's view at it, not f32's. A precision the
// worker lacks is refused at once.
func TestPrecision(t *testing.T) {
	b, _ := open(t, "cuda")
	drv, _ := cudatest.Build(t)
	local, err := cuda.New(cuda.Config{Driver: drv, CUBLAS: drv})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if got := tensor.PrecisionsOf(b); !slices.Equal(got, []tensor.Precision{tensor.F32, tensor.TF32, tensor.BF16}) {
		t.Fatalf("precisions through the worker: %v", got)
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	f32s := func(n int) []byte {
		var out []byte
		for range n {
			v := float32(r.NormFloat64())
			for tensor.TF32.Round(v) == v {
				v = float32(r.NormFloat64())
			}
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
		return out
	}
	const m, n, k = 12, 5, 40
	a, w := f32s(m*k), f32s(n*k)
	run := func(be tensor.Backend, op string) []byte {
		x, y := upload(t, be, abi.F32, m*k, a), upload(t, be, abi.F32, n*k, w)
		out := upload(t, be, abi.F32, m*n, make([]byte, 4*m*n))
		var err error
		switch op {
		case "gemm":
			err = be.Gemm(ctx, tensor.GemmParams{M: m, N: n, K: k, TransB: true}, x, y, out)
		case "matmul":
			err = be.(tensor.Transformer).MatMul(ctx, m, n, k, x, y, out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return download(t, be, out)
	}
	for _, p := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		view, err := b.WithPrecision(p)
		if err != nil {
			t.Fatal(err)
		}
		lview, _ := local.WithPrecision(p)
		for _, op := range []string{"gemm", "matmul"} {
			got, want, f32 := run(view, op), run(lview, op), run(b, op)
			if !bytes.Equal(got, want) || bytes.Equal(got, f32) {
				t.Errorf("%v %s through the worker: equal to the local view %v, to f32 %v; want true, false", p, op, bytes.Equal(got, want), bytes.Equal(got, f32))
			}
		}
	}
	if _, err := b.WithPrecision(tensor.Precision(9)); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("an unknown precision: %v, want ErrUnsupported", err)
	}
}

// TestAllocFailureKeptOnTheBuffer: Alloc is queued, so a device out of
// memory (the fake driver's cuMemAlloc fails after the first) does not
// fail the call: the failure waits on the buffer, and the first Read of
// it, or of what an operation on it wrote, returns it; the worker keeps
// serving, from memory it has.
func TestAllocFailureKeptOnTheBuffer(t *testing.T) {
	b, _ := open(t, "cuda", "FAKECUDA_FAIL=cuMemAlloc_v2:2:1")
	ctx := context.Background()
	kept := upload(t, b, abi.F32, 4, f32bytes(7, 7, 7, 7))
	download(t, b, kept)
	before := b.Stats()
	x, err := b.Alloc(abi.F32, 4)
	if err != nil {
		t.Fatalf("a queued Alloc returned %v; its failure belongs to the buffer", err)
	}
	if err := b.Write(x, f32bytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	out, _ := b.Alloc(abi.F32, 4)
	if err := b.Unary(ctx, abi.OpReLU, x, out); err != nil {
		t.Fatal(err)
	}
	for _, y := range []tensor.Buffer{x, out} {
		if err := b.Read(y, make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
			t.Errorf("Read: %v, want the allocation's failure", err)
		}
	}
	if got := b.Stats().Sub(before); got.Waits != 2 || got.Allocs != 2 || got.Writes != 2 {
		t.Errorf("%+v: want 2 waits (the Reads), 2 allocs, 2 writes to the pipe", got)
	}
	b.Free(kept) // to the device's pool: the next buffer of its size needs no cuMemAlloc
	y := upload(t, b, abi.F32, 4, f32bytes(-1, 5, -2, 6))
	if got := download(t, b, y); !bytes.Equal(got, f32bytes(-1, 5, -2, 6)) {
		t.Errorf("the next buffer: %v", got)
	}
}

// TestFailureDoesNotOutliveItsData: a buffer whose op failed, written
// whole by a later op (a job reuses its freed buffers for new results),
// reads the new result; one an op only updates in place (RoPE) keeps the
// failure.
func TestFailureDoesNotOutliveItsData(t *testing.T) {
	b, _ := open(t, "reference")
	ctx := context.Background()
	table := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4)) // 2 rows of 2
	bad := upload(t, b, abi.I32, 2, []byte{0, 0, 0, 0, 5, 0, 0, 0})
	x := upload(t, b, abi.F32, 4, f32bytes(-1, 2, -3, 4))
	out, _ := b.Alloc(abi.F32, 4)
	fail := func() {
		t.Helper()
		if err := b.Gather(ctx, 2, 2, table, bad, out); err != nil { // index 5 of 2 rows: fails on the worker
			t.Fatal(err)
		}
	}
	fail()
	if err := b.Read(out, make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "gather") {
		t.Fatalf("after a failed gather: %v", err)
	}
	if err := b.Unary(ctx, abi.OpReLU, x, out); err != nil {
		t.Fatal(err)
	}
	if got := download(t, b, out); !bytes.Equal(got, f32bytes(0, 2, 0, 4)) {
		t.Errorf("relu written over the failed gather's output: %v", got)
	}
	fail()
	rp := tensor.RoPEParams{Rows: 1, Cols: 4, HeadDim: 4, Pos: 1, Theta: 10000}
	if err := b.RoPE(ctx, rp, out); err != nil {
		t.Fatal(err)
	}
	if err := b.Read(out, make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "gather") {
		t.Errorf("RoPE in place on the failed output: %v, want the gather's failure", err)
	}
}

// overTransports runs f on a reference worker twice: reached through shared
// memory (off false), and through the pipe alone (off true).
func overTransports(t *testing.T, f func(t *testing.T, b *Backend, off bool)) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipe only %v", off), func(t *testing.T) {
			noShm = off
			defer func() { noShm = false }()
			b, _ := open(t, "reference")
			f(t, b, off)
		})
	}
}

// TestSharedMemory: buffers of a MiB and more go through shared memory,
// both ways, with the pipe's results: the bytes round-trip, a large
// buffer an op wrote reads its values, a failure kept on a buffer comes
// back from a large Read, and a buffer grown past the mapping remaps it.
// With shared memory off the same calls go through the pipe.
func TestSharedMemory(t *testing.T) {
	overTransports(t, func(t *testing.T, b *Backend, off bool) {
		if got := b.cur.shm != nil; got == off {
			t.Fatalf("shared memory %v, want %v", got, !off)
		}
		ctx := context.Background()
		r := rand.New(rand.NewPCG(1, 2))
		for _, n := range []int{shmMin / 4, 3 * shmMin / 4, 5 * shmMin / 4} { // f32s: 1 MiB, 3 MiB, 5 MiB
			src := fill(r, bufSpec{dt: abi.F32, n: n})
			x := upload(t, b, abi.F32, n, src)
			if got := download(t, b, x); !bytes.Equal(got, src) {
				t.Fatalf("%d values: the bytes did not round-trip", n)
			}
			y, _ := b.Alloc(abi.F32, n)
			if err := b.Binary(ctx, abi.OpAdd, x, x, y); err != nil {
				t.Fatal(err)
			}
			got := download(t, b, y)
			for i := 0; i < n; i += n / 7 {
				if want := 2 * math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])); math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])) != want {
					t.Fatalf("%d values: x+x at %d is not %v", n, i, want)
				}
			}
		}
		table := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
		bad, _ := b.Alloc(abi.I32, shmMin/4)
		out, _ := b.Alloc(abi.F32, 2*shmMin/4)
		idx := make([]byte, shmMin)
		binary.LittleEndian.PutUint32(idx, 7) // of 2 rows
		if err := b.Write(bad, idx); err != nil {
			t.Fatal(err)
		}
		if err := b.Gather(ctx, 2, 2, table, bad, out); err != nil {
			t.Fatal(err)
		}
		if err := b.Read(out, make([]byte, 2*shmMin)); err == nil || !strings.Contains(err.Error(), "gather") {
			t.Errorf("a large Read of a failed gather's output: %v", err)
		}
	})
}

// TestFill: Fill writes what fill leaves in dst, a buffer's whole size,
// through shared memory when the buffer is a MiB or more (fill writes the
// shared memory itself, not a copy of it) and through the pipe otherwise
// or without shared memory; fill's error comes back as is, and the buffer
// takes later writes as before.
func TestFill(t *testing.T) {
	overTransports(t, func(t *testing.T, b *Backend, off bool) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{16, shmMin / 4, 5 * shmMin / 4} { // f32s: 64 bytes, 1 MiB, 5 MiB
			src := fill(r, bufSpec{dt: abi.F32, n: n})
			x, err := b.Alloc(abi.F32, n)
			if err != nil {
				t.Fatal(err)
			}
			var inShm bool
			err = b.Fill(x, func(dst []byte) error {
				if len(dst) != len(src) {
					t.Fatalf("%d values: fill got %d bytes, want %d", n, len(dst), len(src))
				}
				inShm = b.cur.shm != nil && len(b.cur.shm.mem) > 0 && &dst[0] == &b.cur.shm.mem[0]
				copy(dst, src)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := !off && 4*n >= shmMin; inShm != want {
				t.Errorf("%d values: filled in shared memory %v, want %v", n, inShm, want)
			}
			if got := download(t, b, x); !bytes.Equal(got, src) {
				t.Fatalf("%d values: the bytes Fill wrote did not read back", n)
			}
			oops := errors.New("the file is short")
			if err := b.Fill(x, func([]byte) error { return oops }); err != oops {
				t.Errorf("%d values: Fill with a failing fill: %v, want its error", n, err)
			}
			if err := b.Write(x, src); err != nil {
				t.Fatal(err)
			}
			if got := download(t, b, x); !bytes.Equal(got, src) {
				t.Fatalf("%d values: a Write after a failed Fill did not read back", n)
			}
		}
	})
}

// BenchmarkWeightsUpload is a 64 MiB Write (a model's weights on their way
// to the device) and its Read back, to a worker on the reference backend,
// through shared memory and through the pipe alone.
func BenchmarkWeightsUpload(b *testing.B) {
	for _, pipe := range []bool{false, true} {
		b.Run(map[bool]string{false: "shm", true: "pipe"}[pipe], func(b *testing.B) {
			noShm = pipe
			defer func() { noShm = false }()
			be, _ := open(b, "reference")
			data := make([]byte, 64<<20)
			x, _ := be.Alloc(abi.I8, len(data))
			b.SetBytes(int64(2 * len(data)))
			b.ResetTimer()
			for range b.N {
				if err := be.Write(x, data); err != nil {
					b.Fatal(err)
				}
				if err := be.Read(x, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
