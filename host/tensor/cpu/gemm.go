package cpu

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/infernet/infernet/abi"
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
	for ir := 0; ir < mc; ir += mr {
		panel := dst[ir*kc : (ir+mr)*kc]
		rows := min(mr, mc-ir)
		switch {
		case a.cs == 1:
			// Row-major A: transpose groups of 4 rows, the rest in Go.
			g := 0
			for ; g+4 <= rows; g += 4 {
				_ = a.data[(i0+ir+g+3)*a.rs+p0+kc-1] // the last element packT4 reads
				packT4(&panel[g], &a.data[(i0+ir+g)*a.rs+p0], a.rs, kc, mr)
			}
			for ; g < rows; g++ {
				src := a.data[(i0+ir+g)*a.rs+p0:][:kc]
				for k, v := range src {
					panel[k*mr+g] = v
				}
			}
			if rows < mr {
				for k := 0; k < kc; k++ {
					clear(panel[k*mr+rows : k*mr+mr])
				}
			}
		case rows == mr && mr%4 == 0:
			// Transposed A: the mr values of one k are contiguous.
			_ = a.data[(p0+kc-1)*a.cs+i0+ir+mr-1] // the last element packCopy reads
			packCopy(&panel[0], &a.data[p0*a.cs+i0+ir], a.cs, kc, mr)
		default:
			packA(panel, a, i0+ir, rows, p0, kc, mr)
		}
	}
}

// packBF32 is packB for float32, with the full micro-panels done by the
// assembly packers when fast is set.
func packBF32(dst []float32, b matrix[float32], p0, kc, j0, nc, nr int, fast bool) {
	if !fast || nr%8 != 0 {
		packB(dst, b, p0, kc, j0, nc, nr)
		return
	}
	panels := nc / nr
	full := panels * nr
	if panels > 0 {
		if b.cs == 1 {
			// Row-major B: copy whole row segments, nr values per panel.
			_ = b.data[(p0+kc-1)*b.rs+j0+full-1] // the last element packPanels reads
			_ = dst[full*kc-1]                   // and writes
			packPanels(&dst[0], &b.data[p0*b.rs+j0], b.rs, kc, nr, panels)
		} else {
			// Transposed B: columns of op(B) are rows of B; transpose by 4.
			for jr := 0; jr < full; jr += nr {
				panel := dst[jr*kc : (jr+nr)*kc]
				for g := 0; g < nr; g += 4 {
					_ = b.data[(j0+jr+g+3)*b.cs+p0+kc-1] // the last element packT4 reads
					packT4(&panel[g], &b.data[(j0+jr+g)*b.cs+p0], b.cs, kc, nr)
				}
			}
		}
	}
	if full < nc {
		packB(dst[full*kc:], b, p0, kc, j0+full, nc-full, nr)
	}
}

// workerBuffers are one worker's private packing buffers: the packed block
// of A and the edge tile. Pools per kernel recycle them and the shared
// buffers, so steady-state GEMMs do not allocate large blocks.
type workerBuffers struct {
	a    []float32
	tile []float32 // edge tiles: the kernel writes here, storeTile copies the valid corner
}

// sharedBuffers hold two packed blocks of B, used by turns: the workers pack
// one while slower workers may still read the other (see run).
type sharedBuffers struct {
	b [2][]float32
}

type pools struct {
	worker, shared sync.Pool
}

var kernelPools sync.Map // *kernel → *pools

func poolsFor(k *kernel) *pools {
	if p, ok := kernelPools.Load(k); ok {
		return p.(*pools)
	}
	p := &pools{}
	p.worker.New = func() any {
		return &workerBuffers{a: make([]float32, k.mc*k.kc), tile: make([]float32, k.mr*k.nr)}
	}
	p.shared.New = func() any {
		return &sharedBuffers{b: [2][]float32{make([]float32, k.kc*k.nc), make([]float32, k.kc*k.nc)}}
	}
	actual, _ := kernelPools.LoadOrStore(k, p)
	return actual.(*pools)
}

