package cuda

// The ABI v2 operations on the FAKE driver (fake driver: checks our call
// sequence, not a GPU), compared with the reference backend.
//
// Tolerances. The fake runs kernels.cu as C with exp2f and log2f standing
// in for ex2.approx and lg2.approx, so what differs from the reference here
// is the kernels' own float arithmetic; the bounds are nonetheless set for
// what a GPU would give, so they stay meaningful there:
//   - exp: 2e-6 relative (ex2.approx is within about 2 ulps, and exp_f
//     recovers the rounding of x·log2 e), plus 1e-43 absolute for results in
//     float's subnormal range, whose ulp is 1.4e-45;
//   - log: 1e-6 relative plus 3e-7 absolute (lg2.approx's error is absolute,
//     about 2⁻²² in log2, 1.7e-7 in ln);
//   - tanh: 2e-6 relative (Cephes' polynomial is within 1.3e-7 relative;
//     above 0.625 the exp error shrinks by the 2/(e+1) factor);
//   - sqrt, transpose, gather: the same bits (sqrt.rn is correctly rounded,
//     as is float64's sqrt rounded to float; the others copy);
//   - layernorm: 2e-6 relative to max(1, |y|) (mean and variance in double
//     like the reference; three float roundings after);
//   - softmax_causal, cross_entropy: 1e-5 relative to max(1, |y|): the
//     probabilities come from ex2.approx of (x-m)·log2 e in float, whose
//     rounding costs up to |x-m|·2⁻²⁴ relative on each, and sum in float;
//   - adamw: 2e-6 relative to max(1, |y|): about ten float roundings per
//     element against the reference's float64.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
	"github.com/infernet/infernet/host/tensor/reference"
)

// tensorIn is one buffer of a case: F32 or I32 elements.
type tensorIn struct {
	dt  abi.DType
	f32 []float32
	i32 []int32
}

func f32In(v []float32) tensorIn { return tensorIn{dt: abi.F32, f32: v} }
func i32In(v []int32) tensorIn   { return tensorIn{dt: abi.I32, i32: v} }
func zerosIn(n int) tensorIn     { return f32In(make([]float32, n)) }

func (in tensorIn) bytes() []byte {
	if in.dt == abi.I32 {
		return i32bytes(in.i32)
	}
	return f32bytes(in.f32)
}

func (in tensorIn) len() int { return max(len(in.f32), len(in.i32)) }

// tol bounds |got - want| by abs + rel·|want|; NaN must meet NaN and an
// infinity the same infinity. The zero tol asks for the same bits (any NaN
// still matches any NaN).
type tol struct{ rel, abs float64 }

// scaled is rel relative to max(1, |want|), like closeEnough.
func scaled(rel float64) tol { return tol{rel, rel} }

func (tl tol) ok(got, want float32) bool {
	g, w := float64(got), float64(want)
	switch {
	case math.IsNaN(w) || math.IsNaN(g):
		return math.IsNaN(w) && math.IsNaN(g)
	case math.IsInf(w, 0) || math.IsInf(g, 0) || tl == tol{}:
		return math.Float32bits(got) == math.Float32bits(want)
	}
	return math.Abs(g-w) <= tl.abs+tl.rel*math.Abs(w)
}

// v2Case runs op on the CUDA backend and on the reference backend with
// the same buffers; the buffers listed in outs must then agree within tol.
type v2Case struct {
	name  string
	bufs  []tensorIn
	outs  []int
	tol   tol
	split bool // several launches when chunkElems is 7
	op    func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error
}

// runOn loads c's buffers into be, runs c.op and returns the outputs.
func (c v2Case) runOn(t *testing.T, be tensor.Backend) [][]float32 {
	t.Helper()
	bufs := make([]tensor.Buffer, len(c.bufs))
	for i, in := range c.bufs {
		x, err := be.Alloc(in.dt, in.len())
		if err == nil {
			err = be.Write(x, in.bytes())
		}
		if err != nil {
			t.Fatalf("%s: buffer %d: %v", be.Name(), i, err)
		}
		defer be.Free(x)
		bufs[i] = x
	}
	if err := c.op(context.Background(), be, bufs); err != nil {
		t.Fatalf("%s: %v", be.Name(), err)
	}
	outs := make([][]float32, len(c.outs))
	for i, o := range c.outs {
		p := make([]byte, 4*bufs[o].Len())
		if err := be.Read(bufs[o], p); err != nil {
			t.Fatalf("%s: read: %v", be.Name(), err)
		}
		outs[i] = bytesF32(p)
	}
	return outs
}

