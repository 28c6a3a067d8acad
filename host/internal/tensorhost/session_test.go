package tensorhost

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// deviceBackend stands in for a backend whose buffers are not host memory
// (a GPU): it keeps elements behind its own buffer type and supports only
// elementwise ops, so every other op exercises the copy-through fallback.
type deviceBackend struct {
	tensor.HostMemory
	ref tensor.Backend
}

type deviceBuffer struct{ host *tensor.HostBuffer }

func (b *deviceBuffer) DType() abi.DType { return b.host.DType() }
func (b *deviceBuffer) Len() int         { return b.host.Len() }

func (d *deviceBackend) Name() string        { return "device" }
func (d *deviceBackend) Class() tensor.Class { return tensor.ClassGPU }
func (d *deviceBackend) Alloc(dt abi.DType, n int) (tensor.Buffer, error) {
	h, err := tensor.NewHostBuffer(dt, n)
	return &deviceBuffer{h}, err
}
func (d *deviceBackend) Write(b tensor.Buffer, src []byte) error {
	return d.HostMemory.Write(b.(*deviceBuffer).host, src)
}
func (d *deviceBackend) Read(b tensor.Buffer, dst []byte) error {
	return d.HostMemory.Read(b.(*deviceBuffer).host, dst)
}
func (d *deviceBackend) Gemm(context.Context, tensor.GemmParams, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) Binary(ctx context.Context, op abi.Op, a, b, out tensor.Buffer) error {
	return d.ref.Binary(ctx, op, a.(*deviceBuffer).host, b.(*deviceBuffer).host, out.(*deviceBuffer).host)
}
func (d *deviceBackend) Unary(context.Context, abi.Op, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) Softmax(context.Context, int, int, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) Reduce(context.Context, abi.Op, int, int, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) LayerNorm(context.Context, int, int, tensor.Buffer, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) Transpose(context.Context, int, int, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) Gather(context.Context, int, int, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) GemmBatched(context.Context, int, tensor.GemmParams, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) AdamW(context.Context, tensor.AdamWParams, tensor.Buffer, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) SoftmaxCausal(context.Context, int, int, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}
func (d *deviceBackend) CrossEntropy(context.Context, int, int, tensor.Buffer, tensor.Buffer, tensor.Buffer, tensor.Buffer) error {
	return tensor.ErrUnsupported
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		bits := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	return b
}

// TestFallbackThroughCopies: an op the session backend does not support runs
// on the reference backend through copies, with the same result as running
// on the reference directly, and is counted.
func TestFallbackThroughCopies(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	results := map[string][]byte{}
	for name, be := range map[string]tensor.Backend{"reference": nil, "device": &deviceBackend{ref: ref}} {
		s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		if s.hostBuffers != (be == nil) {
			t.Fatalf("%s: hostBuffers = %v", name, s.hostBuffers)
		}
		ha, a, _ := s.alloc(context.Background(), abi.F32, []int{2, 3})
		hb, b, _ := s.alloc(context.Background(), abi.F32, []int{3, 2})
		if err := s.backend.Write(a.buf, f32bytes(1, 2, 3, 4, 5, 6)); err != nil {
			t.Fatal(err)
		}
		if err := s.backend.Write(b.buf, f32bytes(1, 0, 0, 1, 1, 1)); err != nil {
			t.Fatal(err)
		}
		hc := gemm(ctx, s, nil, []int32{ha, hb, 0, 0})
		if hc <= 0 {
			t.Fatalf("%s: gemm = %d", name, hc)
		}
		hs := softmax(ctx, s, nil, []int32{hc})
		e, errno := s.get(hs)
		if errno != abi.OK {
			t.Fatalf("%s: softmax = %d", name, hs)
		}
		out := make([]byte, 16)
		if err := s.backend.Read(e.buf, out); err != nil {
			t.Fatal(err)
		}
		results[name] = out
		if wantFallbacks := map[string]uint64{"reference": 0, "device": 2}[name]; s.Stats.Fallbacks != wantFallbacks {
			t.Errorf("%s: %d fallbacks, want %d", name, s.Stats.Fallbacks, wantFallbacks)
		}
		s.Close()
	}
	if string(results["reference"]) != string(results["device"]) {
		t.Fatalf("fallback result differs: %x vs %x", results["device"], results["reference"])
	}
}