// job is one GEMM as the workers see it. C is a pointer to 4-byte elements
// (float32 or int32) so one driver serves both result types.
type job[T float32 | int8] struct {
	k          *kernel
	a, b       matrix[T]
	c          unsafe.Pointer // C[0,0]
	ldc        int
	m, n, kdim int
	accumulate bool
	integer    bool // C is int32: use the I32 store modes
	exact      bool // run the kernel's exact variant (GemmExact)

	threads int
	kcMax   int // depth per block
	icN     int // row blocks per step: tile rows [b·tiles/icN, (b+1)·tiles/icN) of mr rows each
	jrN     int // column chunks per row block, to feed every worker when M is small

	shared *sharedBuffers
	steps  []stepState
	// itemStep[w] is 1 + the last step in which work item w was finished.
	// Item w covers the same block of C in every step of one jc, so a step
	// may run it only once the previous step has.
	itemStep []atomic.Int64
	stop     atomic.Bool // set when ctx is done: workers abandon the job
	mu       sync.Mutex  // with cond: waiting for another worker's progress
	cond     *sync.Cond
}

// stepState tracks one (jc, pc) step: work is taken by incrementing a next
// counter and reported by incrementing a done counter.
type stepState struct {
	packNext, packDone atomic.Int64 // units of packUnit micro-panels of B
	itemNext, itemDone atomic.Int64 // (row block, column chunk) work items
}

// packUnit is the number of micro-panels of B one worker packs at a time.
const packUnit = 4

// itemsPerWorker is the least number of work items per worker and step.
// Smaller items even out a goroutine that starts late (waking an idle core's
// thread takes 50-100 µs in a VM) and blocks of unequal height: at n = 256
// four items per worker are 10% faster than two (measured side by side).
const itemsPerWorker = 4

// minParallelFlops is the smallest GEMM worth a second goroutine: below it
// start-up and synchronisation cost more than they save.
const minParallelFlops = 1 << 21

// parallel computes the GEMM on up to threads goroutines (the caller's one
// included) and returns ctx's error if it ended the work early.
//
// The loop nest is GotoBLAS's: jc (nc columns) → pc (kc depth) → ic (mc
// rows) → jr (nr columns) → ir (mr rows) → micro-kernel. Each (jc, pc) step
// packs a kc×nc block of B, shared by all workers, then runs work items: a
// row block of A (packed privately) times a chunk of the packed B.
//
// Nothing is assigned statically. Workers take units of B packing and work
// items from per-step counters, and only wait when they need work someone
// else has taken but not finished: the packed B of their step, the same
// block of C in the previous step, or (two steps ahead) the end of the step
// whose B buffer they are about to refill.
// So when another process stalls one core, the other worker does the
// remaining work instead of waiting. ctx is checked before every item, a
// few milliseconds of work at most.
func (j *job[T]) parallel(ctx context.Context, threads int) error {
	k := j.k
	if 2*float64(j.m)*float64(j.n)*float64(j.kdim) < minParallelFlops {
		threads = 1
	}
	j.kcMax = k.kc
	if j.integer {
		j.kcMax = min(j.kcMax, maxExactKC)
	}
	// Row blocks of at most k.mc rows, at least itemsPerWorker per worker,
	// all within one tile of the same size so that the workers finish together.
	tiles := (j.m + k.mr - 1) / k.mr
	j.icN = (tiles*k.mr + k.mc - 1) / k.mc
	if threads > 1 {
		j.icN = min(tiles, max(j.icN, itemsPerWorker*threads))
	}
	j.jrN = 1
	if threads > 1 && j.icN < itemsPerWorker*threads {
		panels := (min(j.n, k.nc) + k.nr - 1) / k.nr
		j.jrN = min(panels, (itemsPerWorker*threads+j.icN-1)/j.icN)
	}
	j.steps = make([]stepState, ((j.n+k.nc-1)/k.nc)*((j.kdim+j.kcMax-1)/j.kcMax))
	j.itemStep = make([]atomic.Int64, j.icN*j.jrN)
	j.threads = threads
	j.cond = sync.NewCond(&j.mu)

	p := poolsFor(k)
	j.shared = p.shared.Get().(*sharedBuffers)
	defer p.shared.Put(j.shared)

	var wg sync.WaitGroup
	for range threads - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.run(ctx)
		}()
	}
	j.run(ctx)
	wg.Wait()
	if j.stop.Load() {
		return ctx.Err()
	}
	return nil
}