// compare checks got against want element by element, naming the first
// few misses.
func compare(t *testing.T, what string, got, want []float32, tl tol) {
	t.Helper()
	misses := 0
	for i := range want {
		if !tl.ok(got[i], want[i]) {
			if misses++; misses <= 5 {
				t.Errorf("%s[%d] = %g, reference %g (diff %g)", what, i, got[i], want[i], float64(got[i])-float64(want[i]))
			}
		}
	}
	if misses > 5 {
		t.Errorf("%s: %d of %d elements outside %+v", what, misses, len(want), tl)
	}
}

// hostile are inputs at and around every special case of the v2 kernels.
var hostile = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
	1, -1, 0.5, -0.5, 0.624, 0.626, -0.7, 2, 3.5, 1 + 1.0/(1<<20), 1 - 1.0/(1<<20),
	1e-30, -1e-30, 1e-40, -1e-40, 1e-7, 9, 10, 20, 44, 45, 88, 88.7, 89, -87, -88, -100, -104, -110,
	1e20, -1e20, math.MaxFloat32, -math.MaxFloat32,
}

// wide returns n values: hostile first, then normal ones of spread sd and
// values of random sign and magnitude 10^[-38, 38].
func wide(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	copy(v, hostile)
	for i := len(hostile); i < n; i++ {
		if i%2 == 0 {
			v[i] = float32(r.NormFloat64() * sd)
		} else {
			v[i] = float32(math.Copysign(math.Pow(10, 76*r.Float64()-38), r.Float64()-0.5))
		}
	}
	return v
}

// scaledRandom returns n normal values of spread sd.
func scaledRandom(r *rand.Rand, n int, sd float64) []float32 {
	v := randF32(r, n)
	for i := range v {
		v[i] *= float32(sd)
	}
	return v
}

// rowsHostile returns rows×cols values of spread sd with special rows: a
// NaN, an infinity, a row of equal large values, one of huge values
// and one of tiny ones (as many as there are rows).
func rowsHostile(r *rand.Rand, rows, cols int, sd float64) []float32 {
	v := scaledRandom(r, rows*cols, sd)
	special := []func(row []float32){
		func(row []float32) { row[len(row)/2] = float32(math.NaN()) },
		func(row []float32) { row[0] = float32(math.Inf(1)) },
		func(row []float32) {
			for i := range row {
				row[i] = 1e30
			}
		},
		func(row []float32) {
			for i := range row {
				row[i] *= 1e36
			}
		},
		func(row []float32) {
			for i := range row {
				row[i] *= 1e-30
			}
		},
		func(row []float32) { row[len(row)-1] = float32(math.Inf(-1)) },
	}
	for i := 0; i < rows && i < len(special); i++ {
		special[i](v[i*cols : (i+1)*cols])
	}
	return v
}

func randTargets(r *rand.Rand, rows, cols int) []int32 {
	t := make([]int32, rows)
	for i := range t {
		t[i] = int32(r.IntN(cols))
	}
	return t
}

