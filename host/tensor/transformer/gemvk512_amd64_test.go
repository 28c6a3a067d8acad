//go:build amd64 && !purego

package transformer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"golang.org/x/sys/cpu"
)

// TestDeqGemvAVX512 checks the AVX-512 fused K-quant GEMVs against
// dequantizing each row (decode) and the portable f32 dot product, bit
// for bit, for every row count up to 9 (groups of four and the rest),
// rows further apart than their size, and specials in x and the weights.
func TestDeqGemvAVX512(t *testing.T) {
	if !cpu.X86.HasAVX512F || !hasAVX2 {
		t.Skip("no AVX-512")
	}
	for _, dt := range []abi.DType{abi.Q4_K, abi.Q6_K} {
		gemv := deqGemvAVX512(dt)
		for _, k := range []int{256, 768, 2048} {
			for _, specials := range []bool{false, true} {
				for rows := 0; rows <= 9; rows++ {
					r := &rng{s: uint64(k*10+rows) + uint64(dt)}
					const gap = 2
					w := r.weights(dt, max(1, rows*gap), k, specials)
					rb := rowBytes(dt, k)
					x := r.f32s(k)
					if specials {
						x[3], x[k-1] = float32(posInf), float32(negZero)
					}
					want, got := make([]float32, rows), make([]float32, rows)
					row := make([]float32, k)
					for j := range rows {
						decode(dt, w.Raw[j*gap*rb:j*gap*rb+rb], 0, row)
						want[j] = dot(x, row)
					}
					gemv(got, x, w.Raw, k, gap*rb, 1)
					canonicalize(got)
					canonicalize(want)
					sameBits(t, fmt.Sprintf("%v/k=%d/rows=%d/specials=%v", dt, k, rows, specials), got, want)
				}
			}
		}
	}
}

var posInf, negZero = func() (float32, float32) {
	var z float32
	return 1 / z, -z
}()

// TestDeqGemvAB times the AVX2 and AVX-512 fused K-quant GEMVs against each
// other, interleaved, on one thread (INFERNET_AB=1; a shared machine's
// noise falls on both alike): the minimum and median of many rounds.
func TestDeqGemvAB(t *testing.T) {
	if os.Getenv("INFERNET_AB") == "" || !cpu.X86.HasAVX512F {
		t.Skip("INFERNET_AB unset")
	}
	for _, dt := range []abi.DType{abi.Q4_K, abi.Q6_K} {
		for _, s := range gemvShapes {
			r := &rng{s: 1}
			x, w := r.f32s(s.k), r.weights(dt, s.n, s.k, false)
			out := make([]float32, s.n)
			fs := []gemvFunc{deqGemvAVX2(dt), deqGemvAVX512(dt)}
			var ts [2][]time.Duration
			rb := rowBytes(dt, s.k)
			reps := max(1, 4<<20/len(w.Raw))
			for range 30 {
				for i, f := range fs {
					t0 := time.Now()
					for range reps {
						f(out, x, w.Raw, s.k, rb, 1)
					}
					ts[i] = append(ts[i], time.Since(t0)/time.Duration(reps))
				}
			}
			for i := range ts {
				sort.Slice(ts[i], func(a, b int) bool { return ts[i][a] < ts[i][b] })
			}
			t.Logf("%v %dx%d: avx2 min %v med %v (%.1f GB/s), avx512 min %v med %v (%.1f GB/s): min ratio %.2fx, median %.2fx",
				dt, s.n, s.k, ts[0][0], ts[0][15], float64(len(w.Raw))/float64(ts[0][0].Nanoseconds()),
				ts[1][0], ts[1][15], float64(len(w.Raw))/float64(ts[1][0].Nanoseconds()),
				float64(ts[0][0])/float64(ts[1][0]), float64(ts[0][15])/float64(ts[1][15]))
		}
	}
}