// run is one worker: it goes through the steps described at parallel until
// all are done or the job is stopped.
func (j *job[T]) run(ctx context.Context) {
	k := j.k
	p := poolsFor(k)
	buf := p.worker.Get().(*workerBuffers)
	defer p.worker.Put(buf)
	items := int64(j.icN * j.jrN)
	tiles := (j.m + k.mr - 1) / k.mr
	s := 0
	for jc := 0; jc < j.n; jc += k.nc {
		nc := min(k.nc, j.n-jc)
		panels := (nc + k.nr - 1) / k.nr
		units := int64((panels + packUnit - 1) / packUnit)
		for pc := 0; pc < j.kdim; pc += j.kcMax {
			kc := min(j.kcMax, j.kdim-pc)
			st := &j.steps[s]
			bp := j.shared.b[s%2]
			// The buffer was last used two steps ago; those items must be done.
			if s >= 2 && !j.waitFor(func() bool { return j.steps[s-2].itemDone.Load() >= items }) {
				return
			}
			for {
				u := st.packNext.Add(1) - 1
				if u >= units || j.stop.Load() {
					break
				}
				lo, hi := int(u)*packUnit*k.nr, min(nc, int(u+1)*packUnit*k.nr)
				j.packB(bp[lo*kc:], pc, kc, jc+lo, hi-lo)
				j.finished(func() { st.packDone.Add(1) })
			}
			if !j.waitFor(func() bool { return st.packDone.Load() >= units }) {
				return
			}
			mode := modeAddF32
			if pc == 0 && !j.accumulate {
				mode = modeStoreF32
			}
			if j.integer {
				mode += modeStoreI32
			}
			for {
				w := st.itemNext.Add(1) - 1
				if w >= items || j.stop.Load() {
					break
				}
				if ctx.Err() != nil {
					j.abort()
					return
				}
				if pc > 0 && !j.waitFor(func() bool { return j.itemStep[w].Load() >= int64(s) }) {
					return
				}
				ib, jb := int(w)/j.jrN, int(w)%j.jrN
				ic := ib * tiles / j.icN * k.mr
				mc := min((ib+1)*tiles/j.icN*k.mr, j.m) - ic
				jr0, jr1 := jb*panels/j.jrN*k.nr, min(nc, (jb+1)*panels/j.jrN*k.nr)
				j.packA(buf.a, ic, mc, pc, kc)
				j.block(buf, bp, ic, mc, jc, jr0, jr1, kc, mode, pc+kc == j.kdim)
				j.finished(func() {
					// Only forward: with a new jc, step s+1 may finish this
					// item (another block of C) before step s does.
					if j.itemStep[w].Load() < int64(s+1) {
						j.itemStep[w].Store(int64(s + 1))
					}
					st.itemDone.Add(1)
				})
			}
			s++
		}
	}
}

// finished records progress with update and wakes the waiting workers.
// Progress is reported under the mutex so no waiter misses it.
func (j *job[T]) finished(update func()) {
	j.mu.Lock()
	update()
	j.cond.Broadcast()
	j.mu.Unlock()
}

// waitFor blocks until ready reports true; it returns false if the job was
// stopped instead.
func (j *job[T]) waitFor(ready func() bool) bool {
	if !ready() {
		j.mu.Lock()
		for !ready() && !j.stop.Load() {
			j.cond.Wait()
		}
		j.mu.Unlock()
	}
	return !j.stop.Load()
}