// v2Cases are the table of TestFakeDriver_V2MatchesReference.
func v2Cases() []v2Case {
	r := rand.New(rand.NewPCG(21, 22))
	var cs []v2Case
	unaryTol := map[abi.Op]tol{abi.OpExp: {2e-6, 1e-43}, abi.OpLog: {1e-6, 3e-7}, abi.OpTanh: {2e-6, 0}, abi.OpSqrt: {}}
	for _, op := range []abi.Op{abi.OpExp, abi.OpLog, abi.OpTanh, abi.OpSqrt} {
		const n = 1200
		cs = append(cs, v2Case{
			name: fmt.Sprintf("unary%d", op), bufs: []tensorIn{f32In(wide(r, n, 4)), zerosIn(n)},
			outs: []int{1}, tol: unaryTol[op], split: true,
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.Unary(ctx, op, t[0], t[1])
			},
		})
	}
	for _, s := range [][2]int{{0, 5}, {3, 1}, {7, 5}, {8, 700}} {
		rows, cols := s[0], s[1]
		n := rows * cols
		cs = append(cs, v2Case{
			name: fmt.Sprintf("layernorm%dx%d", rows, cols),
			bufs: []tensorIn{f32In(rowsHostile(r, rows, cols, 3)), f32In(scaledRandom(r, cols, 1)), f32In(scaledRandom(r, cols, 1)), zerosIn(n)},
			outs: []int{3}, tol: scaled(2e-6), split: rows > max(7/cols, 1),
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.LayerNorm(ctx, rows, cols, t[0], t[1], t[2], t[3])
			},
		})
	}
	for _, s := range [][2]int{{0, 5}, {4, 1}, {21, 7}, {257, 257}} {
		rows, cols := s[0], s[1]
		n := rows * cols
		x := rowsHostile(r, rows, cols, 5)
		if rows > 1 && cols > 2 {
			x[cols+2] = float32(math.NaN()) // masked in row 1: must not matter
		}
		cs = append(cs, v2Case{
			name: fmt.Sprintf("softmax_causal%dx%d", rows, cols), bufs: []tensorIn{f32In(x), zerosIn(n)},
			outs: []int{1}, tol: scaled(1e-5), split: rows > max(7/cols, 1),
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.SoftmaxCausal(ctx, rows, cols, t[0], t[1])
			},
		})
	}
	for _, s := range [][2]int{{0, 5}, {4, 1}, {9, 10}, {8, 700}} {
		rows, cols := s[0], s[1]
		n := rows * cols
		x := rowsHostile(r, rows, cols, 3)
		tg := randTargets(r, rows, cols)
		if rows > 6 {
			x[6*cols+int(tg[6])] = float32(math.Inf(-1)) // the target impossible: loss +Inf
		}
		cs = append(cs, v2Case{
			name: fmt.Sprintf("cross_entropy%dx%d", rows, cols),
			bufs: []tensorIn{f32In(x), i32In(tg), zerosIn(rows), zerosIn(n)},
			outs: []int{2, 3}, tol: scaled(1e-5), split: rows > max(7/cols, 1),
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.CrossEntropy(ctx, rows, cols, t[0], t[1], t[2], t[3])
			},
		})
	}
	adam := []tensor.AdamWParams{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decay: 0.01, Step: 1},
		{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Decay: 0.1, Step: 10},
		{LR: 0.5, Beta1: 0, Beta2: 0.5, Eps: 1e-50, Decay: 0, Step: 1000}, // ε below float's range
	}
	for i, p := range adam {
		const n = 700
		w, g, m, v := scaledRandom(r, n, 1), wide(r, n, 0.1), scaledRandom(r, n, 0.01), scaledRandom(r, n, 1e-3)
		for j := range v {
			v[j] *= v[j] // second moments are not negative
		}
		g[3], m[3], v[3] = 0, 0, 0 // no update at all, whatever ε
		cs = append(cs, v2Case{
			name: fmt.Sprintf("adamw%d", i), bufs: []tensorIn{f32In(w), f32In(g), f32In(m), f32In(v)},
			outs: []int{0, 2, 3}, tol: scaled(2e-6), split: true,
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.AdamW(ctx, p, t[0], t[1], t[2], t[3])
			},
		})
	}
	for _, s := range [][2]int{{0, 5}, {5, 0}, {1, 1}, {1, 300}, {300, 1}, {33, 65}, {64, 64}, {70, 40}} {
		rows, cols := s[0], s[1]
		n := rows * cols
		cs = append(cs, v2Case{
			name: fmt.Sprintf("transpose%dx%d", rows, cols), bufs: []tensorIn{f32In(wide(r, n, 1)), zerosIn(n)},
			outs: []int{1}, split: rows > 0 && cols > max(7/max(rows, 1), 1),
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.Transpose(ctx, rows, cols, t[0], t[1])
			},
		})
	}
	for _, s := range [][3]int{{10, 100, 9}, {5, 1, 12}, {4, 3, 0}, {4, 0, 3}} {
		rows, cols, k := s[0], s[1], s[2]
		idx := make([]int32, k)
		for i := range idx {
			idx[i] = int32(r.IntN(rows))
		}
		cs = append(cs, v2Case{
			name: fmt.Sprintf("gather%d_of_%dx%d", k, rows, cols),
			bufs: []tensorIn{f32In(wide(r, rows*cols, 1)), i32In(idx), zerosIn(k * cols)},
			outs: []int{2}, split: k*cols > 7,
			op: func(ctx context.Context, be tensor.Backend, t []tensor.Buffer) error {
				return be.Gather(ctx, rows, cols, t[0], t[1], t[2])
			},
		})
	}
	return cs
}

func TestFakeDriver_V2MatchesReference(t *testing.T) { testV2MatchesReference(t, fakeDriver) }

// testV2MatchesReference runs every ABI v2 kernel and compares it with the
// reference backend, once in single launches and once with chunkElems =
// 7, which splits them into many launches at offsets. On the fake, the
// split pass leaves out the cases above 50,000 elements: the fake runs a
// block row by row with 256 host threads and a barrier per reduction step,
// some 17 ms a causal softmax row.
func testV2MatchesReference(t *testing.T, tg target) {
	b := tg.open(t)
	ref := reference.New(reference.Config{})
	defer func(n int) { chunkElems = n }(chunkElems)
	for _, chunk := range []int{chunkElems, 7} {
		chunkElems = chunk
		for _, c := range v2Cases() {
			if tg.fake && chunk == 7 && c.bufs[0].len() > 50000 {
				continue
			}
			t.Run(fmt.Sprintf("%s/chunk=%d", c.name, chunk), func(t *testing.T) {
				want := c.runOn(t, ref)
				tg.reset()
				got := c.runOn(t, b)
				for i := range got {
					compare(t, fmt.Sprintf("buffer %d", c.outs[i]), got[i], want[i], c.tol)
				}
				launches := callsNamed(tg.calls(t), "cuLaunchKernel")
				for _, l := range launches {
					if l.rc != 0 {
						t.Errorf("launch %s -> %d", l.args, l.rc)
					}
				}
				if tg.fake && chunk == 7 && c.split && len(launches) < 2 {
					t.Errorf("%d launches with chunkElems = 7, want several", len(launches))
				}
			})
		}
	}
}

