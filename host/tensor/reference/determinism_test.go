package reference

import (
	"fmt"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// threadCounts are the thread counts whose results must be identical.
var threadCounts = []int{1, 2, 3, 7}

// gemmShapes are M×N×K shapes from 1 to 300: odd sizes, sizes either side
// of the 2×4 register tile, and sizes over the blocking sizes gemmNC and
// gemmKC.
var gemmShapes = [][3]int{
	{1, 1, 1}, {1, 300, 7}, {3, 5, 7}, {17, 1, 33}, {31, 29, 1}, {63, 65, 64},
	{127, 129, 131}, {255, 17, 299}, {299, 131, 3}, {257, 255, 259}, {300, 300, 300},
}

// TestGemmF32Deterministic computes every shape with every flag combination
// on 1, 2, 3 and 7 threads and requires identical bytes, equal to the
// specification naiveGemmF32.
func TestGemmF32Deterministic(t *testing.T) {
	r := &rng{s: 42}
	for _, s := range gemmShapes {
		for _, p := range allFlags(s[0], s[1], s[2]) {
			a, b, c0 := r.f32s(p.M*p.K), r.f32s(p.K*p.N), r.f32s(p.M*p.N)
			want := append([]float32(nil), c0...)
			naiveGemmF32(p, a, b, want)
			wantHash := hash(t, f32Buf(want...))
			for _, threads := range threadCounts {
				c := append([]float32(nil), c0...)
				if err := New(Config{Threads: threads}).Gemm(bg, p, f32Buf(a...), f32Buf(b...), f32Buf(c...)); err != nil {
					t.Fatal(err)
				}
				if got := hash(t, f32Buf(c...)); got != wantHash {
					t.Fatalf("%+v on %d threads: digest %.16s…, want %.16s… (naive loop)", p, threads, got, wantHash)
				}
			}
		}
	}
}

// TestGemmI8MatchesNaive checks the I8 GEMM against an int64 loop, on every
// thread count and flag combination.
func TestGemmI8MatchesNaive(t *testing.T) {
	r := &rng{s: 43}
	for _, s := range gemmShapes {
		for _, p := range allFlags(s[0], s[1], s[2]) {
			a, b, c0 := r.i8s(p.M*p.K), r.i8s(p.K*p.N), r.i32s(p.M*p.N)
			want := append([]int32(nil), c0...)
			naiveGemmI8(p, a, b, want)
			for _, threads := range threadCounts {
				c := append([]int32(nil), c0...)
				if err := New(Config{Threads: threads}).Gemm(bg, p, i8Buf(a...), i8Buf(b...), i32Buf(c...)); err != nil {
					t.Fatal(err)
				}
				if !equal(c, want) {
					t.Fatalf("%+v on %d threads differs from the int64 loop", p, threads)
				}
			}
		}
	}
}

// sprinkle overwrites some elements of x with special values: NaNs with
// odd payloads, ±Inf, ±0.
func sprinkle(r *rng, x []float32) {
	specials := []float32{nanWithBits(0x7F800123), nanWithBits(0xFFC00000), inf, negInf, 0, negZero}
	for range len(x) / 100 {
		x[r.next()%uint64(len(x))] = specials[r.next()%uint64(len(specials))]
	}
}

// TestRowOpsDeterministic runs softmax, the reductions and the elementwise
// ops on inputs big enough to be split into many blocks, with special values
// mixed in, and requires identical bytes on every thread count.
func TestRowOpsDeterministic(t *testing.T) {
	r := &rng{s: 44}
	const rows, cols = 997, 301
	x := r.f32s(rows * cols)
	sprinkle(r, x)
	for i := range cols / 3 { // a masked stretch of one row
		x[5*cols+i] = negInf
	}
	b := r.f32s(cols)

	ops := map[string]func(be *Backend) ([]float32, error){
		"softmax": func(be *Backend) ([]float32, error) {
			out := make([]float32, rows*cols)
			return out, be.Softmax(bg, rows, cols, f32Buf(x...), f32Buf(out...))
		},
		"gelu": func(be *Backend) ([]float32, error) {
			out := make([]float32, rows*cols)
			return out, be.Unary(bg, abi.OpGELU, f32Buf(x...), f32Buf(out...))
		},
		"relu": func(be *Backend) ([]float32, error) {
			out := make([]float32, rows*cols)
			return out, be.Unary(bg, abi.OpReLU, f32Buf(x...), f32Buf(out...))
		},
		"div": func(be *Backend) ([]float32, error) {
			out := make([]float32, rows*cols)
			return out, be.Binary(bg, abi.OpDiv, f32Buf(x...), f32Buf(b...), f32Buf(out...))
		},
	}
	for _, op := range []abi.Op{abi.OpSum, abi.OpMax, abi.OpMean} {
		ops[fmt.Sprint("reduce ", op)] = func(be *Backend) ([]float32, error) {
			out := make([]float32, rows)
			return out, be.Reduce(bg, op, rows, cols, f32Buf(x...), f32Buf(out...))
		}
	}
	for name, run := range ops {
		var first string
		for _, threads := range threadCounts {
			out, err := run(New(Config{Threads: threads}))
			if err != nil {
				t.Fatal(err)
			}
			checkCanonical(t, name, out)
			if h := hash(t, f32Buf(out...)); first == "" {
				first = h
			} else if h != first {
				t.Errorf("%s on %d threads: digest %.16s…, on 1 thread %.16s…", name, threads, h, first)
			}
		}
	}
}

// TestGolden pins the SHA-256 of the outputs of every op for fixed inputs.
//
// These digests are the cross-machine contract of ModeExact: they must hold,
// unchanged, on every architecture (amd64 with any GOAMD64 level, arm64,
// ppc64le, s390x, riscv64, …), on every Go version and for every thread count.
// If one fails, results changed — a fused multiply-add slipped in, a sum's
// order changed, exp changed, a NaN is not canonical — and replicas on
// different machines would no longer agree. Never update a digest to make the
// test pass unless the change of results is deliberate, in which case every
// provider must upgrade together.
//
// The inputs come from splitmix64 through exact integer-to-float steps, so
// they too are the same everywhere.
func TestGolden(t *testing.T) {
	golden := []struct {
		name string
		want string
		run  func(r *rng, be *Backend) []*tensor.HostBuffer
	}{
		{"gemm f32", "d0f345a371699b5b41c07ee78a28e400b069e8dc4dd1043340b55b85daf51e22", func(r *rng, be *Backend) []*tensor.HostBuffer {
			var outs []*tensor.HostBuffer
			for _, p := range append(allFlags(67, 45, 83), tensor.GemmParams{M: 131, N: 257, K: 300}) {
				a, b, c := f32Buf(r.f32s(p.M*p.K)...), f32Buf(r.f32s(p.K*p.N)...), f32Buf(r.f32s(p.M*p.N)...)
				mustOK(t, be.Gemm(bg, p, a, b, c))
				outs = append(outs, c)
			}
			return outs
		}},
		{"gemm i8", "a6a14fc7716cbf23535e9abf5053d7aaaac4ad1a0e0898c54e05dbc332643a9e", func(r *rng, be *Backend) []*tensor.HostBuffer {
			var outs []*tensor.HostBuffer
			for _, p := range allFlags(61, 47, 301) {
				a, b, c := i8Buf(r.i8s(p.M*p.K)...), i8Buf(r.i8s(p.K*p.N)...), i32Buf(r.i32s(p.M*p.N)...)
				mustOK(t, be.Gemm(bg, p, a, b, c))
				outs = append(outs, c)
			}
			return outs
		}},
		{"binary f32", "a9f915679d78bb09dc96588cdea8c58eb95161dc4d72e4bffe575875bcf31036", func(r *rng, be *Backend) []*tensor.HostBuffer {
			var outs []*tensor.HostBuffer
			for _, op := range []abi.Op{abi.OpAdd, abi.OpSub, abi.OpMul, abi.OpDiv} {
				a, b := r.f32s(4096), r.f32s(64)
				sprinkle(r, a)
				out := f32Buf(make([]float32, len(a))...)
				mustOK(t, be.Binary(bg, op, f32Buf(a...), f32Buf(b...), out))
				outs = append(outs, out)
			}
			return outs
		}},
		{"add i32", "addf99f783b117de0f7a7ada7c840cd6f1e84394253051654749102ebd063d67", func(r *rng, be *Backend) []*tensor.HostBuffer {
			out := i32Buf(make([]int32, 4096)...)
			mustOK(t, be.Binary(bg, abi.OpAdd, i32Buf(r.i32s(4096)...), i32Buf(r.i32s(16)...), out))
			return []*tensor.HostBuffer{out}
		}},
		{"relu gelu", "0a4fe00c82138a3d16a7441d670ad61c347caede599a9d71de3a04e77f4b38da", func(r *rng, be *Backend) []*tensor.HostBuffer {
			x := r.f32s(20000)
			sprinkle(r, x)
			for i := range 2000 { // a fine grid over [-12, 12), where GELU bends
				x[i] = float32(i-1000) / (1000.0 / 12)
			}
			relu, gelu := f32Buf(make([]float32, len(x))...), f32Buf(make([]float32, len(x))...)
			mustOK(t, be.Unary(bg, abi.OpReLU, f32Buf(x...), relu))
			mustOK(t, be.Unary(bg, abi.OpGELU, f32Buf(x...), gelu))
			return []*tensor.HostBuffer{relu, gelu}
		}},
		{"softmax", "cc6fa1b5498cc876a21178e32540278264bba23b97cdd8826c8d72ba820c1bf8", func(r *rng, be *Backend) []*tensor.HostBuffer {
			const rows, cols = 33, 77
			x := r.f32s(rows * cols)
			for i := range x {
				x[i] *= 4 // logits in (-64, 64): the exponentials span e^-128 … 1
			}
			sprinkle(r, x)
			for i := range 30 {
				x[2*cols+i] = negInf
			}
			out := f32Buf(make([]float32, len(x))...)
			mustOK(t, be.Softmax(bg, rows, cols, f32Buf(x...), out))
			return []*tensor.HostBuffer{out}
		}},
		{"reduce", "79c42ff935a04a4269b846cff1340fb7a8525561d8651f6640d0912c4dd9f217", func(r *rng, be *Backend) []*tensor.HostBuffer {
			const rows, cols = 29, 1031
			x := r.f32s(rows * cols)
			sprinkle(r, x[:rows*cols/2]) // half the rows stay finite
			var outs []*tensor.HostBuffer
			for _, op := range []abi.Op{abi.OpSum, abi.OpMax, abi.OpMean} {
				out := f32Buf(make([]float32, rows)...)
				mustOK(t, be.Reduce(bg, op, rows, cols, f32Buf(x...), out))
				outs = append(outs, out)
			}
			return outs
		}},
	}
	for i, g := range golden {
		for _, threads := range []int{1, 3} {
			got := hash(t, g.run(&rng{s: uint64(1000 + i)}, New(Config{Threads: threads}))...)
			if got != g.want {
				t.Errorf("%s on %d threads: digest %s, pinned %s", g.name, threads, got, g.want)
			}
		}
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestGoldenSeesFMA shows that the pinned GEMM digest would catch fusion:
// the same products accumulated with fused multiply-adds (emulated with
// math.FMA) give different bits for these inputs.
func TestGoldenSeesFMA(t *testing.T) {
	r := &rng{s: 1000} // TestGolden's "gemm f32" inputs
	p := tensor.GemmParams{M: 67, N: 45, K: 83}
	a, b, c := r.f32s(p.M*p.K), r.f32s(p.K*p.N), r.f32s(p.M*p.N)
	fused := make([]float32, len(c))
	for i := range p.M {
		for j := range p.N {
			var acc float32
			for k := range p.K {
				acc = float32(math.FMA(float64(a[i*p.K+k]), float64(b[k*p.N+j]), float64(acc)))
			}
			fused[i*p.N+j] = acc
		}
	}
	mustOK(t, New(Config{}).Gemm(bg, p, f32Buf(a...), f32Buf(b...), f32Buf(c...)))
	differ := 0
	for i := range c {
		if c[i] != fused[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("fused and unfused GEMM agree: the golden inputs cannot detect FMA")
	}
	t.Logf("%d of %d elements differ under FMA", differ, len(c))
}
