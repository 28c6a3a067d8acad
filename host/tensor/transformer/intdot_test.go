package transformer

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
)

// intTypes are the weight types with integer kernels.
var intTypes = []abi.DType{abi.Q8_0, abi.Q4_0, abi.Q4_K, abi.Q6_K}

// TestMatMulIntClose checks the integer kernels against the dequantized
// float dot product: the only error is x's quantization to int8 (half a
// step, amax/254 of its block, per value) and float rounding, so the difference is
// bounded by Σ|w|·amax/254 plus a little.
func TestMatMulIntClose(t *testing.T) {
	ctx := context.Background()
	for _, dt := range intTypes {
		for _, s := range []struct{ n, k int }{{1, 256}, {7, 512}, {33, 768}} {
			t.Run(fmt.Sprintf("%v/%dx%d", dt, s.n, s.k), func(t *testing.T) {
				r := &rng{s: 11}
				x, w := r.f32s(s.k), r.weights(dt, s.n, s.k, false)
				got := make([]float32, s.n)
				if err := MatMulInt(ctx, 2, 1, s.n, s.k, x, w, got); err != nil {
					t.Fatal(err)
				}
				rb := rowBytes(dt, s.k)
				row := make([]float32, s.k)
				for j := range s.n {
					decode(dt, w.bytes()[j*rb:(j+1)*rb], 0, row)
					var want, bound float64
					bs := actBlockOf(dt)
					for b := 0; b < s.k; b += bs {
						var amax float64
						for _, v := range x[b : b+bs] {
							amax = math.Max(amax, math.Abs(float64(v)))
						}
						for i := b; i < b+bs; i++ {
							want += float64(row[i]) * float64(x[i])
							bound += math.Abs(float64(row[i])) * (amax/254 + 1e-6*math.Abs(float64(x[i])))
						}
					}
					if d := math.Abs(float64(got[j]) - want); d > bound*1.01+1e-6 {
						t.Errorf("row %d: got %g, want %g ± %g (off by %g)", j, got[j], want, bound, d)
					}
				}
			})
		}
	}
}

// TestMatMulIntSameBits checks that every kernel set and thread count
// gives the portable kernels' bits, on random rows, odd row counts and
// edge values: weights of every byte value (-128…127 for Q8_0), zero x
// blocks, x blocks of one huge value, huge weight scales.
func TestMatMulIntSameBits(t *testing.T) {
	ctx := context.Background()
	for _, dt := range intTypes {
		for _, c := range []struct {
			name    string
			t, n, k int
			edit    func(x []float32, w []byte)
		}{
			{"random", 1, 37, 768, nil},
			{"rows3", 3, 5, 512, nil},
			// The multi-row kernels (kernelSet.rows4) take x rows in
			// fours, the rest the one-row kernels: every row count from
			// 1 to 9, odd n, one and three super-blocks.
			{"rows1", 1, 7, 768, nil},
			{"rows2", 2, 13, 256, nil},
			{"rows4", 4, 13, 768, nil},
			{"rows5", 5, 7, 256, nil},
			{"rows6", 6, 3, 768, nil},
			{"rows7", 7, 1, 256, nil},
			{"rows8", 8, 9, 512, nil},
			{"rows9", 9, 17, 768, nil},
			// kernelSet.rows8 takes the fours in pairs: 12 rows are a
			// pair and a four, 17 two pairs and a row.
			{"rows12", 12, 9, 768, nil},
			{"rows17", 17, 5, 512, nil},
			// kernelSet.tile8 takes weight rows in eights (blocks of 8s),
			// the rest of them rows8 and rows4.
			{"tiles", 12, 43, 768, nil},
			// tile16 takes sixteens first: 16 rows, 40 (two and an eight)
			// and 31 (one, an eight and seven) at one, three and eight
			// super-blocks.
			{"tiles16", 8, 16, 256, nil},
			{"tiles40", 4, 40, 768, nil},
			{"tiles31", 9, 31, 2048, nil},
			{"tiles2048", 8, 24, 2048, nil},
			{"hugeX8", 8, 9, 512, func(x []float32, _ []byte) { x[3], x[600], x[7*512+100] = 3e38, -3e38, 3e38 }},
			{"bytes8", 8, 8, 512, func(_ []float32, w []byte) {
				for i := range w {
					w[i] = byte(i * 13)
				}
			}},
			{"zeroX", 1, 9, 256, func(x []float32, _ []byte) { clear(x[:64]) }},
			{"zeroX4", 5, 9, 256, func(x []float32, _ []byte) { clear(x[256+32 : 256+96]) }},
			{"hugeX4", 4, 9, 512, func(x []float32, _ []byte) { x[3], x[600], x[1200] = 3e38, -3e38, 3e38 }},
			{"hugeX", 1, 9, 256, func(x []float32, _ []byte) { x[3], x[100] = 3e38, -3e38 }},
			{"bytes", 1, 8, 512, func(_ []float32, w []byte) {
				for i := range w {
					w[i] = byte(i)
				}
			}},
			{"bytes4", 6, 8, 512, func(_ []float32, w []byte) {
				for i := range w {
					w[i] = byte(i * 7)
				}
			}},
			{"hugeScales", 2, 11, 256, func(_ []float32, w []byte) {
				for o := 0; o+2 <= len(w); o += 34 {
					w[o], w[o+1] = 0xFF, 0x7B // 65504
				}
			}},
			{"hugeScales4", 4, 11, 256, func(_ []float32, w []byte) {
				for o := 0; o+2 <= len(w); o += 34 {
					w[o], w[o+1] = 0xFF, 0x7B
				}
			}},
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				r := &rng{s: 5}
				x, w := r.f32s(c.t*c.k), r.weights(dt, c.n, c.k, false)
				if c.edit != nil {
					c.edit(x, w.Raw)
				}
				want := make([]float32, c.t*c.n)
				if err := intGemm(ctx, goKernels, 1, c.t, c.n, c.k, x, w, want); err != nil {
					t.Fatal(err)
				}
				sets := allKernels()
				for _, ks := range sets {
					if ks.tile16 != nil || ks.tile16Q6 != nil {
						// The kernels tile16 leaves less to.
						c := *ks
						c.name, c.tile16, c.tile16Q6 = ks.name+" without tile16", nil, nil
						sets = append(sets, &c)
					}
					if ks.tile8 != nil || ks.tile8Q6 != nil {
						c := *ks
						c.name, c.tile8, c.tile8Q6, c.tile16, c.tile16Q6 = ks.name+" without tiles", nil, nil, nil, nil
						sets = append(sets, &c)
					}
				}
				for _, ks := range sets {
					for _, threads := range []int{1, 2, 3} {
						got := make([]float32, len(want))
						if err := intGemm(ctx, ks, threads, c.t, c.n, c.k, x, w, got); err != nil {
							t.Fatal(err)
						}
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s, %d threads: out[%d] = %g, want %g (bits %08x, %08x)", ks.name, threads, i, got[i], want[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
							}
						}
					}
				}
			})
		}
	}
}