// TestSessionLimits: handle and byte limits answer ETOOMANY and ENOMEM, and
// freed handles and bytes are reusable.
func TestSessionLimits(t *testing.T) {
	s, err := NewSession(Config{Reference: reference.New(reference.Config{}), MaxHandles: 2, MaxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h1, _, e1 := s.alloc(context.Background(), abi.F32, []int{8}) // 32 bytes
	_, _, e2 := s.alloc(context.Background(), abi.F32, []int{9})  // 36 more: over 64
	h3, _, e3 := s.alloc(context.Background(), abi.I8, []int{32}) // 32 more: exactly 64
	_, _, e4 := s.alloc(context.Background(), abi.I8, []int{1})   // a third handle
	if e1 != abi.OK || e2 != abi.ENOMEM || e3 != abi.OK || e4 != abi.ETOOMANY {
		t.Fatalf("alloc errnos %v %v %v %v", e1, e2, e3, e4)
	}
	if s.release(h1) != abi.OK || s.release(h1) != abi.EBADF {
		t.Fatal("release twice")
	}
	if h, _, e := s.alloc(context.Background(), abi.F32, []int{8}); e != abi.OK || h != h1 {
		t.Fatalf("freed handle not reused: %d %v", h, e)
	}
	if _, errno := s.get(h3 + 1); errno != abi.EBADF {
		t.Fatal("unknown handle accepted")
	}
	if s.Stats.PeakBytes != 64 {
		t.Errorf("peak %d bytes, want 64", s.Stats.PeakBytes)
	}
}

// TestNewSessionNeedsReference: the exact backend is not optional.
func TestNewSessionNeedsReference(t *testing.T) {
	if _, err := NewSession(Config{}); err == nil {
		t.Fatal("session without a reference backend")
	}
}

// TestNewSessionPrecision: a reduced precision needs tolerance mode and a
// backend that offers it; f32 is the backend itself.
func TestNewSessionPrecision(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"f32", Config{Mode: abi.ModeTolerance, Reference: ref, Backend: ref, Precision: tensor.F32}, true},
		{"bf16 exact", Config{Mode: abi.ModeExact, Reference: ref, Backend: ref, Precision: tensor.BF16}, false},
		{"bf16 no backend", Config{Mode: abi.ModeTolerance, Reference: ref, Precision: tensor.BF16}, false},
		{"bf16 not offered", Config{Mode: abi.ModeTolerance, Reference: ref, Backend: ref, Precision: tensor.BF16}, false},
	}
	for _, c := range cases {
		s, err := NewSession(c.cfg)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
		if err == nil && s.Backend() != ref {
			t.Errorf("%s: session on %v", c.name, s.Backend().Name())
		}
		if c.name == "bf16 not offered" && !errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", c.name, err)
		}
	}
}

// TestProofRecording: in proof mode an i8 GEMM on handles is recorded with
// its transposes applied and padded to its template, on host and device
// buffers alike; accumulate and ops too large for the templates get
// ENOPROOF and leave nothing behind; past the cap the session aborts with
// ErrProofLimit; f32 GEMMs are not recorded.
func TestProofRecording(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	for name, be := range map[string]tensor.Backend{"reference": nil, "device": &deviceBackend{ref: ref}} {
		t.Run(name, func(t *testing.T) {
			var aborted error
			s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: be,
				Proofs: &ProofConfig{Templates: []int{16}, MaxOps: 1},
				Abort:  func(_ context.Context, cause error) { aborted = cause; panic("abort") }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// A stored [k,m] = [3,2] with TransA: op(A) = [[1,3,5],[2,4,6]].
			ha, a, _ := s.alloc(context.Background(), abi.I8, []int{3, 2})
			hb, b, _ := s.alloc(context.Background(), abi.I8, []int{3, 1})
			hf, f, _ := s.alloc(context.Background(), abi.F32, []int{2, 2})
			hbig, big, _ := s.alloc(context.Background(), abi.I8, []int{17, 1})
			s.backend.Write(a.buf, []byte{1, 2, 3, 4, 5, 6})
			s.backend.Write(b.buf, []byte{1, 0xff, 2}) // 1, -1, 2
			s.backend.Write(f.buf, f32bytes(1, 2, 3, 4))
			s.backend.Write(big.buf, make([]byte, 17))
			if h := gemm(ctx, s, nil, []int32{hf, hf, 0, 0}); h <= 0 {
				t.Fatalf("f32 gemm = %d", h)
			}
			live := s.live
			if r := gemm(ctx, s, nil, []int32{hbig, hb, 0, abi.GemmTransB}); r != int32(abi.ENOPROOF) { // 17×3 · …: too large
				t.Errorf("gemm too large = %d, want ENOPROOF", r)
			}
			if s.live != live {
				t.Errorf("refused gemm left %d tensors behind", s.live-live)
			}
			hc := gemm(ctx, s, nil, []int32{ha, hb, 0, abi.GemmTransA})
			if hc <= 0 {
				t.Fatalf("i8 gemm = %d", hc)
			}
			if r := gemm(ctx, s, nil, []int32{ha, hb, hc, abi.GemmTransA | abi.GemmAccumulate}); r != int32(abi.ENOPROOF) {
				t.Errorf("accumulate = %d, want ENOPROOF", r)
			}
			func() {
				defer func() { recover() }()
				gemm(ctx, s, nil, []int32{ha, hb, 0, abi.GemmTransA})
				t.Error("gemm past the cap returned")
			}()
			if !errors.Is(aborted, ErrProofLimit) {
				t.Errorf("abort cause %v, want ErrProofLimit", aborted)
			}
			ops := s.GemmOps()
			if len(ops) != 1 {
				t.Fatalf("%d ops recorded, want 1", len(ops))
			}
			op := ops[0]
			if op.M != 2 || op.N != 1 || op.K != 3 || op.Flags != abi.GemmTransA || op.Template != 16 {
				t.Errorf("op header %d×%d×%d flags %d template %d", op.M, op.N, op.K, op.Flags, op.Template)
			}
			at := func(m []int32, i, j int) int32 { return m[i*16+j] }
			wantA := [][]int32{{1, 3, 5}, {2, 4, 6}}
			for i := range 2 {
				for j := range 3 {
					if at(op.A, i, j) != wantA[i][j] {
						t.Errorf("A[%d,%d] = %d, want %d", i, j, at(op.A, i, j), wantA[i][j])
					}
				}
			}
			if at(op.B, 1, 0) != -1 || at(op.C, 0, 0) != 8 || at(op.C, 1, 0) != 10 {
				t.Errorf("B[1,0] = %d, C = %d, %d; want -1, 8, 10", at(op.B, 1, 0), at(op.C, 0, 0), at(op.C, 1, 0))
			}
			var nonzero int
			for _, m := range [][]int32{op.A, op.B, op.C} {
				for _, x := range m {
					if x != 0 {
						nonzero++
					}
				}
			}
			if nonzero != 6+3+2 {
				t.Errorf("%d non-zero entries, want 11: padding is not zero", nonzero)
			}
		})
	}
}

