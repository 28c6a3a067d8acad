package host

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor/backends/workertest"
)

// The data file of the v4 tests: an f32 norm, then q4_k and q6_k weights.
const (
	offQNorm = 0    // f32 [256]
	offQ4K   = 1024 // q4_k [4, 256]
	offQ6K   = 1600 // q6_k [2, 256]
	qSize    = 2020
)

// writeQuantFile writes the v4 tests' data file: random blocks whose f16
// scales are about 2⁻⁶ (q6_k's int8 scales and the K-quants' 6-bit ones
// random).
func writeQuantFile(t *testing.T) string {
	r := rand.New(rand.NewPCG(4, 1))
	b := make([]byte, qSize)
	for i := range 256 {
		binary.LittleEndian.PutUint32(b[offQNorm+4*i:], math.Float32bits(1+float32(i)/256))
	}
	for i := offQ4K; i < qSize; i++ {
		b[i] = byte(r.Uint32())
	}
	for blk := range 4 { // q4_k: d, dmin
		binary.LittleEndian.PutUint16(b[offQ4K+144*blk:], 0x2400+uint16(r.IntN(256)))
		binary.LittleEndian.PutUint16(b[offQ4K+144*blk+2:], 0x2000+uint16(r.IntN(256)))
	}
	for blk := range 2 { // q6_k: d, last
		binary.LittleEndian.PutUint16(b[offQ6K+210*blk+208:], 0x1C00+uint16(r.IntN(256)))
	}
	path := filepath.Join(t.TempDir(), "q.bin")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestQuantWeightsOnGPUWorker: a job whose weights are of v4 block types
// (q4_k, q6_k) runs on a GPU worker (on the fake driver, which runs
// kernels.cu's dequantization as C) with its weights on the device:
// uploaded once, in their stored bytes, and kept in the device cache for
// the next job; matmul, embed and rmsnorm on them give the reference's
// values within tolerance mode's rounding, whether the job's first data
// tensor is a q4_k or an f32.
func TestQuantWeightsOnGPUWorker(t *testing.T) {
	set := workertest.OpenFake(t)
	gpu := newSandbox(t, Config{Reference: set.Reference, Fast: set.Fast})
	ref := newSandbox(t, Config{})
	data := map[string]string{"q.bin": writeQuantFile(t)}
	const (
		f32, q4k, q6k = int32(abi.F32), int32(abi.Q4_K), int32(abi.Q6_K)
		window        = 0xff00
	)
	x := make([]float32, 2*256)
	for i := range x {
		x[i] = float32(i%29-14) / 8
	}
	// calls makes the job: after the data tensors of first, x [2, 256],
	// then y1 = x·q4_kᵀ, y2 = x·q6_kᵀ, embed rows 3, 0 of the q4_k, rmsnorm
	// of x by row 0 of the q4_k; the results are read through matmuls by
	// the q4_k ([2, 4] each), into the window.
	calls := func(g *guestData, f32First bool) []lmCall {
		name := g.put([]byte("q.bin"))
		from := func(want int32, off, dt int32, dims ...int32) lmCall {
			return call(hcTensorFromData, want, name, 5, off, 0, dt, int32(len(dims)), g.dims(dims...))
		}
		var cs []lmCall
		h := int32(0) // handles so far
		next := func() int32 { h++; return h }
		if f32First {
			cs = append(cs, from(next(), offQNorm, f32, 256))
		}
		w4, w6 := next(), next()
		xh, y1, y2, e, z1, gq, n, z2 := next(), next(), next(), next(), next(), next(), next(), next()
		return append(cs,
			from(w4, offQ4K, q4k, 4, 256),
			from(w6, offQ6K, q6k, 2, 256),
			from(int32(abi.ESHAPE), offQ4K, q4k, 8, 128), // rows of half super-blocks
			call(hcTensorNew, xh, f32, 2, g.dims(2, 256)),
			call(hcTensorWrite, 0, xh, g.put(f32s(x...)), 2*256*4),
			call(hcMatMul, y1, xh, w4),
			call(hcMatMul, y2, xh, w6),
			call(hcEmbed, e, w4, g.put(i32s(3, 0)), 2),
			call(hcMatMul, z1, e, w4),
			from(gq, offQ4K, q4k, 256),
			call(hcRMSNorm, n, xh, gq, f32bits(1e-5)),
			call(hcMatMul, z2, n, w4),
			call(hcTensorRead, 0, y1, window, 32),
			call(hcTensorRead, 0, y2, window+32, 16),
			call(hcTensorRead, 0, z1, window+48, 32),
			call(hcTensorRead, 0, z2, window+80, 32),
		)
	}
	var want []float32
	for _, c := range []struct {
		name     string
		sb       *Sandbox
		mode     abi.Mode
		f32First bool
		uploaded int64
	}{
		{"reference, exact", ref, abi.ModeExact, false, 0},
		// 4 and 1 rows of q4_k (144 bytes each), 2 of q6_k (210).
		{"gpu worker, q4_k first", gpu, abi.ModeTolerance, false, 5*144 + 2*210},
		{"gpu worker, f32 on the device first", gpu, abi.ModeTolerance, true, 256 * 4}, // the rest cached
	} {
		g := &guestData{}
		win, res := runCalls(t, c.sb, Job{Data: data}, NewJobConfig().WithMode(c.mode), g, calls(g, c.f32First))
		got := floats(win[:112])
		if want == nil {
			want = got
		}
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*math.Abs(float64(want[i]))+1e-5) {
				t.Errorf("%s: result %d = %g, want the reference's %g", c.name, i, got[i], want[i])
			}
		}
		if c.sb == gpu && (res.Backend != "cuda" || res.DataUploaded != c.uploaded) {
			t.Errorf("%s: backend %q, %d bytes uploaded; want cuda and %d", c.name, res.Backend, res.DataUploaded, c.uploaded)
		}
	}
}