// TestQuantizeAct checks the activation quantization's edge cases.
func TestQuantizeAct(t *testing.T) {
	for _, c := range []struct {
		name string
		x0   float32 // x[0]; the rest of the block is x0/2, -x0/254
		d    float32
		q    [3]int8
	}{
		{"zero", 0, 0, [3]int8{0, 0, 0}},
		{"one", 127, 1, [3]int8{127, 64, -1}}, // 63.5 rounds away from zero
		{"huge", 3e38, 3e38 / 127, [3]int8{127, 64, -1}},
		{"negative", -127, 1, [3]int8{-127, -64, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float32, actBlock)
			x[0], x[1], x[2] = c.x0, c.x0/2, -c.x0/127
			var a q8Act
			quantizeAct(x, actBlock, &a)
			if a.d[0] != c.d || [3]int8(a.qs[:3]) != c.q {
				t.Errorf("d %g q %v, want %g %v", a.d[0], a.qs[:3], c.d, c.q)
			}
			if want := int32(c.q[0]) + int32(c.q[1]) + int32(c.q[2]); a.sums[0] != want || a.sums[1] != 0 {
				t.Errorf("sums %v, want %d, 0", a.sums, want)
			}
		})
	}
}

// TestQuantizeActKernels checks every kernel set's quantizeAct against the
// portable one on random rows and edge values: halves (rounded away from
// zero) and values a rounding step from them, NaN, ±Inf, subnormals, zero
// blocks, both block sizes.
func TestQuantizeActKernels(t *testing.T) {
	r := &rng{s: 9}
	base := r.f32s(1024)
	edits := map[string]func(x []float32){
		"random": func([]float32) {},
		"halves": func(x []float32) {
			// amax 127 (d 1, id 1): x is its own rounding input.
			x[0] = 127
			for i := 1; i < len(x); i++ {
				h := float32(i%256-128) + 0.5
				switch i % 3 {
				case 1:
					h = math.Nextafter32(h, 0)
				case 2:
					h = math.Nextafter32(h, float32(math.Inf(1)))
				}
				x[i] = max(-127, min(127, h))
			}
		},
		"nan":       func(x []float32) { x[5], x[300] = float32(math.NaN()), float32(math.NaN()) },
		"inf":       func(x []float32) { x[40], x[700] = float32(math.Inf(1)), float32(math.Inf(-1)) },
		"subnormal": func(x []float32) { clear(x[:256]); x[3], x[260] = 1e-44, -1e-40 },
		"zero":      func(x []float32) { clear(x[32:96]) },
		"huge":      func(x []float32) { x[0], x[33] = 3e38, -3.4e38 },
	}
	for name, edit := range edits {
		for _, bs := range []int{32, 256} {
			x := append([]float32(nil), base...)
			edit(x)
			var want q8Act
			quantizeAct(x, bs, &want)
			for _, ks := range allKernels() {
				if ks.quantAct == nil {
					continue
				}
				var got q8Act
				ks.quantAct(x, bs, &got)
				for i := range want.qs {
					if got.qs[i] != want.qs[i] {
						t.Fatalf("%s, %s, blocks of %d: qs[%d] = %d, want %d (x %g)", name, ks.name, bs, i, got.qs[i], want.qs[i], x[i])
					}
				}
				for i := range want.d {
					if math.Float32bits(got.d[i]) != math.Float32bits(want.d[i]) && !(got.d[i] != got.d[i] && want.d[i] != want.d[i]) {
						t.Fatalf("%s, %s, blocks of %d: d[%d] = %g, want %g", name, ks.name, bs, i, got.d[i], want.d[i])
					}
				}
				for i := range want.sums {
					if got.sums[i] != want.sums[i] {
						t.Fatalf("%s, %s, blocks of %d: sums[%d] = %d, want %d", name, ks.name, bs, i, got.sums[i], want.sums[i])
					}
				}
			}
		}
	}
}
