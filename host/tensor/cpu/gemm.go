package cpu

import (
	"context"
	"sync"
	"unsafe"

	"github.com/infernet/infernet/host/tensor"
)

// matrix is a read-only view of a GEMM operand: element (r, c) is
// data[r*rs + c*cs]. Transposed operands just swap the strides, which is
// how packing makes transposes free.
type matrix[T float32 | int8] struct {
	data   []T
	rs, cs int
}

// operands returns the views of op(A) [M,K] and op(B) [K,N].
func operands[T float32 | int8](p tensor.GemmParams, a, b []T) (matrix[T], matrix[T]) {
	ma := matrix[T]{a, p.K, 1}
	if p.TransA {
		ma = matrix[T]{a, 1, p.M}
	}
	mb := matrix[T]{b, p.N, 1}
	if p.TransB {
		mb = matrix[T]{b, 1, p.K}
	}
	return ma, mb
}

// packA copies rows [i0, i0+mc) × columns [p0, p0+kc) of a into dst as
// micro-panels of mr rows: for each k, mr consecutive values of column k.
// Rows past mc are zero so edge tiles need no special kernel.
func packA[T float32 | int8](dst []float32, a matrix[T], i0, mc, p0, kc, mr int) {
	for ir := 0; ir < mc; ir += mr {
		panel := dst[ir*kc : (ir+mr)*kc]
		rows := min(mr, mc-ir)
		if a.rs == 1 {
			// Transposed A: the mr values for one k are contiguous.
			for k := 0; k < kc; k++ {
				src := a.data[(p0+k)*a.cs+i0+ir:]
				d := panel[k*mr : k*mr+mr]
				for i := 0; i < rows; i++ {
					d[i] = float32(src[i])
				}
				clear(d[rows:])
			}
			continue
		}
		// Row-major A: read each row sequentially and scatter it into the
		// panel, which is small enough to stay in L1.
		for i := 0; i < rows; i++ {
			src := a.data[(i0+ir+i)*a.rs+p0*a.cs:]
			if a.cs == 1 {
				src = src[:kc]
				for k, v := range src {
					panel[k*mr+i] = float32(v)
				}
				continue
			}
			for k := 0; k < kc; k++ {
				panel[k*mr+i] = float32(src[k*a.cs])
			}
		}
		for i := rows; i < mr; i++ {
			for k := 0; k < kc; k++ {
				panel[k*mr+i] = 0
			}
		}
	}
}

// packB copies rows [p0, p0+kc) × columns [j0, j0+nc) of b into dst as
// micro-panels of nr columns: for each k, nr consecutive values of row k.
// Columns past nc are zero.
func packB[T float32 | int8](dst []float32, b matrix[T], p0, kc, j0, nc, nr int) {
	for jr := 0; jr < nc; jr += nr {
		panel := dst[jr*kc : (jr+nr)*kc]
		cols := min(nr, nc-jr)
		if b.cs == 1 {
			// Row-major B: each row segment is contiguous.
			for k := 0; k < kc; k++ {
				src := b.data[(p0+k)*b.rs+j0+jr:]
				src = src[:cols]
				d := panel[k*nr : k*nr+nr]
				for j, v := range src {
					d[j] = float32(v)
				}
				clear(d[cols:])
			}
			continue
		}
		// Transposed B: each column of op(B) is a contiguous row of B.
		for j := 0; j < cols; j++ {
			src := b.data[(j0+jr+j)*b.cs+p0*b.rs:]
			src = src[:kc]
			for k, v := range src {
				panel[k*nr+j] = float32(v)
			}
		}
		for j := cols; j < nr; j++ {
			for k := 0; k < kc; k++ {
				panel[k*nr+j] = 0
			}
		}
	}
}

// maxExactKC bounds the depth of one kernel call in the i8 GEMM. Products of
// two int8 lie in [-16256, 16384], so a sum of at most 1024 of them stays
// within ±2^24, where every integer is a float32: each partial sum of the
// float32 kernel is exact whatever the order or fusion of its operations.
// The int32 additions across calls then wrap exactly like integer GEMM.
const maxExactKC = 1024

