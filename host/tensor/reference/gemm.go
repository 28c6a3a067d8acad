package reference

import (
	"context"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
)

// The exact GEMM. Each C element is a float32 accumulator that adds its
// products in ascending k: acc = acc + float32(a*b). The conversion rounds
// the product to float32 before the addition, which by the Go spec forbids
// fusing the two into an FMA (compilers do fuse x*y + z on arm64, ppc64le,
// s390x and amd64 v3). Because the accumulator is float32, storing it to C
// between k-blocks and reloading it loses nothing, so cache blocking over k
// does not change any bit: the result is exactly the naive loop
//
//	for k := 0; k < K; k++ { c = c + float32(a[i,k]*b[k,j]) }
//
// F32 runs on the cpu backend's exact driver (gemmF32 below). The I8 GEMM
// (exact in int32) runs here: both operands are brought to "k-contiguous"
// form, A as [M,K] (copied transposed if TransA) and B as Bᵀ, [N,K] (copied
// transposed unless TransB), so every C[i,j] is the dot product of row i of
// A and row j of Bᵀ; a register tile (2 rows × 4 columns of C at once)
// interleaves independent elements, and edge tiles use plain dot products.
const (
	gemmKC = 256 // k per block: a 2×4 tile reads 6 rows of 1 KiB (L1)
	gemmNC = 128 // Bᵀ rows per block: 128 × gemmKC floats = 128 KiB (L2)
	gemmMT = 16  // most C rows per task: each Bᵀ block is reused for 8 row pairs
)

// gemmF32 computes the F32 GEMM; lengths are checked by the caller. The
// fast CPU backend's exact driver does the work: it sums every element in
// exactly the order above (vectorized across elements, never within one),
// which TestGemmExact in host/tensor/cpu checks bit for bit against the
// naive loop on every kernel, block size and thread count.
func (be *Backend) gemmF32(ctx context.Context, p tensor.GemmParams, a, b, c []float32) error {
	// The host module lets C alias an operand; the blocked driver reads
	// the operands while it writes C.
	a, b = unshare(a, c, false), unshare(b, c, false)
	return cpu.GemmExact(ctx, be.threads, p, a, b, c)
}

// gemmI8 computes the I8·I8→I32 GEMM, wrapping on int32 overflow.
func (be *Backend) gemmI8(ctx context.Context, p tensor.GemmParams, a, b []int8, c []int32) error {
	at, bt, err := gemmOperands(ctx, be.threads, p, a, b, c)
	if err != nil {
		return err
	}
	kern := gemmKernels[int8, int32]{tile: tile2x4I8, dot: dotI8}
	return runGemm(ctx, be.threads, p, at, bt, c, kern, nil)
}

// gemmOperands returns A as [M,K] and Bᵀ as [N,K], copying (and transposing)
// when the stored layout differs or the operand overlaps C.
func gemmOperands[E, C any](ctx context.Context, threads int, p tensor.GemmParams, a, b []E, c []C) (at, bt []E, err error) {
	// A transposed copy is complete before C is written, so only operands
	// used in place need unsharing.
	if p.TransA { // stored [K,M]
		at, err = transpose(ctx, threads, a, p.K, p.M)
	} else {
		at = unshare(a, c, false)
	}
	if err != nil {
		return nil, nil, err
	}
	if !p.TransB { // stored [K,N]
		bt, err = transpose(ctx, threads, b, p.K, p.N)
	} else {
		bt = unshare(b, c, false)
	}
	return at, bt, err
}

// gemmKernels are the inner loops of one element type: tile adds the products
// of a[0..1] and b[0..3] (equal-length k-ranges) into c0[0:4] and c1[0:4];
// dot adds the products of a and b into *c. Both in ascending k.
type gemmKernels[E, C any] struct {
	tile func(a0, a1, b0, b1, b2, b3 []E, c0, c1 []C)
	dot  func(c *C, a, b []E)
}

