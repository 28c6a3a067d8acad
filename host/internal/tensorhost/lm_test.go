package tensorhost

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/tensor/reference"
)

// exactSession is a session in exact mode on the reference backend, with
// the data file of weights as "w", and a guest memory for the host
// functions' pointers; closed when t ends.
func exactSession(t *testing.T) (*Session, api.Memory) {
	t.Helper()
	path, _ := weights(t)
	s, err := NewSession(Config{Mode: abi.ModeExact, Reference: reference.New(reference.Config{Threads: 1}),
		Data: dataFiles(path), Cache: modelcache.New(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, guestMemory(t)
}

// randomF32 makes an f32 tensor of dims in s, of values drawn from r in
// [-2, 2), and returns its handle.
func randomF32(t *testing.T, s *Session, r *rand.Rand, dims ...int) int32 {
	t.Helper()
	h, e, errno := s.alloc(context.Background(), abi.F32, dims)
	if errno != abi.OK {
		t.Fatal(errno)
	}
	v := make([]float32, e.elems())
	for i := range v {
		v[i] = r.Float32()*4 - 2
	}
	if err := s.backend.Write(e.buf, f32bytes(v...)); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRoPEKV: rope_kv gives, in exact mode, the bits of its four calls
// (rope or rope_factors of q and of k, copy_rows of k and of v), the
// caches' other rows untouched; and it refuses what they would refuse, and
// tensors that alias each other.
func TestRoPEKV(t *testing.T) {
	ctx := context.Background()
	s, mem := exactSession(t)
	r := rand.New(rand.NewPCG(7, 8))
	const rows, qCols, kCols, hd, S = 2, 16, 8, 4, 6
	theta := int32(math.Float32bits(10000))
	newF32 := func(dims ...int) int32 { return randomF32(t, s, r, dims...) }
	read := func(h int32) []byte { t.Helper(); return readBytes(t, s, h) }
	clone := func(h int32) int32 {
		t.Helper()
		e, _ := s.get(h)
		c, ce, errno := s.alloc(ctx, abi.F32, e.shape)
		if errno != abi.OK || s.backend.Write(ce.buf, read(h)) != nil {
			t.Fatal(errno)
		}
		return c
	}
	factors := newF32(hd / 2)

	for _, withFactors := range []bool{false, true} {
		q, k, v := newF32(rows, qCols), newF32(rows, kCols), newF32(rows, kCols)
		kc, vc := newF32(S, kCols), newF32(S, kCols)
		q2, k2, kc2, vc2 := clone(q), clone(k), clone(kc), clone(vc)
		fh := int32(0)
		if withFactors {
			fh = factors
		}
		const pos = 3
		if got := ropeKV(ctx, s, nil, []int32{q, k, v, kc, vc, pos, hd, theta, abi.RoPEHalves, fh}); got != 0 {
			t.Fatalf("factors %v: rope_kv = %d", withFactors, got)
		}
		for _, x := range []int32{q2, k2} {
			if got := ropeOp(ctx, s, []int32{x, pos, hd, theta, abi.RoPEHalves}, fh); got != 0 {
				t.Fatalf("rope = %d", got)
			}
		}
		if copyRows(ctx, s, nil, []int32{kc2, pos, k2}) != 0 || copyRows(ctx, s, nil, []int32{vc2, pos, v}) != 0 {
			t.Fatal("copy_rows failed")
		}
		for _, pair := range [][2]int32{{q, q2}, {k, k2}, {kc, kc2}, {vc, vc2}} {
			if !bytes.Equal(read(pair[0]), read(pair[1])) {
				t.Errorf("factors %v: rope_kv's %x, the four calls' %x", withFactors, read(pair[0]), read(pair[1]))
			}
		}
	}

	q, k, v := newF32(rows, qCols), newF32(rows, kCols), newF32(rows, kCols)
	kc, vc := newF32(S, kCols), newF32(S, kCols)
	data := fromData(s, mem, 0, abi.F32, 2, kCols) // the file's 16 values
	hi, _, errno := s.alloc(ctx, abi.I32, []int{rows, kCols})
	if data <= 0 || errno != abi.OK {
		t.Fatalf("tensor_from_data = %d, tensor_new = %v", data, errno)
	}
	wideK, shortV, oddQ := newF32(rows, 2*kCols), newF32(1, kCols), newF32(rows, 6)
	otherCache, badFactors := newF32(S, 2*kCols), newF32(hd)
	for _, c := range []struct {
		name string
		args []int32
		want abi.Errno
	}{
		{"a handle that is none", []int32{q, k, v, kc, 99, 0, hd, theta, 0, 0}, abi.EBADF},
		{"a data tensor as a cache", []int32{q, k, v, data, vc, 0, hd, theta, 0, 0}, abi.EROFS},
		{"q that is k", []int32{q, q, v, kc, vc, 0, hd, theta, 0, 0}, abi.EINVAL},
		{"k that is the key cache", []int32{q, kc, v, kc, vc, 0, hd, theta, 0, 0}, abi.EINVAL},
		{"the caches one tensor", []int32{q, k, v, kc, kc, 0, hd, theta, 0, 0}, abi.EINVAL},
		{"rows past the caches' end", []int32{q, k, v, kc, vc, S - 1, hd, theta, 0, 0}, abi.EINVAL},
		{"a negative position", []int32{q, k, v, kc, vc, -1, hd, theta, 0, 0}, abi.EINVAL},
		{"an odd head size", []int32{q, k, v, kc, vc, 0, 3, theta, 0, 0}, abi.EINVAL},
		{"theta NaN", []int32{q, k, v, kc, vc, 0, hd, int32(math.Float32bits(float32(math.NaN()))), 0, 0}, abi.EINVAL},
		{"an unknown style", []int32{q, k, v, kc, vc, 0, hd, theta, 9, 0}, abi.EINVAL},
		{"v of i32", []int32{q, k, hi, kc, vc, 0, hd, theta, 0, 0}, abi.EDTYPE},
		{"k wider than the caches", []int32{q, wideK, v, kc, vc, 0, hd, theta, 0, 0}, abi.ESHAPE},
		{"v of other rows", []int32{q, k, shortV, kc, vc, 0, hd, theta, 0, 0}, abi.ESHAPE},
		{"q's row not whole heads", []int32{oddQ, k, v, kc, vc, 0, hd, theta, 0, 0}, abi.ESHAPE},
		{"caches of two shapes", []int32{q, k, v, kc, otherCache, 0, hd, theta, 0, 0}, abi.ESHAPE},
		{"factors of the wrong length", []int32{q, k, v, kc, vc, 0, hd, theta, 0, badFactors}, abi.ESHAPE},
	} {
		before := [][]byte{read(q), read(k), read(kc), read(vc)}
		if got := ropeKV(ctx, s, nil, c.args); got != int32(c.want) {
			t.Errorf("%s: rope_kv = %d, want %d (%v)", c.name, got, int32(c.want), c.want)
		}
		for i, h := range []int32{q, k, kc, vc} {
			if !bytes.Equal(read(h), before[i]) {
				t.Errorf("%s: tensor %d changed by a refused call", c.name, i)
			}
		}
	}
}

// FuzzRoPEKV: rope_kv with any handles, position, head size, θ, style and
// factors, over tensors of varied shapes and types (a data tensor among
// them), never panics, answers 0 or an errno, changes nothing when it
// refuses, and when it accepts gives the bits of its four calls.
func FuzzRoPEKV(f *testing.F) {
	theta := int32(math.Float32bits(10000))
	// handles: 1 q [2,16], 2 k [2,8], 3 v [2,8], 4 kc [6,8], 5 vc [6,8],
	// 6 factors [2], 7 i32 [2,8], 8 data [2,8], 9 [1,8], 10 [6,16].
	f.Add(int32(1), int32(2), int32(3), int32(4), int32(5), int32(3), int32(4), theta, int32(abi.RoPEHalves), int32(0))
	f.Add(int32(1), int32(2), int32(3), int32(4), int32(5), int32(0), int32(4), theta, int32(abi.RoPEInterleaved), int32(6))
	f.Add(int32(1), int32(1), int32(3), int32(4), int32(5), int32(0), int32(4), theta, int32(0), int32(0))
	f.Add(int32(1), int32(2), int32(7), int32(8), int32(5), int32(5), int32(4), theta, int32(1), int32(9))
	f.Add(int32(10), int32(9), int32(9), int32(4), int32(5), int32(-1), int32(0), int32(-1), int32(7), int32(99))
	f.Fuzz(func(t *testing.T, q, k, v, kc, vc, pos, hd, theta, style, factors int32) {
		ctx := context.Background()
		s, mem := exactSession(t)
		r := rand.New(rand.NewPCG(1, 2))
		shapes := [][]int{{2, 16}, {2, 8}, {2, 8}, {6, 8}, {6, 8}, {2}, nil, nil, {1, 8}, {6, 16}}
		for i, shape := range shapes {
			var h int32
			switch i {
			case 6:
				h, _, _ = s.alloc(ctx, abi.I32, []int{2, 8})
			case 7:
				h = fromData(s, mem, 0, abi.F32, 2, 8)
			default:
				h = randomF32(t, s, r, shape...)
			}
			if h != int32(i+1) {
				t.Fatalf("tensor %d has handle %d", i+1, h)
			}
		}
		snapshot := func() [][]byte { return snapshotOf(t, s, len(shapes)) }
		before := snapshot()
		got := ropeKV(ctx, s, nil, []int32{q, k, v, kc, vc, pos, hd, theta, style, factors})
		after := snapshot()
		switch {
		case got > 0:
			t.Fatalf("rope_kv = %d, want 0 or an errno", got)
		case got < 0:
			for i := range before {
				if !bytes.Equal(before[i], after[i]) {
					t.Fatalf("rope_kv refused (%d) yet changed tensor %d", got, i+1)
				}
			}
			return
		}
		// Accepted: the same four calls on the tensors as they were give
		// the same bits.
		for i, b := range before {
			e, _ := s.get(int32(i + 1))
			if !e.readOnly {
				if err := s.backend.Write(e.buf, b); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, x := range []int32{q, k} {
			if r := ropeOp(ctx, s, []int32{x, pos, hd, theta, style}, factors); r != 0 {
				t.Fatalf("rope_kv accepted what rope refuses (%d)", r)
			}
		}
		if copyRows(ctx, s, nil, []int32{kc, pos, k}) != 0 || copyRows(ctx, s, nil, []int32{vc, pos, v}) != 0 {
			t.Fatal("rope_kv accepted what copy_rows refuses")
		}
		if again := snapshot(); !slices.EqualFunc(again, after, bytes.Equal) {
			t.Fatal("rope_kv's bits are not its four calls'")
		}
	})
}

// readBytes returns the bytes of tensor h of s.
func readBytes(t *testing.T, s *Session, h int32) []byte {
	t.Helper()
	e, errno := s.get(h)
	if errno != abi.OK {
		t.Fatal(errno)
	}
	b := make([]byte, e.dt.Bytes(e.elems()))
	if err := s.backend.Read(e.buf, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshotOf returns the bytes of tensors 1 to n of s.
func snapshotOf(t *testing.T, s *Session, n int) [][]byte {
	t.Helper()
	var all [][]byte
	for h := int32(1); h <= int32(n); h++ {
		all = append(all, readBytes(t, s, h))
	}
	return all
}

// normMatMulComposed is what rmsnorm_matmul of x, g, eps and ws must
// give in exact mode: rmsnorm, then a matmul by each weight; their bytes.
func normMatMulComposed(t *testing.T, s *Session, x, g, eps int32, ws ...int32) [][]byte {
	t.Helper()
	ctx := context.Background()
	xn := rmsNorm(ctx, s, nil, []int32{x, g, eps})
	if xn <= 0 {
		t.Fatalf("rmsnorm = %d", xn)
	}
	defer s.release(xn)
	var out [][]byte
	for _, w := range ws {
		y := matMul(ctx, s, nil, []int32{xn, w})
		if y <= 0 {
			t.Fatalf("matmul = %d", y)
		}
		out = append(out, readBytes(t, s, y))
		s.release(y)
	}
	return out
}

// TestRMSNormMatMul: rmsnorm_matmul and rmsnorm_matmul_swiglu give, in
// exact mode, the bits of rmsnorm and the matmuls (or matmul_swiglu) after
// it, with weights and scales of data files among them; rmsnorm_matmul
// refuses what those would refuse, a count outside [1, 3] and pointers
// outside memory, and a refused call leaves no handle behind and writes
// nothing.
func TestRMSNormMatMul(t *testing.T) {
	ctx := context.Background()
	s, mem := exactSession(t)
	r := rand.New(rand.NewPCG(9, 10))
	newF32 := func(dims ...int) int32 { return randomF32(t, s, r, dims...) }
	eps := int32(math.Float32bits(1e-5))
	const wsPtr, outsPtr = 256, 512
	call := func(x, g, eps int32, n int32, ws ...int32) int32 {
		for i, w := range ws {
			mem.WriteUint32Le(wsPtr+4*uint32(i), uint32(w))
		}
		return rmsNormMatMul(ctx, s, mem, []int32{x, g, eps, wsPtr, n, outsPtr})
	}
	x, g, q, v := newF32(2, 8), newF32(8), newF32(8, 8), newF32(3, 8)
	data := fromData(s, mem, 0, abi.F32, 2, 8) // the file's 16 values: weights of 2 rows
	gData := fromData(s, mem, 0, abi.F32, 8)
	if data <= 0 || gData <= 0 {
		t.Fatalf("tensor_from_data = %d, %d", data, gData)
	}
	for _, scale := range []int32{g, gData} {
		want := normMatMulComposed(t, s, x, scale, eps, q, data, v)
		live := s.live
		if got := call(x, scale, eps, 3, q, data, v); got != 0 {
			t.Fatalf("rmsnorm_matmul = %d", got)
		}
		if s.live != live+3 {
			t.Errorf("%d handles made, want 3", s.live-live)
		}
		for i := range want {
			h, _ := mem.ReadUint32Le(outsPtr + 4*uint32(i))
			if got := readBytes(t, s, int32(h)); !bytes.Equal(got, want[i]) {
				t.Errorf("result %d: %x, rmsnorm and matmul give %x", i, got, want[i])
			}
			s.release(int32(h))
		}
		// One weight: the classifier's form.
		if got := call(x, scale, eps, 1, v); got != 0 {
			t.Fatalf("rmsnorm_matmul of one = %d", got)
		}
		h, _ := mem.ReadUint32Le(outsPtr)
		if got := readBytes(t, s, int32(h)); !bytes.Equal(got, want[2]) {
			t.Errorf("one weight: %x, want %x", got, want[2])
		}
		s.release(int32(h))

		gate, up := newF32(4, 8), newF32(4, 8)
		xn := rmsNorm(ctx, s, nil, []int32{x, scale, eps})
		composed := matMulSwiGLU(ctx, s, nil, []int32{xn, gate, up})
		fused := rmsNormMatMulSwiGLU(ctx, s, nil, []int32{x, scale, eps, gate, up})
		if xn <= 0 || composed <= 0 || fused <= 0 {
			t.Fatalf("rmsnorm %d, matmul_swiglu %d, rmsnorm_matmul_swiglu %d", xn, composed, fused)
		}
		if a, b := readBytes(t, s, fused), readBytes(t, s, composed); !bytes.Equal(a, b) {
			t.Errorf("rmsnorm_matmul_swiglu: %x, rmsnorm and matmul_swiglu give %x", a, b)
		}
	}

	hi, _, errno := s.alloc(ctx, abi.I32, []int{8, 8})
	if errno != abi.OK {
		t.Fatal(errno)
	}
	wide, g16, gate, up, upWide := newF32(4, 16), newF32(16), newF32(4, 8), newF32(4, 8), newF32(4, 16)
	nan := int32(math.Float32bits(float32(math.NaN())))
	for _, c := range []struct {
		name string
		call func() int32
		want abi.Errno
	}{
		{"no weights", func() int32 { return call(x, g, eps, 0) }, abi.EINVAL},
		{"four weights", func() int32 { return call(x, g, eps, 4, q, q, q, q) }, abi.EINVAL},
		{"a weight that is none", func() int32 { return call(x, g, eps, 3, q, 99, v) }, abi.EBADF},
		{"a weight of i32", func() int32 { return call(x, g, eps, 2, q, hi) }, abi.EDTYPE},
		{"a weight of other columns", func() int32 { return call(x, g, eps, 2, q, wide) }, abi.ESHAPE},
		{"eps NaN", func() int32 { return call(x, g, nan, 1, q) }, abi.EINVAL},
		{"eps negative", func() int32 { return call(x, g, int32(math.Float32bits(-1)), 1, q) }, abi.EINVAL},
		{"a scale of other columns", func() int32 { return call(x, g16, eps, 1, q) }, abi.ESHAPE},
		{"x of i32", func() int32 { return call(hi, g, eps, 1, q) }, abi.EDTYPE},
		{"weights past memory", func() int32 {
			return rmsNormMatMul(ctx, s, mem, []int32{x, g, eps, int32(mem.Size()) - 8, 3, outsPtr})
		}, abi.EFAULT},
		{"results misaligned", func() int32 { return rmsNormMatMul(ctx, s, mem, []int32{x, g, eps, wsPtr, 1, outsPtr + 1}) }, abi.EFAULT},
		{"handles run out after the first result", func() int32 {
			defer func(max int) { s.cfg.MaxHandles = max }(s.cfg.MaxHandles)
			s.cfg.MaxHandles = s.live + 1
			return call(x, g, eps, 3, q, data, v)
		}, abi.ETOOMANY},
		{"swiglu: up of other columns", func() int32 { return rmsNormMatMulSwiGLU(ctx, s, nil, []int32{x, g, eps, gate, upWide}) }, abi.ESHAPE},
		{"swiglu: up of i32", func() int32 { return rmsNormMatMulSwiGLU(ctx, s, nil, []int32{x, g, eps, gate, hi}) }, abi.EDTYPE},
		{"swiglu: eps NaN", func() int32 { return rmsNormMatMulSwiGLU(ctx, s, nil, []int32{x, g, nan, gate, up}) }, abi.EINVAL},
	} {
		for i := range abi.MaxNormMatMuls {
			mem.WriteUint32Le(outsPtr+4*uint32(i), 0xabababab)
		}
		live := s.live
		if got := c.call(); got != int32(c.want) {
			t.Errorf("%s: %d, want %d (%v)", c.name, got, int32(c.want), c.want)
		}
		if s.live != live {
			t.Errorf("%s: %d handles left behind", c.name, s.live-live)
		}
		for i := range abi.MaxNormMatMuls {
			if h, _ := mem.ReadUint32Le(outsPtr + 4*uint32(i)); h != 0xabababab {
				t.Errorf("%s: result %d written (%#x) by a refused call", c.name, i, h)
			}
		}
	}
}

// FuzzRMSNormMatMul: rmsnorm_matmul with any handles, eps, count and
// pointers, over tensors of varied shapes and types (data tensors among
// them), never panics, answers 0 or an errno, leaves no handle and writes
// nothing when it refuses, and when it accepts makes the count's handles,
// written to outs_ptr, with the bits of rmsnorm and the matmuls.
func FuzzRMSNormMatMul(f *testing.F) {
	eps := int32(math.Float32bits(1e-5))
	// handles: 1 x [2,8], 2 g [8], 3 w [4,8], 4 w [8,8], 5 i32 [2,8],
	// 6 data [2,8], 7 [2,16], 8 [16], 9 data [8].
	f.Add(int32(1), int32(2), eps, int32(3), int32(4), int32(6), int32(3), int32(256), int32(512))
	f.Add(int32(1), int32(9), eps, int32(4), int32(0), int32(0), int32(1), int32(256), int32(260))
	f.Add(int32(7), int32(8), eps, int32(7), int32(7), int32(7), int32(2), int32(0), int32(4))
	f.Add(int32(1), int32(2), int32(-1), int32(5), int32(3), int32(3), int32(4), int32(65532), int32(3))
	f.Fuzz(func(t *testing.T, x, g, eps, w0, w1, w2, n, wsPtr, outsPtr int32) {
		ctx := context.Background()
		s, mem := exactSession(t)
		r := rand.New(rand.NewPCG(3, 4))
		shapes := [][]int{{2, 8}, {8}, {4, 8}, {8, 8}, nil, nil, {2, 16}, {16}, nil}
		for i, shape := range shapes {
			var h int32
			switch i {
			case 4:
				h, _, _ = s.alloc(ctx, abi.I32, []int{2, 8})
			case 5:
				h = fromData(s, mem, 0, abi.F32, 2, 8)
			case 8:
				h = fromData(s, mem, 0, abi.F32, 8)
			default:
				h = randomF32(t, s, r, shape...)
			}
			if h != int32(i+1) {
				t.Fatalf("tensor %d has handle %d", i+1, h)
			}
		}
		for i, w := range []int32{w0, w1, w2} {
			mem.WriteUint32Le(uint32(wsPtr)+4*uint32(i), uint32(w)) // where it fits
		}
		outs := func() []byte {
			b, _ := mem.Read(uint32(outsPtr), 4*abi.MaxNormMatMuls) // nil past the end
			return bytes.Clone(b)
		}
		snapshot := func() [][]byte { return snapshotOf(t, s, len(shapes)) }
		before, outsBefore, live := snapshot(), outs(), s.live
		got := rmsNormMatMul(ctx, s, mem, []int32{x, g, eps, wsPtr, n, outsPtr})
		if !slices.EqualFunc(snapshot(), before, bytes.Equal) {
			t.Fatalf("rmsnorm_matmul (%d) changed its inputs", got)
		}
		switch {
		case got > 0:
			t.Fatalf("rmsnorm_matmul = %d, want 0 or an errno", got)
		case got < 0:
			if s.live != live || !bytes.Equal(outs(), outsBefore) {
				t.Fatalf("rmsnorm_matmul refused (%d) yet left %d handles or wrote its results", got, s.live-live)
			}
			return
		}
		if s.live != live+int(n) {
			t.Fatalf("%d handles made, want %d", s.live-live, n)
		}
		ws := []int32{w0, w1, w2}[:n]
		want := normMatMulComposed(t, s, x, g, eps, ws...)
		for i := range ws {
			h, _ := mem.ReadUint32Le(uint32(outsPtr) + 4*uint32(i))
			if got := readBytes(t, s, int32(h)); !bytes.Equal(got, want[i]) {
				t.Fatalf("result %d: not the bits of rmsnorm and matmul", i)
			}
		}
	})
}
