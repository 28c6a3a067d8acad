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
	read := func(h int32) []byte {
		t.Helper()
		e, errno := s.get(h)
		if errno != abi.OK {
			t.Fatal(errno)
		}
		b := make([]byte, 4*e.elems())
		if err := s.backend.Read(e.buf, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
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
		snapshot := func() [][]byte {
			var all [][]byte
			for h := int32(1); h <= int32(len(shapes)); h++ {
				e, _ := s.get(h)
				b := make([]byte, e.dt.Bytes(e.elems()))
				if err := s.backend.Read(e.buf, b); err != nil {
					t.Fatal(err)
				}
				all = append(all, b)
			}
			return all
		}
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