// packAF32 is packA for float32, with the full micro-panels done by the
// assembly packers when fast is set (kernels that imply AVX).
func packAF32(dst []float32, a matrix[float32], i0, mc, p0, kc, mr int, fast bool) {
	if !fast {
		packA(dst, a, i0, mc, p0, kc, mr)
		return
	}
	full := mc / mr * mr
	for ir := 0; ir < full; ir += mr {
		panel := dst[ir*kc : (ir+mr)*kc]
		switch {
		case a.cs == 1:
			// Row-major A: transpose groups of 4 rows, the rest in Go.
			g := 0
			for ; g+4 <= mr; g += 4 {
				packT4(&panel[g], &a.data[(i0+ir+g)*a.rs+p0], a.rs, kc, mr)
			}
			for ; g < mr; g++ {
				src := a.data[(i0+ir+g)*a.rs+p0:][:kc]
				for k, v := range src {
					panel[k*mr+g] = v
				}
			}
		case mr%4 == 0:
			// Transposed A: the mr values of one k are contiguous.
			_ = a.data[(p0+kc-1)*a.cs+i0+ir+mr-1] // the last element packCopy reads
			packCopy(&panel[0], &a.data[p0*a.cs+i0+ir], a.cs, kc, mr)
		default:
			packA(panel, a, i0+ir, mr, p0, kc, mr)
		}
	}
	if full < mc {
		packA(dst[full*kc:], a, i0+full, mc-full, p0, kc, mr)
	}
}

// packBF32 is packB for float32, with the full micro-panels done by the
// assembly packers when fast is set.
func packBF32(dst []float32, b matrix[float32], p0, kc, j0, nc, nr int, fast bool) {
	if !fast || nr%4 != 0 {
		packB(dst, b, p0, kc, j0, nc, nr)
		return
	}
	full := nc / nr * nr
	for jr := 0; jr < full; jr += nr {
		panel := dst[jr*kc : (jr+nr)*kc]
		if b.cs == 1 {
			// Row-major B: nr contiguous values per k.
			_ = b.data[(p0+kc-1)*b.rs+j0+jr+nr-1] // the last element packCopy reads
			packCopy(&panel[0], &b.data[p0*b.rs+j0+jr], b.rs, kc, nr)
			continue
		}
		// Transposed B: columns of op(B) are rows of B; transpose by 4.
		for g := 0; g < nr; g += 4 {
			_ = b.data[(j0+jr+g+3)*b.cs+p0+kc-1] // the last element packT4 reads
			packT4(&panel[g], &b.data[(j0+jr+g)*b.cs+p0], b.cs, kc, nr)
		}
	}
	if full < nc {
		packB(dst[full*kc:], b, p0, kc, j0+full, nc-full, nr)
	}
}

// buffers are one worker's packing buffers, recycled through a pool per
// kernel so steady-state GEMMs do not allocate.
type buffers struct {
	a, b []float32
	tile []float32 // edge tiles: the kernel writes here, storeTile copies the valid corner
}

var pools sync.Map // *kernel → *sync.Pool of *buffers

func getBuffers(k *kernel) *buffers {
	pool, _ := pools.LoadOrStore(k, &sync.Pool{New: func() any {
		return &buffers{
			a:    make([]float32, k.mc*k.kc),
			b:    make([]float32, k.kc*k.nc),
			tile: make([]float32, k.mr*k.nr),
		}
	}})
	return pool.(*sync.Pool).Get().(*buffers)
}

func putBuffers(k *kernel, b *buffers) {
	pool, _ := pools.Load(k)
	pool.(*sync.Pool).Put(b)
}

// job is one GEMM as the workers see it. C is given as a pointer and element
// size-independent strides so the same driver serves f32 and i32 results.
type job[T float32 | int8] struct {
	k          *kernel
	a, b       matrix[T]
	c          unsafe.Pointer // C[0,0]; elements are 4 bytes (float32 or int32)
	ldc        int
	m, n, kdim int
	accumulate bool
	integer    bool // C is int32: use the I32 store modes
}

