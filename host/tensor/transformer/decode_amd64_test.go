//go:build amd64 && !purego

package transformer

import (
	"math"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"golang.org/x/sys/cpu"
)

// TestQ4KC4Z checks the zmm four-weight-row Q4_K and Q6_K kernels
// (q4KC4Z, q6KC4Z) against the portable block sums and intDot bit for
// bit: one to eight super-blocks, 4 to 20 rows, random and extreme
// weights (every byte 0xFF, specials in d and dmin), x with zeros, huge
// values and infinities.
func TestQ4KC4Z(t *testing.T) {
	if !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VNNI || !cpu.X86.HasAVX512VL || !hasAVX2 {
		t.Skip("no AVX-512 VNNI")
	}
	for _, c := range []struct {
		dt     abi.DType
		kernel c4Func
	}{{abi.Q4_K, q4KC4Z}, {abi.Q6_K, q6KC4Z}} {
		if c.dt == abi.Q6_K && !cpu.X86.HasAVX512GFNI {
			continue
		}
		testC4Z(t, c.dt, c.kernel)
	}
}

func testC4Z(t *testing.T, dt abi.DType, kernel c4Func) {
	for _, k := range []int{256, 512, 768, 2048} {
		for _, rows := range []int{4, 8, 12, 20} {
			for mode := 0; mode < 5; mode++ {
				r := &rng{s: uint64(k*100 + rows*10 + mode)}
				const gap = 1 // cols4Asm passes rows back to back (stride = rb)
				w := r.weights(dt, rows*gap, k, mode == 1)
				rb := rowBytes(dt, k)
				x := r.f32s(k)
				switch mode {
				case 2:
					for i := range w.Raw {
						w.Raw[i] = 0xFF
					}
					for i := range x {
						x[i] = -1
					}
				case 3:
					clear(x[:k/2])
					x[k-1] = 3e38
				case 4:
					x[5], x[k/2] = float32(math.Inf(1)), float32(math.Inf(-1))
				}
				var a q8Act
				quantizeAct(x, actBlockOf(dt), &a)
				want := make([]float32, rows)
				for j := range rows {
					row := w.Raw[j*gap*rb : j*gap*rb+rb]
					var rs rowScales
					ng := groups(dt, k)
					rs.decode(dt, row, ng)
					sums := make([]int32, ng)
					goKernels.blockSums(dt, row, a.qs, sums)
					want[j] = intDot(dt, &rs, &a, sums)
				}
				got := make([]float32, rows)
				kernel(&got[0], &w.Raw[0], &a.qs[0], &a.d[0], &a.sums[0], k/256, rows, gap*rb)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
						t.Fatalf("%v k=%d rows=%d mode=%d: out[%d] = %g, want %g", dt, k, rows, mode, j, got[j], want[j])
					}
				}
			}
		}
	}
}

// TestQ4KC4ZAB times q4KC4Z and q6KC4Z against q4KC4VNNI and q6KC4VNNI
// (ymm) on one thread, interleaved (INFERNET_AB=1): the decode GEMVs of
// the 110M shape.
func TestQ4KC4ZAB(t *testing.T) {
	if os.Getenv("INFERNET_AB") == "" || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VNNI || !cpu.X86.HasAVX512GFNI {
		t.Skip("INFERNET_AB=1 and AVX-512 VNNI and GFNI")
	}
	for _, c := range []struct {
		dt       abi.DType
		old, zmm c4Func
	}{{abi.Q4_K, q4KC4VNNI, q4KC4Z}, {abi.Q6_K, q6KC4VNNI, q6KC4Z}} {
		for _, s := range gemvShapes {
			r := &rng{s: 7}
			w, x := r.weights(c.dt, s.n, s.k, false), r.f32s(s.k)
			var a q8Act
			quantizeAct(x, actBlockOf(c.dt), &a)
			out := make([]float32, s.n)
			rb := rowBytes(c.dt, s.k)
			var ts [2][]float64
			for range 41 {
				for i, f := range []c4Func{c.old, c.zmm} {
					t0 := time.Now()
					f(&out[0], &w.Raw[0], &a.qs[0], &a.d[0], &a.sums[0], s.k/256, s.n, rb)
					ts[i] = append(ts[i], float64(time.Since(t0).Microseconds()))
				}
			}
			sort.Float64s(ts[0])
			sort.Float64s(ts[1])
			t.Logf("%v %dx%d: ymm %.0f/%.0f µs, zmm %.0f/%.0f µs (min/median): %.2fx, %.2fx", c.dt, s.n, s.k, ts[0][0], ts[0][20], ts[1][0], ts[1][20], ts[0][0]/ts[1][0], ts[0][20]/ts[1][20])
		}
	}
}

// TestAxpyAB times attention's weighted sum of v rows (a 64-wide head,
// 256 rows 768 floats apart, 12 heads) by axpyRowsAVX2 against
// axpyRowsAVX512, interleaved (INFERNET_AB=1).
func TestAxpyAB(t *testing.T) {
	if os.Getenv("INFERNET_AB") == "" || !cpu.X86.HasAVX512F {
		t.Skip("INFERNET_AB=1 and AVX-512")
	}
	const hd, heads, rows, stride = 64, 12, 256, 768
	r := &rng{s: 3}
	v, a, o := r.f32s(rows*stride), r.f32s(rows), make([]float32, hd)
	var ts [2][]float64
	for range 41 {
		for i, f := range []func(o, v, a []float32, stride int){axpyAsm, axpyAsm512} {
			t0 := time.Now()
			for h := range heads {
				f(o, v[h*hd:], a, stride)
			}
			ts[i] = append(ts[i], float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	sort.Float64s(ts[0])
	sort.Float64s(ts[1])
	t.Logf("ymm %.1f/%.1f µs, zmm %.1f/%.1f µs (min/median): %.2fx, %.2fx", ts[0][0], ts[0][20], ts[1][0], ts[1][20], ts[0][0]/ts[1][0], ts[0][20]/ts[1][20])
}