// TestRepackTiles checks each assembly repacking of eight or sixteen
// Q4_K or Q6_K rows (kernelSet.repackT8, repackT16, repackT8Q6,
// repackT16Q6) against its Go repacking, byte for byte, for rows further
// apart than their size and weights of every byte value. In a Q6_K tile
// (of 8 rows, 2816 bytes of weights and then the scales d) a d that is a
// signaling NaN comes back quiet (VCVTPH2PS): a NaN all the same, whose
// results are NaN, made canonical.
func TestRepackTiles(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512VL || !cpu.X86.HasAVX512BW || !hasAVX2 {
		t.Skip("no AVX-512 VL and BW")
	}
	type repack func(t, w []byte, rb, nsb int)
	for _, tc := range []struct {
		name          string
		typ           abi.DType
		rows, size    int // rows repacked, and a tile's bytes per 256 values
		goRef, asm    repack
		weightsBefore int // bytes of a tile before its d, where NaNs may be quieted (0: none)
	}{
		{"Q4_K 8 rows", abi.Q4_K, 8, q4KT8Bytes, repackQ4KT8, repackQ4KT8Asm, 0},
		{"Q4_K 16 rows", abi.Q4_K, 16, 2 * q4KT8Bytes, repackQ4KT16, repackQ4KT16Asm, 0},
		{"Q6_K 8 rows", abi.Q6_K, 8, q6KT8Bytes, repackQ6KT8, repackQ6KT8Asm, 2816},
		{"Q6_K 16 rows", abi.Q6_K, 16, 2 * q6KT8Bytes, repackQ6KT16, repackQ6KT16Asm, 2 * 2816},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []int{256, 768, 2048} {
				for _, bytes := range []bool{false, true} {
					r := &rng{s: uint64(k)}
					w := r.weights(tc.typ, tc.rows+1, k, false)
					if bytes {
						for i := range w.Raw {
							w.Raw[i] = byte(i * 11)
						}
					}
					rb, nsb := rowBytes(tc.typ, k), k/256
					want, got := make([]byte, nsb*tc.size), make([]byte, nsb*tc.size)
					for _, c := range []struct{ off, rb, nsb int }{{0, rb, nsb}, {rb, rb, nsb}, {0, rb, 1}} {
						tc.goRef(want, w.bytes()[c.off:], c.rb, c.nsb)
						clear(got)
						tc.asm(got, w.bytes()[c.off:], c.rb, c.nsb)
						for i := range c.nsb * tc.size {
							if tc.weightsBefore > 0 && i%tc.size >= tc.weightsBefore {
								j := i &^ 3 // the float's first byte
								g := math.Float32frombits(binary.LittleEndian.Uint32(got[j:]))
								w := math.Float32frombits(binary.LittleEndian.Uint32(want[j:]))
								if g != g && w != w {
									continue
								}
							}
							if got[i] != want[i] {
								t.Fatalf("k %d, bytes %v, %+v: byte %d = %d, want %d", k, bytes, c, i, got[i], want[i])
							}
						}
					}
				}
			}
		})
	}
}