// countingBudget is a Budget of limit bytes that records what it holds.
type countingBudget struct{ limit, used int64 }

func (b *countingBudget) Reserve(n int64) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}
func (b *countingBudget) Release(n int64) { b.used -= n }

// TestSessionBudget: tensors take their bytes from the shared budget, are
// refused with ENOMEM when it is spent (even below MaxBytes), and give the
// bytes back when freed and when the session closes.
func TestSessionBudget(t *testing.T) {
	b := &countingBudget{limit: 100}
	s, err := NewSession(Config{Reference: reference.New(reference.Config{}), MaxBytes: 1000, Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	h1, _, errno := s.alloc(context.Background(), abi.F32, []int{10}) // 40 bytes
	if errno != abi.OK || b.used != 40 {
		t.Fatalf("alloc: errno %d, budget used %d", errno, b.used)
	}
	b.used += 50 // the guest's memory grows
	if _, _, errno := s.alloc(context.Background(), abi.F32, []int{3}); errno != abi.ENOMEM {
		t.Fatalf("alloc past the budget: errno %d, want ENOMEM", errno)
	}
	if _, _, errno := s.alloc(context.Background(), abi.I8, []int{10}); errno != abi.OK || b.used != 100 {
		t.Fatalf("alloc filling the budget: errno %d, used %d", errno, b.used)
	}
	if s.release(h1) != abi.OK || b.used != 60 {
		t.Fatalf("free: used %d, want 60", b.used)
	}
	s.Close()
	if b.used != 50 {
		t.Fatalf("after Close the budget holds %d, want the guest's 50", b.used)
	}
}

// TestHostSpares: in host memory too, a freed tensor's buffer serves the
// next op result of its size, holding that op's values, and a buffer past
// maxSpareHost is not kept.
func TestHostSpares(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	s, err := NewSession(Config{Mode: abi.ModeExact, Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ha, a, _ := s.alloc(ctx, abi.F32, []int{2, 3})
	hb, b, _ := s.alloc(ctx, abi.F32, []int{3, 2})
	if err := s.backend.Write(a.buf, f32bytes(1, 2, 3, 4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	if err := s.backend.Write(b.buf, f32bytes(1, 0, 0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	h1 := gemm(ctx, s, nil, []int32{ha, hb, 0, 0})
	c1, _ := s.get(h1)
	first := c1.buf
	if err := s.backend.Write(first, f32bytes(9, 9, 9, 9)); err != nil { // stale values
		t.Fatal(err)
	}
	if errno := s.release(h1); errno != abi.OK {
		t.Fatal(errno)
	}
	h2 := gemm(ctx, s, nil, []int32{ha, hb, 0, 0})
	c2, errno := s.get(h2)
	if errno != abi.OK {
		t.Fatalf("gemm = %d", h2)
	}
	if c2.buf != first {
		t.Error("the freed result's buffer did not serve the next result of its size")
	}
	got := make([]byte, 16)
	if err := s.backend.Read(c2.buf, got); err != nil {
		t.Fatal(err)
	}
	if want := f32bytes(4, 5, 10, 11); string(got) != string(want) {
		t.Errorf("result %x, want %x", got, want)
	}
	hl, _, errno := s.alloc(ctx, abi.F32, []int{maxSpareHost/4 + 1})
	if errno != abi.OK {
		t.Fatal(errno)
	}
	s.release(hl)
	if s.spareBytes > maxSpareHost {
		t.Errorf("%d spare bytes, more than %d", s.spareBytes, maxSpareHost)
	}
}