// TestFakeDriver_V2ChunkOffsets checks where the split launches of the row
// and tiled kernels start.
func TestFakeDriver_V2ChunkOffsets(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	defer func(n int) { chunkElems = n }(chunkElems)
	chunkElems = 10
	x, _ := b.Alloc(abi.F32, 12*4)
	y, _ := b.Alloc(abi.F32, 12*4)
	g, _ := b.Alloc(abi.F32, 4)
	for _, c := range []struct {
		name string
		op   func() error
		want []string
	}{
		// 12 rows of 4 in pieces of 10/4 = 2 rows.
		{"layernorm", func() error { return b.LayerNorm(ctx, 12, 4, x, g, g, y) },
			[]string{"row0=0 rows=2 cols=4", "row0=2 rows=2", "row0=4 rows=2", "row0=6 rows=2", "row0=8 rows=2", "row0=10 rows=2"}},
		{"softmax_causal", func() error { return b.SoftmaxCausal(ctx, 12, 4, x, y) },
			[]string{"row0=0 rows=2 cols=4 causal=1", "row0=2", "row0=4", "row0=6", "row0=8", "row0=10 rows=2"}},
		// 4 rows × 12 columns: bands of 10/4 = 2 input columns.
		{"transpose", func() error { return b.Transpose(ctx, 4, 12, x, y) },
			[]string{"c0=0 nc=2", "c0=2 nc=2", "c0=4 nc=2", "c0=6 nc=2", "c0=8 nc=2", "c0=10 nc=2"}},
	} {
		fakeLib.reset()
		if err := c.op(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		l := callsNamed(fakeCalls(t), "cuLaunchKernel")
		if len(l) != len(c.want) {
			t.Fatalf("%s: %d launches, want %d", c.name, len(l), len(c.want))
		}
		for i, w := range c.want {
			if !strings.Contains(l[i].args, w) {
				t.Errorf("%s launch %d: %s lacks %q", c.name, i, l[i].args, w)
			}
		}
	}
	// Transpose bands are whole 32-column tiles once they are wide enough.
	chunkElems = 100
	big, _ := b.Alloc(abi.F32, 2*100)
	bigT, _ := b.Alloc(abi.F32, 2*100)
	fakeLib.reset()
	if err := b.Transpose(ctx, 2, 100, big, bigT); err != nil {
		t.Fatal(err)
	}
	l := callsNamed(fakeCalls(t), "cuLaunchKernel")
	if len(l) != 4 || !strings.Contains(l[0].args, "c0=0 nc=32") || !strings.Contains(l[3].args, "c0=96 nc=4") {
		t.Errorf("transpose bands %v, want 32, 32, 32, 4 columns", l)
	}
}

func TestFakeDriver_V2OutOfRangeIsNotRead(t *testing.T) { testV2OutOfRangeIsNotRead(t, fakeDriver) }

// testV2OutOfRangeIsNotRead: a gather index out of [0, rows) is an error
// worded as the reference backend's, and nothing runs. Indices written
// from the host are checked without waiting for the device (the gather
// stays queued: nothing is copied back, nothing synchronises); indices an
// op computed on the device are read back first, once. The kernel itself
// never reads through such an index: its row is NaN. Cross-entropy
// targets out of range are an error before anything runs.
func testV2OutOfRangeIsNotRead(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 24))
	const rows, cols = 6, 5
	tv := randF32(r, rows*cols)
	table := upload(t, b, abi.F32, rows*cols, f32bytes(tv))
	ref := reference.New(reference.Config{})
	refTable := upload(t, ref, abi.F32, rows*cols, f32bytes(tv))
	// gather runs ix on b and on the reference: b's error and the
	// reference's, and b's calls to the fake.
	gather := func(idx tensor.Buffer, ix []int32) (err, want error, cs []call) {
		out, _ := b.Alloc(abi.F32, len(ix)*cols)
		defer b.Free(out)
		refOut, _ := ref.Alloc(abi.F32, len(ix)*cols)
		want = ref.Gather(ctx, rows, cols, refTable, upload(t, ref, abi.I32, len(ix), i32bytes(ix)), refOut)
		tg.reset()
		err = b.Gather(ctx, rows, cols, table, idx, out)
		cs = tg.calls(t)
		if err == nil {
			got := bytesF32(download(t, b, out))
			for i, k := range ix {
				if k < 0 || k >= rows {
					return nil, want, cs // accepted: the caller says so
				}
				for c := range cols {
					if got[i*cols+c] != tv[int(k)*cols+c] {
						t.Fatalf("gather row %d (index %d) column %d = %g, want %g", i, k, c, got[i*cols+c], tv[int(k)*cols+c])
					}
				}
			}
		}
		return err, want, cs
	}
	// sameError checks that err is want (the reference's), after each
	// backend's prefix.
	sameError := func(what string, err, want error) {
		t.Helper()
		if err == nil || want == nil || strings.TrimPrefix(err.Error(), "cuda: ") != strings.TrimPrefix(want.Error(), "tensor: ") {
			t.Errorf("%s: %v; the reference: %v", what, err, want)
		}
	}
	for _, bad := range []int32{-1, rows, math.MaxInt32, math.MinInt32} {
		ix := []int32{1, 2, bad, 0, 3}
		err, want, cs := gather(upload(t, b, abi.I32, len(ix), i32bytes(ix)), ix)
		sameError(fmt.Sprintf("gather with index %d", bad), err, want)
		if n := len(callsNamed(cs, "cuLaunchKernel")); n != 0 {
			t.Errorf("gather with index %d: %d kernels launched", bad, n)
		}
	}
	ix := []int32{5, 0, 2, 5}
	idx := upload(t, b, abi.I32, len(ix), i32bytes(ix))
	err, _, cs := gather(idx, ix)
	if err != nil {
		t.Fatal(err)
	}
	if tg.fake && (len(callsNamed(cs, "cuLaunchKernel")) != 1 || len(callsNamed(cs, "cuMemcpyDtoH_v2")) != 0 ||
		len(callsNamed(cs, "cuCtxSynchronize")) != 0) {
		t.Errorf("gather of indices written from the host: %v; want one queued launch", cs)
	}

	// Indices computed on the device (ix + 1): read back, once.
	ones := upload(t, b, abi.I32, len(ix), i32bytes([]int32{1, 1, 1, 1}))
	sum, _ := b.Alloc(abi.I32, len(ix))
	if err := b.Binary(ctx, abi.OpAdd, idx, ones, sum); err != nil {
		t.Fatal(err)
	}
	err, want, cs := gather(sum, []int32{6, 1, 3, 6})
	sameError("gather of computed indices with 6", err, want)
	if tg.fake && (len(callsNamed(cs, "cuLaunchKernel")) != 0 || len(callsNamed(cs, "cuMemcpyDtoH_v2")) != 1) {
		t.Errorf("gather of computed indices out of range: %v; want them read back and no launch", cs)
	}
	if err := b.Binary(ctx, abi.OpAdd, ones, ones, sum); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		err, _, cs := gather(sum, []int32{2, 2, 2, 2})
		if err != nil {
			t.Fatalf("gather of computed indices: %v", err)
		}
		if copies := len(callsNamed(cs, "cuMemcpyDtoH_v2")); tg.fake && copies != 1-i {
			t.Errorf("gather %d of computed indices: %d copies back, want %d", i+1, copies, 1-i)
		}
	}

	// The kernel on its own: an index out of range is not read through.
	bad := []int32{-1, rows, math.MaxInt32, math.MinInt32, 2}
	bi := upload(t, b, abi.I32, len(bad), i32bytes(bad))
	out, _ := b.Alloc(abi.F32, len(bad)*cols)
	xs, err := b.own(table, bi, out)
	if err != nil {
		t.Fatal(err)
	}
	err = b.q.do(ctx, func() error {
		return b.launch(kGather, 1, kernelArgs(xs, 0, len(bad)*cols, []kernelArg{i64Arg(rows), i64Arg(cols)})...)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := bytesF32(download(t, b, out))
	for i, ix := range bad {
		for c := range cols {
			v := got[i*cols+c]
			if ix >= 0 && ix < rows {
				if v != tv[int(ix)*cols+c] {
					t.Errorf("gather row %d (index %d) column %d = %g, want %g", i, ix, c, v, tv[int(ix)*cols+c])
				}
			} else if !math.IsNaN(float64(v)) {
				t.Errorf("gather row %d (index %d) column %d = %g, want NaN", i, ix, c, v)
			}
		}
	}

	// A cross-entropy target out of range is an error, found before any
	// kernel runs (the targets are read back), as on every backend.
	logits := upload(t, b, abi.F32, rows*cols, f32bytes(tv))
	loss, _ := b.Alloc(abi.F32, rows)
	grad, _ := b.Alloc(abi.F32, rows*cols)
	for _, bad := range []int32{-1, cols, math.MaxInt32, math.MinInt32} {
		ts := []int32{1, 2, bad, 0, 3, 4}
		targets := upload(t, b, abi.I32, rows, i32bytes(ts))
		tg.reset()
		err := b.CrossEntropy(ctx, rows, cols, logits, targets, loss, grad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("target %d", bad)) {
			t.Errorf("cross_entropy with a target %d: %v", bad, err)
		}
		if n := len(callsNamed(tg.calls(t), "cuLaunchKernel")); n != 0 {
			t.Errorf("cross_entropy with a target %d: %d kernels launched", bad, n)
		}
	}
	for _, c := range tg.calls(t) {
		if c.rc != 0 {
			t.Errorf("%s %s -> %d", c.name, c.args, c.rc)
		}
	}
}

func TestFakeDriver_V2TransposeInPlace(t *testing.T) { testV2TransposeInPlace(t, fakeDriver) }

// testV2TransposeInPlace: a transpose whose output is its input gives what
// a transpose into another buffer gives, through a scratch buffer copied
// back on the device.
func testV2TransposeInPlace(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(25, 26))
	for _, s := range [][2]int{{1, 1}, {3, 5}, {40, 70}} {
		v := randF32(r, s[0]*s[1])
		x, y := upload(t, b, abi.F32, len(v), f32bytes(v)), upload(t, b, abi.F32, len(v), f32bytes(v))
		out, _ := b.Alloc(abi.F32, len(v))
		if err := b.Transpose(ctx, s[0], s[1], x, out); err != nil {
			t.Fatal(err)
		}
		if err := b.Transpose(ctx, s[0], s[1], y, y); err != nil {
			t.Fatalf("transpose %v in place: %v", s, err)
		}
		if want, got := download(t, b, out), download(t, b, y); string(got) != string(want) {
			t.Errorf("transpose %v in place differs from one into another buffer", s)
		}
	}
}

