package transformer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/infernet/infernet/abi"
)

// v3Types are the weight types the kernels read as stored; weightTypes
// adds the v4 block types, which matMul dequantizes first.
var (
	v3Types     = []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0}
	weightTypes = append(v3Types[:len(v3Types):len(v3Types)], abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K)
)

// dims are the k of the kernel tests: odd tails, one vector, the sizes of
// small Llamas (stories260K has hidden 172, stories15M dim 288).
var dims = []int{1, 8, 15, 17, 48, 64, 172, 288, 768, 2048}

// fitsType reports whether rows of k elements can be of type dt.
func fitsType(dt abi.DType, k int) bool { return k%dt.Block() == 0 }

// kFor is k, or the least multiple of dt's block above it when rows of k
// elements cannot be of type dt.
func kFor(dt abi.DType, k int) int {
	if fitsType(dt, k) {
		return k
	}
	return (k/dt.Block() + 1) * dt.Block()
}

// TestF16Decode checks every binary16 value against its definition.
func TestF16Decode(t *testing.T) {
	for h := range 1 << 16 {
		got, want := f16(uint16(h)), refF16(uint16(h))
		if math.IsNaN(want) {
			if got == got {
				t.Fatalf("f16(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("f16(%#04x) = %v, want %v", h, got, want)
		}
	}
}

// TestDecode checks decode, from any offset, against the straightforward
// decoders of every weight type.
func TestDecode(t *testing.T) {
	r := &rng{s: 7}
	const n, k = 3, 768
	for _, dt := range weightTypes {
		w := r.weights(dt, n, k, false)
		want := deq(w, n, k)
		raw := w.bytes()
		for row := range n {
			for _, off := range []int{0, 5, 16, 31, 32, 70, 255, 256, 300, 767} {
				got := make([]float32, k-off)
				decode(dt, raw[row*rowBytes(dt, k):], off, got)
				for i, g := range got {
					if float64(g) != want[row*k+off+i] {
						t.Fatalf("%v row %d [%d] = %v, want %v", dt, row, off+i, g, want[row*k+off+i])
					}
				}
			}
		}
	}
}

// TestDotDefinition checks dot against the exact-mode definition written
// out: element i goes to lane i mod 16, then the pairwise lane sum.
func TestDotDefinition(t *testing.T) {
	r := &rng{s: 1}
	for _, k := range append(dims, 0, 31, 33) {
		x, w := r.f32s(k), r.f32s(k)
		var acc [16]float32
		for i := range k {
			acc[i%16] = acc[i%16] + float32(x[i]*w[i])
		}
		for _, s := range []int{8, 4, 2, 1} {
			for i := range s {
				acc[i] = acc[i] + acc[i+s]
			}
		}
		sameBits(t, fmt.Sprintf("k=%d", k), []float32{dot(x, w)}, acc[:1])
	}
	// A sum of -0 products is +0: lanes start at +0.
	neg := []float32{float32(math.Copysign(0, -1)), 1}
	sameBits(t, "-0", []float32{dot(neg[:1], neg[1:])}, []float32{0})
}

// TestKernelsMatchGo runs every kernel set of this machine on every weight
// type and dimension, specials included, against the portable kernels.
func TestKernelsMatchGo(t *testing.T) {
	ctx := context.Background()
	for _, ks := range allKernels() {
		for _, dt := range weightTypes {
			for _, k := range dims {
				if !fitsType(dt, k) {
					continue
				}
				for _, c := range []struct {
					specials bool
					tRows    int // 1: a decode step's kernels (deqGemv); 3, 6, 9: f32Rows (three, four and two, four then two and three)
				}{{false, 1}, {true, 1}, {false, 3}, {true, 3}, {false, 6}, {true, 6}, {false, 9}, {true, 9}} {
					specials, tRows := c.specials, c.tRows
					name := fmt.Sprintf("%s/%v/k=%d/specials=%v/t=%d", ks.name, dt, k, specials, tRows)
					r := &rng{s: uint64(k)*31 + uint64(dt)}
					const n = 13 // blocks of 4 rows and a remainder
					x := r.f32s(tRows * k)
					if specials {
						x[0], x[len(x)-1] = float32(math.Inf(1)), float32(math.Copysign(0, -1))
					}
					w := r.weights(dt, n, k, specials)
					got, want := make([]float32, tRows*n), make([]float32, tRows*n)
					if err := matMul(ctx, ks, 1, tRows, n, k, x, w, got); err != nil {
						t.Fatal(err)
					}
					if err := matMul(ctx, goKernels, 1, tRows, n, k, x, w, want); err != nil {
						t.Fatal(err)
					}
					sameBits(t, name, got, want)
				}
			}
		}
	}
}

// TestKernelsStride checks the kernels on rows further apart than their
// size (attention's rows of one kv head) against the portable kernels,
// four rows at a time and one by one.
func TestKernelsStride(t *testing.T) {
	for _, ks := range allKernels() {
		for _, dt := range v3Types {
			for _, k := range dims {
				if !fitsType(dt, k) {
					continue
				}
				r := &rng{s: uint64(k)}
				const n, gap = 11, 3 // rows, and rows skipped between them
				w := r.weights(dt, n*gap, k, true)
				rb := rowBytes(dt, k)
				x := make([]float32, padLen(k))
				copy(x, r.f32s(k))
				got, want := make([]float32, n), make([]float32, n)
				wb := w.bytes()[rb:] // from row 1: rows 1, 4, 7, …
				goKernels.gemv[dt](want, x, wb, k, gap*rb, 1)
				canonicalize(want)
				for _, group := range []int{1, 4} {
					ks.gemv[dt](got, x, wb, k, gap*rb, group)
					canonicalize(got)
					sameBits(t, fmt.Sprintf("%s/%v/k=%d/group=%d", ks.name, dt, k, group), got, want)
				}
			}
		}
	}
}

// TestF32Rows checks each kernel set's f32Rows (two, three, four, eight or twelve rows
// of x over f32 rows) against one-row calls of the portable gemv, bit for
// bit: every weight-row count up to 9 (groups of four and the rest), rows
// further apart than their size, x rows further apart than k (and x no
// longer than its nx rows), and specials (NaN, ±Inf, -0) in x and the
// weights.
func TestF32Rows(t *testing.T) {
	for _, ks := range allKernels() {
		if ks.f32Rows == nil {
			continue
		}
		for _, nx := range []int{2, 3, 4, 8, 12} {
			for _, k := range []int{16, 48, 768, 2048} {
				for _, specials := range []bool{false, true} {
					for rows := 0; rows <= 9; rows++ {
						r := &rng{s: uint64(k*10+rows+100*nx) + 5}
						const gap, xgap, ldo = 2, 32, 11 // weight rows, x values and out values past each row
						w := r.weights(abi.F32, max(1, rows*gap), k, specials)
						ldx := k + xgap
						x := r.f32s((nx-1)*ldx + k)
						if specials {
							x[1], x[ldx+3], x[(nx-1)*ldx+k-1] = float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1))
						}
						got, want := make([]float32, nx*(rows+ldo)), make([]float32, nx*(rows+ldo))
						for i := range got {
							got[i], want[i] = 7, 7 // untouched past each row's rows, and past x's nx rows
						}
						ks.f32Rows(got, x, w.bytes(), k, rows, gap*4*k, ldx, rows+ldo, nx)
						for i := range nx {
							goKernels.gemv[abi.F32](want[i*(rows+ldo):i*(rows+ldo)+rows], x[i*ldx:i*ldx+k], w.bytes(), k, gap*4*k, 1)
						}
						canonicalize(want) // got's NaNs must be canonical as the kernel stores them
						sameBits(t, fmt.Sprintf("%s/nx=%d/k=%d/rows=%d/specials=%v", ks.name, nx, k, rows, specials), got, want)
					}
				}
			}
		}
	}
}

// TestAxpy checks every kernel set's axpy against the portable one, and
// against one call per row: every chunk width of the AVX2 (32, 8) and
// AVX-512 (64, 16, 8) kernels and their mixes, specials in v.
func TestAxpy(t *testing.T) {
	r := &rng{s: 9}
	for _, ks := range allKernels() {
		for _, n := range []int{0, 1, 7, 8, 9, 16, 24, 31, 32, 33, 64, 65, 72, 88, 100, 128, 200} {
			for _, rows := range []int{0, 1, 2, 5, 17} {
				stride := n + 3
				v := r.f32s(max(0, (rows-1)*stride+n))
				if n > 2 && rows > 0 {
					v[1], v[2] = float32(math.Inf(1)), float32(math.Copysign(0, -1))
					v[len(v)-1] = float32(math.NaN())
				}
				a := r.f32s(rows)
				o := r.f32s(n)
				got, want, one := slices.Clone(o), slices.Clone(o), slices.Clone(o)
				ks.axpy(got, v, a, stride)
				axpyGo(want, v, a, stride)
				name := fmt.Sprintf("%s/n=%d/rows=%d", ks.name, n, rows)
				sameBits(t, name, got, want)
				for t := range rows {
					ks.axpy(one, v[t*stride:], a[t:t+1], 0)
				}
				sameBits(t, name+"/row by row", one, want)
			}
		}
	}
}

// TestMatMulInvariance checks that t rows in one call equal t calls of one
// row, on any number of threads, bit for bit.
func TestMatMulInvariance(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 3}
	const rows, n = 5, 301
	for _, dt := range weightTypes {
		k := kFor(dt, 288)
		x, w := r.f32s(rows*k), r.weights(dt, n, k, false)
		want := make([]float32, rows*n)
		for i := range rows {
			if err := MatMul(ctx, 1, 1, n, k, x[i*k:(i+1)*k], w, want[i*n:(i+1)*n]); err != nil {
				t.Fatal(err)
			}
		}
		for _, threads := range []int{1, 2, 3, 8} {
			got := make([]float32, rows*n)
			if err := MatMul(ctx, threads, rows, n, k, x, w, got); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("%v threads=%d", dt, threads), got, want)
		}
	}
}