// abort stops the job and releases every waiting worker.
func (j *job[T]) abort() {
	j.stop.Store(true)
	j.mu.Lock()
	j.cond.Broadcast()
	j.mu.Unlock()
}

// packA packs rows [ic, ic+mc) × depth [pc, pc+kc) of op(A) into dst.
func (j *job[T]) packA(dst []float32, ic, mc, pc, kc int) {
	if jf, ok := any(j).(*job[float32]); ok {
		packAF32(dst, jf.a, ic, mc, pc, kc, j.k.mr, j.k.asmPack)
		return
	}
	packA(dst, j.a, ic, mc, pc, kc, j.k.mr)
}

// packB packs depth [pc, pc+kc) × columns [j0, j0+nc) of op(B) into dst.
func (j *job[T]) packB(dst []float32, pc, kc, j0, nc int) {
	if jf, ok := any(j).(*job[float32]); ok {
		packBF32(dst, jf.b, pc, kc, j0, nc, j.k.nr, j.k.asmPack)
		return
	}
	packB(dst, j.b, pc, kc, j0, nc, j.k.nr)
}

// block runs the micro-kernel over the packed mc×kc block of A and columns
// [jr0, jr1) of the packed kc×nc block of B, writing the matching part of
// C[ic:ic+mc, jc:jc+nc]. The micro-panel of B stays in L1 while the
// micro-panels of A stream from L2.
//
// In exact mode, the last k-block (last) also makes the tile's NaNs
// canonical while it is in cache.
func (j *job[T]) block(buf *workerBuffers, bp []float32, ic, mc, jc, jr0, jr1, kc, mode int, last bool) {
	k := j.k
	mr, nr := k.mr, k.nr
	fn := k.fn
	if j.exact {
		fn = k.exact
	}
	tile := unsafe.Pointer(&buf.tile[0])
	for jr := jr0; jr < jr1; jr += nr {
		b := &bp[jr*kc]
		cols := min(nr, jr1-jr)
		for ir := 0; ir < mc; ir += mr {
			a := &buf.a[ir*kc]
			rows := min(mr, mc-ir)
			c := unsafe.Add(j.c, 4*((ic+ir)*j.ldc+jc+jr))
			switch {
			case rows == mr && cols == nr:
				fn(kc, a, b, c, j.ldc, mode)
			case j.exact:
				// The exact kernel goes on from C's values: its edge tile
				// starts from C's corner.
				if mode == modeAddF32 {
					loadTile(buf.tile, nr, rows, cols, c, j.ldc)
				}
				fn(kc, a, b, tile, nr, mode)
				storeTile(buf.tile, nr, rows, cols, c, j.ldc, modeStoreF32)
			default:
				fn(kc, a, b, tile, nr, modeStoreF32)
				storeTile(buf.tile, nr, rows, cols, c, j.ldc, mode)
			}
			if j.exact && last {
				canonicalizeTile(c, rows, cols, j.ldc)
			}
		}
	}
}

// canonicalNaN is the one NaN exact results hold.
var canonicalNaN = math.Float32frombits(abi.CanonicalNaN32)

// canonicalizeTile replaces every NaN of the rows×cols F32 tile at c (row
// stride ldc) by canonicalNaN.
func canonicalizeTile(c unsafe.Pointer, rows, cols, ldc int) {
	for i := range rows {
		for k, v := range unsafe.Slice((*float32)(unsafe.Add(c, 4*i*ldc)), cols) {
			if v != v {
				*(*float32)(unsafe.Add(c, 4*(i*ldc+k))) = canonicalNaN
			}
		}
	}
}

// loadTile copies the rows×cols corner of the F32 matrix at c (row stride
// ldc) into acc (row stride stride).
func loadTile(acc []float32, stride, rows, cols int, c unsafe.Pointer, ldc int) {
	for i := 0; i < rows; i++ {
		copy(acc[i*stride:i*stride+cols], unsafe.Slice((*float32)(unsafe.Add(c, 4*i*ldc)), cols))
	}
}