func TestFakeDriver_V2Refusals(t *testing.T) { testV2Refusals(t, fakeDriver) }

// testV2Refusals: what the v2 ops hand to the reference backend
// (tensor.ErrUnsupported) and what they reject as a caller's mistake,
// without a launch either way (checked on the fake).
func testV2Refusals(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	f4, _ := b.Alloc(abi.F32, 4)
	f4b, _ := b.Alloc(abi.F32, 4)
	f2, _ := b.Alloc(abi.F32, 2)
	i4, _ := b.Alloc(abi.I32, 4)
	i2, _ := b.Alloc(abi.I32, 2)
	i8, _ := b.Alloc(abi.I8, 4)
	p := tensor.GemmParams{M: 2, N: 2, K: 2}
	adam := tensor.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
	for _, c := range []struct {
		name        string
		op          func() error
		unsupported bool
	}{
		{"unary op 7", func() error { return b.Unary(ctx, 7, f4, f4b) }, true},
		{"gemm_batched i8", func() error { return b.GemmBatched(ctx, 1, tensor.GemmParams{M: 2, N: 2, K: 1}, i8, i8, i4) }, true},
		{"gemm_batched C is A", func() error { return b.GemmBatched(ctx, 1, p, f4, f4b, f4) }, true},
		{"gemm_batched C is B", func() error { return b.GemmBatched(ctx, 1, p, f4, f4b, f4b) }, true},
		{"gather into its table", func() error { return b.Gather(ctx, 2, 2, f4, i2, f4) }, true},
		{"layernorm i32", func() error { return b.LayerNorm(ctx, 2, 2, i4, f2, f2, f4) }, true},
		{"gemm_batched short C", func() error { return b.GemmBatched(ctx, 2, p, f4, f4b, f4) }, false},
		{"layernorm short g", func() error { return b.LayerNorm(ctx, 1, 4, f4, f2, f2, f4b) }, false},
		{"layernorm cols 0", func() error { return b.LayerNorm(ctx, 0, 0, f2, f2, f2, f2) }, false},
		{"softmax_causal rows not blocks", func() error { return b.SoftmaxCausal(ctx, 1, 4, f4, f4b) }, false},
		{"cross_entropy short targets", func() error { return b.CrossEntropy(ctx, 2, 2, f4, i4, f2, f4b) }, false},
		{"adamw short m", func() error { return b.AdamW(ctx, adam, f4, f4b, f2, f4) }, false},
		{"transpose negative", func() error { return b.Transpose(ctx, -2, -2, f4, f4b) }, false},
		{"gather short out", func() error { return b.Gather(ctx, 2, 2, f4, i4, f4b) }, false},
	} {
		tg.reset()
		err := c.op()
		if err == nil || errors.Is(err, tensor.ErrUnsupported) != c.unsupported {
			t.Errorf("%s: %v, want unsupported=%v", c.name, err, c.unsupported)
		}
		if n := len(tg.calls(t)); n != 0 {
			t.Errorf("%s: %d driver calls", c.name, n)
		}
	}
}