// TestMatMulFloat64 compares MatMul with a float64 textbook product.
func TestMatMulFloat64(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 5}
	for _, dt := range weightTypes {
		for _, c := range []struct{ t, n, k int }{{1, 7, 64}, {4, 33, 768}, {2, 5, 2048}} {
			if !fitsType(dt, c.k) {
				continue
			}
			x, w := r.f32s(c.t*c.k), r.weights(dt, c.n, c.k, false)
			wf := deq(w, c.n, c.k)
			got := make([]float32, c.t*c.n)
			if err := MatMul(ctx, 2, c.t, c.n, c.k, x, w, got); err != nil {
				t.Fatal(err)
			}
			want := make([]float64, c.t*c.n)
			for i := range c.t {
				for j := range c.n {
					for l := range c.k {
						want[i*c.n+j] += float64(x[i*c.k+l]) * wf[j*c.k+l]
					}
				}
			}
			near(t, fmt.Sprintf("%v %+v", dt, c), got, want, 1e-5*math.Sqrt(float64(c.k)))
		}
	}
}

// TestMatMulErrors checks that mis-sized buffers are refused, never read
// past.
// TestCanonicalize checks canonicalize (on amd64 the assembly, 32 floats
// at a time) against canonicalizeGo, bit for bit, for every length to 100
// at two offsets and NaNs of every kind (quiet, signaling, negative) among
// infinities, zeros and other values.
func TestCanonicalize(t *testing.T) {
	special := []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff, 0x7f800000, 0xff800000, 0x80000000, 0, 0x3f800000, 0x00000001}
	r := &rng{s: 9}
	for n := range 101 {
		for _, off := range []int{0, 3} {
			for _, density := range []int{1, 5, 1000} {
				buf := make([]float32, n+off+2)
				for i := range buf {
					buf[i] = r.f32()
					if int(r.next()%uint64(density)) == 0 {
						buf[i] = math.Float32frombits(special[r.next()%uint64(len(special))])
					}
				}
				want := slices.Clone(buf)
				canonicalizeGo(want[off : off+n])
				got := slices.Clone(buf)
				canonicalize(got[off : off+n])
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n %d, offset %d, density %d: [%d] = %08x, want %08x", n, off, density, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
				for i, v := range want[off : off+n] {
					if v != v && math.Float32bits(v) != abi.CanonicalNaN32 {
						t.Fatalf("canonicalizeGo left %08x at %d", math.Float32bits(v), i)
					}
				}
			}
		}
	}
}

func TestMatMulErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		t, n, k int
		x, out  int
		w       Weights
	}{
		{"short x", 1, 2, 4, 3, 2, F32Weights(make([]float32, 8))},
		{"short out", 1, 2, 4, 4, 1, F32Weights(make([]float32, 8))},
		{"short w", 1, 2, 4, 4, 2, F32Weights(make([]float32, 7))},
		{"q8 k", 1, 1, 16, 16, 1, Weights{Type: abi.Q8_0, Raw: make([]byte, 17)}},
		{"q4_k k", 1, 1, 128, 128, 1, Weights{Type: abi.Q4_K, Raw: make([]byte, 72)}},
		{"q4_0 bytes", 1, 1, 32, 32, 1, Weights{Type: abi.Q4_0, Raw: make([]byte, 17)}},
		{"q6_k bytes", 1, 2, 256, 256, 2, Weights{Type: abi.Q6_K, Raw: make([]byte, 211)}},
		{"unknown", 1, 1, 32, 32, 1, Weights{Type: abi.Q6_K + 1, Raw: make([]byte, 32)}},
		{"f16 bytes", 1, 1, 4, 4, 1, Weights{Type: abi.F16, Raw: make([]byte, 7)}},
		{"i8", 1, 1, 4, 4, 1, Weights{Type: abi.I8, Raw: make([]byte, 4)}},
	} {
		if err := MatMul(ctx, 1, c.t, c.n, c.k, make([]float32, c.x), c.w, make([]float32, c.out)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestMatMulCanceled checks that a canceled context stops MatMul.
func TestMatMulCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := MatMul(ctx, 2, 1, 4, 4, make([]float32, 4), F32Weights(make([]float32, 16)), make([]float32, 4))
	if err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
}

// TestQ8Block checks one hand-made block: d = 0.5, q = -128, 0, 1, 127.
func TestQ8Block(t *testing.T) {
	raw := make([]byte, 34)
	binary.LittleEndian.PutUint16(raw, 0x3800) // 0.5
	raw[2], raw[3], raw[4], raw[5] = 0x80, 0, 1, 127
	got := make([]float32, 4)
	decode(abi.Q8_0, raw, 0, got)
	sameBits(t, "q8_0", got, []float32{-64, 0, 0.5, 63.5})
}

// TestQ8RowsMatchGemv checks the multi-row q8_0 path (matMulQ8Rows) of
// every kernel set that has one, for 2 to 19 rows of x (whole groups of
// maxXRows and remainders), against one-row calls of the portable
// kernels, specials included, bit for bit.
func TestQ8RowsMatchGemv(t *testing.T) {
	ctx := context.Background()
	for _, ks := range allKernels() {
		if ks.q8Rows == nil {
			continue
		}
		for _, k := range []int{32, 96, 768} {
			for _, tRows := range []int{2, 3, 7, 8, 9, 16, 19} {
				for _, specials := range []bool{false, true} {
					r := &rng{s: uint64(k*tRows) + 7}
					const n = 37
					x, w := r.f32s(tRows*k), r.weights(abi.Q8_0, n, k, specials)
					if specials {
						x[1], x[len(x)-2] = float32(math.Inf(-1)), float32(math.NaN())
					}
					got, want := make([]float32, tRows*n), make([]float32, tRows*n)
					for threads := 1; threads <= 2; threads++ {
						if err := matMul(ctx, ks, threads, tRows, n, k, x, w, got); err != nil {
							t.Fatal(err)
						}
						for i := range tRows {
							if err := matMul(ctx, goKernels, 1, 1, n, k, x[i*k:(i+1)*k], w, want[i*n:(i+1)*n]); err != nil {
								t.Fatal(err)
							}
						}
						sameBits(t, fmt.Sprintf("%s/k=%d/t=%d/specials=%v/threads=%d", ks.name, k, tRows, specials, threads), got, want)
					}
				}
			}
		}
	}
}

// TestFMA32 checks fma32 against x·y + z computed exactly and rounded once
// to float32 (math/big), on random operands and on the cases where
// rounding twice would go wrong: a sum just beside a float32 rounding
// midpoint, cancellation, subnormal results, zeros, infinities and NaN.
func TestFMA32(t *testing.T) {
	r := &rng{s: 11}
	type c struct{ x, y, z float32 }
	cases := []c{
		{0, 0, 0}, {1, 1, -1}, {float32(math.Copysign(0, -1)), 1, 0}, {-1, 1, 1},
		{3e38, 3e38, -3e38}, {float32(math.Inf(1)), 0, 1}, {float32(math.Inf(1)), 1, float32(math.Inf(-1))},
		{float32(math.NaN()), 1, 1}, {1e-30, 1e-20, 0}, {1e-23, 1e-23, 1e-45},
		// 1 + 2^-24 + 2^-60: above the midpoint between 1 and 1+2^-23 by
		// less than float64 keeps; rounded to float64 first, it would
		// land on the midpoint and round to even (1).
		{1 + 0x1p-23, 1 + 0x1p-23, -(0x1p-23 + 0x1p-46) + 0x1p-24 + 0x1p-60},
	}
	for range 200000 {
		x, y := r.f32(), r.f32()
		z := -float32(float64(x) * float64(y)) // cancellation near the product
		switch r.next() % 4 {
		case 0:
			z = r.f32()
		case 1:
			z = math.Float32frombits(math.Float32bits(z) ^ uint32(r.next()%8))
		case 2:
			z = float32(math.Ldexp(float64(r.f32()), -30))
		}
		cases = append(cases, c{x, y, z})
	}
	// Products whose exact sum with z sits right beside a float32 midpoint.
	for range 20000 {
		x, y := r.f32(), r.f32()
		p := float64(x) * float64(y)
		f := float32(p)
		ulp := float64(math.Nextafter32(f, float32(math.Inf(1)))) - float64(f)
		mid := float64(f) + ulp/2
		z := float32(mid - p)
		cases = append(cases, c{x, y, z}, c{x, y, math.Nextafter32(z, 0)}, c{x, y, math.Nextafter32(z, float32(math.Inf(1)))})
	}
	for _, c := range cases {
		got := fma32(c.x, c.y, c.z)
		want := exactFMA32(c.x, c.y, c.z)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%08x), want %g (%08x)", c.x, c.y, c.z, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// exactFMA32 is x·y + z rounded once to float32, by math/big.
func exactFMA32(x, y, z float32) float32 {
	fx, fy, fz := float64(x), float64(y), float64(z)
	if math.IsInf(fx, 0) || math.IsInf(fy, 0) || math.IsInf(fz, 0) || fx != fx || fy != fy || fz != fz {
		return float32(fx*fy + fz) // IEEE's rules for the specials, no rounding involved
	}
	p := new(big.Float).SetPrec(200).Mul(new(big.Float).SetFloat64(fx), new(big.Float).SetFloat64(fy))
	s := new(big.Float).SetPrec(200).Add(p, new(big.Float).SetFloat64(fz))
	if s.Sign() == 0 {
		// An exact zero sum is +0, or -0 when both addends are -0.
		return float32(fx*fy + fz)
	}
	f, _ := s.Float32()
	return f
}

// TestQ8FusedSameBits checks tolerance mode's q8_0 matmul (MatMulInt:
// every kernel set's fused gemv and multi-row kernels) against the
// portable fused dot product, one row of x at a time, bit for bit: for
// 1 to 19 rows of x (whole groups of maxXRows and remainders), 1 and 2
// threads, specials included. A row's bits do not depend on the rows
// beside it, which batching across jobs needs.
func TestQ8FusedSameBits(t *testing.T) {
	ctx := context.Background()
	for _, ks := range allKernels() {
		for _, k := range []int{32, 96, 768} {
			for _, tRows := range []int{1, 2, 3, 7, 8, 9, 16, 19} {
				for _, specials := range []bool{false, true} {
					r := &rng{s: uint64(k*tRows) + 9}
					const n = 37
					x, w := r.f32s(tRows*k), r.weights(abi.Q8_0, n, k, specials)
					if specials {
						x[1], x[len(x)-2] = float32(math.Inf(-1)), float32(math.NaN())
					}
					want := make([]float32, tRows*n)
					for i := range tRows {
						for j := range n {
							rb := rowBytes(abi.Q8_0, k)
							want[i*n+j] = dotQ8Fused(x[i*k:(i+1)*k], w.Raw[j*rb:(j+1)*rb])
						}
						canonicalize(want[i*n : (i+1)*n])
					}
					for threads := 1; threads <= 2; threads++ {
						got := make([]float32, tRows*n)
						if err := matMulInt(ctx, ks, threads, tRows, n, k, x, w, got); err != nil {
							t.Fatal(err)
						}
						sameBits(t, fmt.Sprintf("%s/k=%d/t=%d/specials=%v/threads=%d", ks.name, k, tRows, specials, threads), got, want)
					}
				}
			}
		}
	}
}