// runGemm computes C = at·btᵀ (or C += with p.Accumulate) for at [M,K] and
// bt [N,K], threads splitting C's rows into tasks. finish, if not nil,
// post-processes each task's rows once they are final.
func runGemm[E, C any](ctx context.Context, threads int, p tensor.GemmParams, at, bt []E, c []C, kern gemmKernels[E, C], finish func([]C)) error {
	m, n, k := p.M, p.N, p.K
	if m == 0 || n == 0 {
		return ctx.Err()
	}
	// Rows per task: up to gemmMT, fewer when that leaves threads idle.
	rows := (m + 4*threads - 1) / (4 * threads)
	rows = min(max(rows+rows%2, 2), gemmMT)

	return forBlocks(ctx, threads, m, rows, func(lo, hi int) error {
		crows := c[lo*n : hi*n]
		if !p.Accumulate {
			clear(crows) // every sum starts from +0
		}
		for j0 := 0; j0 < n; j0 += gemmNC {
			j1 := min(j0+gemmNC, n)
			for k0 := 0; k0 < k; k0 += gemmKC {
				if err := ctx.Err(); err != nil {
					return err
				}
				k1 := min(k0+gemmKC, k)
				gemmBlock(at, bt, c, lo, hi, j0, j1, k0, k1, k, n, kern)
			}
		}
		if finish != nil {
			finish(crows)
		}
		return nil
	})
}

// gemmBlock adds the products for k in [k0,k1) to C[i0:i1, j0:j1].
func gemmBlock[E, C any](at, bt []E, c []C, i0, i1, j0, j1, k0, k1, k, n int, kern gemmKernels[E, C]) {
	if k1 <= k0 {
		return
	}
	arow := func(i int) []E { return at[i*k+k0 : i*k+k1] }
	brow := func(j int) []E { return bt[j*k+k0 : j*k+k1] }
	i := i0
	for ; i+2 <= i1; i += 2 {
		a0, a1 := arow(i), arow(i+1)
		c0, c1 := c[i*n:(i+1)*n], c[(i+1)*n:(i+2)*n]
		j := j0
		for ; j+4 <= j1; j += 4 {
			kern.tile(a0, a1, brow(j), brow(j+1), brow(j+2), brow(j+3), c0[j:j+4], c1[j:j+4])
		}
		for ; j < j1; j++ {
			b := brow(j)
			kern.dot(&c0[j], a0, b)
			kern.dot(&c1[j], a1, b)
		}
	}
	if i < i1 { // odd last row
		a0, c0 := arow(i), c[i*n:(i+1)*n]
		for j := j0; j < j1; j++ {
			kern.dot(&c0[j], a0, brow(j))
		}
	}
}

// tile2x4I8 is the I8 register tile; int32 arithmetic wraps.
func tile2x4I8(a0, a1, b0, b1, b2, b3 []int8, c0, c1 []int32) {
	c00, c01, c02, c03 := c0[0], c0[1], c0[2], c0[3]
	c10, c11, c12, c13 := c1[0], c1[1], c1[2], c1[3]
	a1 = a1[:len(a0)]
	b0, b1, b2, b3 = b0[:len(a0)], b1[:len(a0)], b2[:len(a0)], b3[:len(a0)]
	for k, v := range a0 {
		x, y := int32(v), int32(a1[k])
		p, q, r, s := int32(b0[k]), int32(b1[k]), int32(b2[k]), int32(b3[k])
		c00 += x * p
		c01 += x * q
		c02 += x * r
		c03 += x * s
		c10 += y * p
		c11 += y * q
		c12 += y * r
		c13 += y * s
	}
	c0[0], c0[1], c0[2], c0[3] = c00, c01, c02, c03
	c1[0], c1[1], c1[2], c1[3] = c10, c11, c12, c13
}

// dotI8 adds a·b to *c in int32.
func dotI8(c *int32, a, b []int8) {
	acc := *c
	b = b[:len(a)]
	for k, x := range a {
		acc += int32(x) * int32(b[k])
	}
	*c = acc
}

// transpose returns src, stored as [rows,cols], as a new [cols,rows] matrix.
// Threads split the output rows.
func transpose[E any](ctx context.Context, threads int, src []E, rows, cols int) ([]E, error) {
	dst := make([]E, len(src))
	const band = 16 // output rows per pass: 16 write streams, short contiguous reads
	err := forBlocks(ctx, threads, cols, blockFor(rows, band), func(lo, hi int) error {
		for b0 := lo; b0 < hi; b0 += band {
			b1 := min(b0+band, hi)
			for r := range rows {
				s := src[r*cols+b0 : r*cols+b1]
				for t, v := range s {
					dst[(b0+t)*rows+r] = v
				}
			}
		}
		return nil
	})
	return dst, err
}