// fakeNoStrided is the fake built with -DFAKE_NO_STRIDED_BATCHED: a cuBLAS
// without cublasSgemmStridedBatched, as a library of its own with its own
// log.
var fakeNoStrided struct {
	once  sync.Once
	path  string
	err   error
	log   func() string
	reset func()
}

// newFakeNoStrided creates a Backend on fakeNoStrided, closed at the end of
// the test.
func newFakeNoStrided(t *testing.T) *Backend {
	t.Helper()
	path, _ := cudatest.Build(t, "-DFAKE_NO_STRIDED_BATCHED") // skips without a C compiler
	f := &fakeNoStrided
	f.once.Do(func() {
		f.path = path
		h, err := purego.Dlopen(f.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			f.err = err
			return
		}
		purego.RegisterLibFunc(&f.log, h, "fake_log")
		purego.RegisterLibFunc(&f.reset, h, "fake_reset")
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	f.reset()
	b, err := New(Config{Driver: f.path, CUBLAS: f.path})
	if err != nil {
		t.Fatalf("New on the fake driver without strided batches: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if b.blas.sgemmStrided != nil {
		t.Fatal("cublasSgemmStridedBatched bound from a library without it")
	}
	return b
}

func TestFakeDriver_GemmBatched(t *testing.T) { testGemmBatched(t, fakeDriver) }

// testGemmBatched runs batched GEMMs through cublasSgemmStridedBatched
// and, on a cuBLAS without it, through one cublasSgemm_v2 per item,
// checking the products against naiveGemm and (on the fake) how the work
// is split: items grouped up to panelFlops, an item above it in row
// panels.
func testGemmBatched(t *testing.T, tg target) {
	defer func(f float64) { panelFlops = f }(panelFlops)
	libs := []struct {
		name  string
		b     *Backend
		calls func() []call
	}{
		{"strided", tg.open(t), func() []call { return tg.calls(t) }},
		{"per-item", tg.openNoStrided(t), func() []call {
			if !tg.fake {
				return nil
			}
			return parseLog(t, fakeNoStrided.log())
		}},
	}
	cases := []struct {
		batch int
		p     tensor.GemmParams
		items float64 // panelFlops in items' flops
		// calls with the strided library, then per item; and the
		// synchronisations either way: between pieces, and after the last
		// when it completes a panelFlops of queued work
		strided, sgemm, perItem, syncs int
	}{
		{5, tensor.GemmParams{M: 3, N: 4, K: 2}, 2, 2, 1, 5, 2},                                        // groups of 2, 2, 1
		{3, tensor.GemmParams{M: 5, N: 3, K: 4, TransA: true}, 100, 1, 0, 3, 0},                        // one group, queued
		{4, tensor.GemmParams{M: 7, N: 2, K: 3, TransB: true, Accumulate: true}, 1, 0, 4, 4, 4},        // one item a call
		{2, tensor.GemmParams{M: 6, N: 5, K: 3, TransA: true, TransB: true}, 1.0 / 3, 0, 6, 6, 6},      // 2-row panels
		{3, tensor.GemmParams{M: 4, N: 1, K: 13, TransA: true, Accumulate: true}, 1.0 / 2, 0, 6, 6, 6}, // 2-row panels
		{1, tensor.GemmParams{M: 1, N: 1, K: 1}, 100, 0, 1, 1, 0},
	}
	r := rand.New(rand.NewPCG(25, 26))
	for _, lib := range libs {
		b := lib.b
		for _, c := range cases {
			p, nb := c.p, c.batch
			sa, sb, sc := p.M*p.K, p.K*p.N, p.M*p.N
			panelFlops = c.items * p.Flops()
			av, bv, cv := randF32(r, nb*sa), randF32(r, nb*sb), randF32(r, nb*sc)
			a := upload(t, b, abi.F32, len(av), f32bytes(av))
			bm := upload(t, b, abi.F32, len(bv), f32bytes(bv))
			cm := upload(t, b, abi.F32, len(cv), f32bytes(cv))
			before := len(lib.calls())
			if err := b.GemmBatched(context.Background(), nb, p, a, bm, cm); err != nil {
				t.Fatalf("%s %d×%+v: %v", lib.name, nb, p, err)
			}
			calls := lib.calls()[before:]
			got := bytesF32(download(t, b, cm))
			for i := range nb {
				want := naiveGemm(p, av[i*sa:(i+1)*sa], bv[i*sb:(i+1)*sb], cv[i*sc:(i+1)*sc])
				compare(t, fmt.Sprintf("%s %d×%+v: item %d", lib.name, nb, p, i), got[i*sc:(i+1)*sc], want, scaled(1e-5))
			}
			strided, sgemm := callsNamed(calls, "cublasSgemmStridedBatched"), callsNamed(calls, "cublasSgemm_v2")
			wantStrided, wantSgemm := c.strided, c.sgemm
			if lib.b.blas.sgemmStrided == nil {
				wantStrided, wantSgemm = 0, c.perItem
			}
			if tg.fake && (len(strided) != wantStrided || len(sgemm) != wantSgemm || len(callsNamed(calls, "cuCtxSynchronize")) != c.syncs) {
				t.Errorf("%s %d×%+v: %d strided, %d sgemm calls, %d synchronisations; want %d, %d, %d",
					lib.name, nb, p, len(strided), len(sgemm), len(callsNamed(calls, "cuCtxSynchronize")), wantStrided, wantSgemm, c.syncs)
			}
			// cuBLAS's A is our B: its strides are K·N, then M·K, then M·N.
			for _, s := range strided {
				for _, w := range []string{fmt.Sprintf("strideA=%d ", sb), fmt.Sprintf("strideB=%d ", sa), fmt.Sprintf("strideC=%d ", sc)} {
					if !strings.Contains(s.args, w) {
						t.Errorf("%s: %s lacks %q", lib.name, s.args, w)
					}
				}
			}
		}
	}
}

func TestFakeDriver_GemmBatchedEdges(t *testing.T) { testGemmBatchedEdges(t, fakeDriver) }

// testGemmBatchedEdges: K = 0, a cancelled context between pieces (the
// items before it computed, those after it untouched), and on the fake a
// failing cublasSgemmStridedBatched.
func testGemmBatchedEdges(t *testing.T, tg target) {
	b := tg.open(t)
	defer func(f float64) { panelFlops = f }(panelFlops)
	ctx := context.Background()
	empty, _ := b.Alloc(abi.F32, 0)
	c := upload(t, b, abi.F32, 6, f32bytes([]float32{1, 2, 3, 4, 5, 6}))
	if err := b.GemmBatched(ctx, 3, tensor.GemmParams{M: 1, N: 2, Accumulate: true}, empty, empty, c); err != nil {
		t.Fatal(err)
	}
	if got := bytesF32(download(t, b, c)); got[5] != 6 {
		t.Errorf("accumulating empty products changed C: %v", got)
	}
	if err := b.GemmBatched(ctx, 3, tensor.GemmParams{M: 1, N: 2}, empty, empty, c); err != nil {
		t.Fatal(err)
	}
	for _, v := range bytesF32(download(t, b, c)) {
		if v != 0 {
			t.Fatalf("C = empty products should be zero, got %v", v)
		}
	}

	p := tensor.GemmParams{M: 2, N: 2, K: 2}
	panelFlops = p.Flops() // one item a piece
	ones, minus := make([]float32, 6*4), make([]float32, 6*4)
	for i := range ones {
		ones[i], minus[i] = 1, -1
	}
	a := upload(t, b, abi.F32, 6*4, f32bytes(ones))
	bm := upload(t, b, abi.F32, 6*4, f32bytes(ones))
	cm := upload(t, b, abi.F32, 6*4, f32bytes(minus))
	tg.reset()
	// One check before queueing, then one per piece: cancel after 3 pieces.
	if err := b.GemmBatched(&stopAfter{Context: ctx, n: 4}, 6, p, a, bm, cm); !errors.Is(err, context.Canceled) {
		t.Fatalf("GemmBatched: %v, want context.Canceled", err)
	}
	if n := len(callsNamed(tg.calls(t), "cublasSgemm_v2")); tg.fake && n != 3 {
		t.Errorf("%d pieces ran before cancellation, want 3", n)
	}
	for i, v := range bytesF32(download(t, b, cm)) {
		if want := map[bool]float32{true: float32(p.K), false: -1}[i < 3*4]; v != want {
			t.Fatalf("C[%d] (item %d) = %v after cancelling after 3 items, want %v", i, i/4, v, want)
		}
	}
	if !tg.fake {
		return
	}

	panelFlops = 1e12
	fakeLib.reset()
	fakeLib.fail(symSgemmStrided, 14)
	err := b.GemmBatched(ctx, 6, p, a, bm, cm)
	var e *Error
	if !errors.As(err, &e) || e.Call != symSgemmStrided || e.Name != "CUBLAS_STATUS_INTERNAL_ERROR" || errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("failing %s: %v", symSgemmStrided, err)
	}
}