// TestPromptAB times a prompt's matmuls (64 and 35 rows of x, as the
// runner's prefill batches them, by the 110M shape's weights) with the
// best kernels against the same kernels without the prompt kernels added
// since (tile16, tolerance mode's Q4_K, and tile8Q6 and tile16Q6, its
// Q6_K; in exact mode the AVX2 row dequantizers, and x's last two or three
// rows one by one rather than with f32Rows), interleaved, on one thread
// (INFERNET_AB=1): the minimum and median of many rounds, and their
// ratios.
func TestPromptAB(t *testing.T) {
	if os.Getenv("INFERNET_AB") == "" {
		t.Skip("INFERNET_AB unset")
	}
	ctx := context.Background()
	const rounds = 41
	best := bestKernels()
	old := *best
	old.tile8Q6, old.tile16, old.tile16Q6 = nil, nil, nil
	old.dequantRow = dequantRowAVX2
	if f := best.f32Rows; f != nil {
		old.f32Rows = func(out, x []float32, w []byte, k, rows, stride, ldx, ldo, nx int) {
			if nx == 4 {
				f(out, x, w, k, rows, stride, ldx, ldo, nx)
				return
			}
			for r := range nx {
				old.gemv[abi.F32](out[r*ldo:r*ldo+rows], x[r*ldx:r*ldx+k], w, k, stride, 4)
			}
		}
	}
	sets := []*kernelSet{&old, best}
	for _, c := range []struct {
		mode string
		mm   func(context.Context, *kernelSet, int, int, int, int, []float32, Weights, []float32) error
		dts  []abi.DType
	}{{"exact", matMul, []abi.DType{abi.F32, abi.Q4_K, abi.Q6_K}}, {"tolerance", matMulInt, []abi.DType{abi.Q4_K, abi.Q6_K}}} {
		for _, dt := range c.dts {
			for _, s := range gemvShapes[:3] {
				for _, rows := range []int{64, 35} {
					r := &rng{s: 1}
					x, w := r.f32s(rows*s.k), r.weights(dt, s.n, s.k, false)
					out := make([]float32, rows*s.n)
					var ts [2][]time.Duration
					for range rounds {
						for i, ks := range sets {
							t0 := time.Now()
							if err := c.mm(ctx, ks, 1, rows, s.n, s.k, x, w, out); err != nil {
								t.Fatal(err)
							}
							ts[i] = append(ts[i], time.Since(t0))
						}
					}
					for i := range ts {
						sort.Slice(ts[i], func(a, b int) bool { return ts[i][a] < ts[i][b] })
					}
					t.Logf("%s %v %dx%dx%d: old min %v med %v, new min %v med %v: min ratio %.2fx, median %.2fx",
						c.mode, dt, rows, s.n, s.k, ts[0][0], ts[0][rounds/2], ts[1][0], ts[1][rounds/2],
						float64(ts[0][0])/float64(ts[1][0]), float64(ts[0][rounds/2])/float64(ts[1][rounds/2]))
				}
			}
		}
	}
}

// TestPrefetchAB (INFERNET_AB=1) times a 142-row prompt batch's tolerance
// matmul over the 110M shape's weights, a layer's seven matrices twelve
// times over (85 MB of Q4_K, each read once a pass as a prompt reads
// them), the tile kernels' loop without and with kernelSet.prefetch,
// interleaved.
func TestPrefetchAB(t *testing.T) {
	if os.Getenv("INFERNET_AB") == "" {
		t.Skip("INFERNET_AB unset")
	}
	best := bestKernels()
	if best.prefetch == nil {
		t.Skip("no prefetch")
	}
	ctx := context.Background()
	const rows, rounds = 142, 9
	old := *best
	old.prefetch = nil
	sets := []*kernelSet{&old, best}
	type mat struct {
		n, k int
		w    Weights
	}
	r := &rng{s: 1}
	var mats []mat
	for range 12 {
		for _, s := range []struct{ n, k int }{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}} {
			mats = append(mats, mat{s.n, s.k, r.weights(abi.Q4_K, s.n, s.k, false)})
		}
	}
	x := r.f32s(rows * 2048)
	out := make([]float32, rows*2048)
	var ts [2][]time.Duration
	for range rounds {
		for i, ks := range sets {
			t0 := time.Now()
			for _, m := range mats {
				if err := matMulInt(ctx, ks, 1, rows, m.n, m.k, x[:rows*m.k], m.w, out[:rows*m.n]); err != nil {
					t.Fatal(err)
				}
			}
			ts[i] = append(ts[i], time.Since(t0))
		}
	}
	for i := range ts {
		sort.Slice(ts[i], func(a, b int) bool { return ts[i][a] < ts[i][b] })
	}
	t.Logf("%d rows, %d matrices: without min %v med %v, with min %v med %v: min ratio %.2fx, median %.2fx",
		rows, len(mats), ts[0][0], ts[0][rounds/2], ts[1][0], ts[1][rounds/2],
		float64(ts[0][0])/float64(ts[1][0]), float64(ts[0][rounds/2])/float64(ts[1][rounds/2]))
}