// run computes rows [m0, m1) × columns [n0, n1) of C with the GotoBLAS loop
// nest: jc (nc columns) → pc (kc depth, packs B) → ic (mc rows, packs A)
// → jr (nr columns) → ir (mr rows) → micro-kernel. ctx is checked before
// each mc×kc×nc block, a few milliseconds of work at most.
func (j *job[T]) run(ctx context.Context, m0, m1, n0, n1 int) error {
	k := j.k
	buf := getBuffers(k)
	defer putBuffers(k, buf)
	kcMax := k.kc
	if j.integer {
		kcMax = min(kcMax, maxExactKC)
	}
	for jc := n0; jc < n1; jc += k.nc {
		nc := min(k.nc, n1-jc)
		for pc := 0; pc < j.kdim; pc += kcMax {
			kc := min(kcMax, j.kdim-pc)
			mode := modeAddF32
			if pc == 0 && !j.accumulate {
				mode = modeStoreF32
			}
			if j.integer {
				mode += modeStoreI32
			}
			first := true
			for ic := m0; ic < m1; ic += k.mc {
				if err := ctx.Err(); err != nil {
					return err
				}
				mc := min(k.mc, m1-ic)
				if jf, ok := any(j).(*job[float32]); ok {
					if first {
						// Pack B after the first ctx check so a cancelled job does no work.
						packBF32(buf.b, jf.b, pc, kc, jc, nc, k.nr, k.asmPack)
					}
					packAF32(buf.a, jf.a, ic, mc, pc, kc, k.mr, k.asmPack)
				} else {
					if first {
						packB(buf.b, j.b, pc, kc, jc, nc, k.nr)
					}
					packA(buf.a, j.a, ic, mc, pc, kc, k.mr)
				}
				first = false
				j.block(buf, ic, mc, jc, nc, kc, mode)
			}
		}
	}
	return nil
}

// block runs the micro-kernel over one packed mc×kc block of A and kc×nc
// block of B, writing C[ic:ic+mc, jc:jc+nc].
func (j *job[T]) block(buf *buffers, ic, mc, jc, nc, kc, mode int) {
	k := j.k
	mr, nr := k.mr, k.nr
	for jr := 0; jr < nc; jr += nr {
		bp := &buf.b[jr*kc]
		cols := min(nr, nc-jr)
		for ir := 0; ir < mc; ir += mr {
			ap := &buf.a[ir*kc]
			rows := min(mr, mc-ir)
			c := unsafe.Add(j.c, 4*((ic+ir)*j.ldc+jc+jr))
			if rows == mr && cols == nr {
				k.fn(kc, ap, bp, c, j.ldc, mode)
				continue
			}
			k.fn(kc, ap, bp, unsafe.Pointer(&buf.tile[0]), nr, modeStoreF32)
			storeTile(buf.tile, nr, rows, cols, c, j.ldc, mode)
		}
	}
}

// minParallelFlops is the smallest GEMM worth a second goroutine: below it
// the start-up and the duplicated packing cost more than they save.
const minParallelFlops = 1 << 18

// parallel splits C among up to threads workers, along M when it has at
// least as many micro-tiles as N, else along N, in whole micro-tiles. The
// calling goroutine runs the first share. It returns the first error.
func (j *job[T]) parallel(ctx context.Context, threads int) error {
	if j.m == 0 || j.n == 0 {
		return nil
	}
	if 2*float64(j.m)*float64(j.n)*float64(j.kdim) < minParallelFlops {
		threads = 1
	}
	mt := (j.m + j.k.mr - 1) / j.k.mr
	nt := (j.n + j.k.nr - 1) / j.k.nr
	alongM := mt >= nt
	tiles, unit, size := nt, j.k.nr, j.n
	if alongM {
		tiles, unit, size = mt, j.k.mr, j.m
	}
	threads = max(1, min(threads, tiles))
	span := func(t int) (int, int) {
		lo := t * tiles / threads * unit
		hi := min(size, (t+1)*tiles/threads*unit)
		return lo, hi
	}
	runShare := func(t int) error {
		lo, hi := span(t)
		if alongM {
			return j.run(ctx, lo, hi, 0, j.n)
		}
		return j.run(ctx, 0, j.m, lo, hi)
	}
	if threads == 1 {
		return runShare(0)
	}
	errs := make([]error, threads)
	var wg sync.WaitGroup
	for t := 1; t < threads; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[t] = runShare(t)
		}()
	}
	errs[0] = runShare(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
