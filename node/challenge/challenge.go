// Package challenge implements the GPU challenge (protocol ID): a timed
// matrix product that a provider whose advert claims a GPU must answer
// before a client sends it a job that only a GPU advert matches.
//
// The client sends a nonce and a size N. Both sides derive two N×N
// matrices A and B from the nonce bound to the two peers (Seed: the
// provider's ID and the client's), so that the answer is the challenged
// provider's own work: a peer without the hardware that passes the
// challenge on to one with it gets matrices made for another pair, whose
// rows fail (Matrix, Row). The provider computes
// C = A·B on its fast backend and answers the Merkle root over the SHA-256
// hashes of C's rows (Compute) as fast as it can. The client times that
// answer, then asks for a few rows drawn after it arrived, recomputes them
// (ExpectedRows, N² multiply-adds each) and checks them and their Merkle
// paths against the root (VerifyPath). A provider that skipped work is
// caught when a skipped row is opened; one that did it all, but slowly,
// misses the deadline.
//
// Entries of A and B are small integers (in [-8, 7]) stored as float32, so
// every entry of C is an integer of magnitude at most 64·N < 2^24: exactly
// representable, and the same whatever the summation order, FMA or TF32
// inputs. Any honest backend gives the same bits.
//
// NOTE: the challenge proves fast matrix hardware, not an NVIDIA GPU. The
// entries fit int8 and bfloat16, so a CPU with matrix units (Intel AMX,
// say) may meet a deadline meant for GPUs; the deadline must be set with
// that in mind.
package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ID is the protocol of the challenge stream.
// Version 2 binds the matrices to the peers (Seed); version 1's answer
// could be borrowed from another provider.
const ID = "/infernet/challenge/2"

// Defaults and limits.
const (
	// DefaultN is the default matrix size: 2·8192³ ≈ 1.1 TFLOP, about 22 ms
	// of f32 GEMM on an H200 and several hundred ms on a large CPU.
	DefaultN = 8192
	// DefaultDeadline is how long the client waits for the root, from
	// sending the challenge: it includes one round trip, generating A and B,
	// copying them to the device and C back, and hashing C.
	DefaultDeadline = 400 * time.Millisecond
	// DefaultRows is how many rows the client opens.
	DefaultRows = 4
	// DefaultTimeout bounds a whole exchange on either side.
	DefaultTimeout = 30 * time.Second
	// MaxN is the largest N a provider accepts by default (3·N²·4 bytes
	// of memory: 3 GiB) and the largest a client asks for.
	MaxN = 16384
	// MinN is the smallest N: below it the timing says nothing.
	MinN = 16
	// MaxRows caps the rows a client may open: the provider makes each
	// again on its CPU (N² multiply-adds).
	MaxRows = 16
)

// Errors. A failed challenge (ErrFailed) is evidence against the provider;
// a refusal (ErrRefused) and transport errors are not.
var (
	// ErrFailed wraps every reason a challenge fails: ErrLate, ErrWrongRow.
	ErrFailed = errors.New("challenge failed")
	// ErrLate is a root that came after the deadline.
	ErrLate = errors.New("root too late")
	// ErrWrongRow is an opened row that is not the product, or whose
	// Merkle path does not lead to the root.
	ErrWrongRow = errors.New("opened row wrong")
	// ErrRefused is a provider that declined (busy, too large, no GPU).
	ErrRefused = errors.New("challenge refused")
	// ErrBusy, with ErrRefused, is a provider that may accept later.
	ErrBusy = errors.New("busy")
)

// Params are the client's choices; zero fields take the defaults.
// Params are plain values, safe to copy and share.
type Params struct {
	// N is the matrix size; default DefaultN, at most MaxN.
	N int
	// Deadline is how long the root may take, round trip included;
	// default DefaultDeadline.
	Deadline time.Duration
	// Rows is how many rows are opened; default DefaultRows.
	Rows int
	// Timeout bounds the whole exchange (opening rows too); default
	// DefaultTimeout.
	Timeout time.Duration

	// open, for tests, are the rows to open instead of random ones.
	open []int
}

// WithDefaults returns p with zero fields set to their defaults and N,
// Rows clamped to their limits.
func (p Params) WithDefaults() Params {
	if p.N == 0 {
		p.N = DefaultN
	}
	p.N = min(max(p.N, MinN), MaxN)
	if p.Deadline == 0 {
		p.Deadline = DefaultDeadline
	}
	if p.Rows == 0 {
		p.Rows = DefaultRows
	}
	p.Rows = min(max(p.Rows, 1), MaxRows, p.N)
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	return p
}

// Matrices derived from a seed.
const (
	MatrixA byte = 'A'
	MatrixB byte = 'B'
)

// Seed is what a challenge's matrices derive from: the client's nonce
// bound to the provider challenged and the client. A provider relaying a
// challenge to another computes the matrices of another pair (itself and
// the relay), whose rows the client does not expect.
func Seed(nonce [32]byte, provider, client peer.ID) [32]byte {
	h := sha256.New()
	h.Write([]byte(ID))
	h.Write(nonce[:])
	for _, id := range []peer.ID{provider, client} {
		h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(id))))
		h.Write([]byte(id))
	}
	return [32]byte(h.Sum(nil))
}

// rowRNG is the generator of row r of matrix m: each row has its own seed,
// so rows are made in parallel and the verifier makes single rows of A.
func rowRNG(seed [32]byte, m byte, r int) *rand.ChaCha8 {
	var buf [32 + 1 + 4]byte
	copy(buf[:], seed[:])
	buf[32] = m
	binary.LittleEndian.PutUint32(buf[33:], uint32(r))
	return rand.NewChaCha8(sha256.Sum256(buf[:]))
}

// Row writes row r of matrix m (N = len(dst) columns) derived from seed:
// integers in [-8, 7], sixteen from each 64-bit output.
func Row(seed [32]byte, m byte, r int, dst []int8) {
	g := rowRNG(seed, m, r)
	for j := 0; j < len(dst); j += 16 {
		x := g.Uint64()
		for k := j; k < min(j+16, len(dst)); k++ {
			dst[k] = int8(x&15) - 8
			x >>= 4
		}
	}
}

// f32bits are the float32 bits of -8..7, indexed by value+8.
var f32bits = func() (t [16]uint32) {
	for i := range t {
		t[i] = math.Float32bits(float32(i - 8))
	}
	return t
}()

// Matrix returns matrix m of size n×n derived from seed, row-major, as
// little-endian float32 bytes (what tensor.Backend.Write takes). Rows are
// made in parallel.
func Matrix(seed [32]byte, m byte, n int) []byte {
	out := make([]byte, 4*n*n)
	parallel(n, func(lo, hi int) {
		row := make([]int8, n)
		for r := lo; r < hi; r++ {
			Row(seed, m, r, row)
			b := out[4*n*r : 4*n*(r+1)]
			for j, v := range row {
				binary.LittleEndian.PutUint32(b[4*j:], f32bits[int(v)+8])
			}
		}
	})
	return out
}

// ExpectedRows returns rows rows of C = A·B derived from seed, as
// little-endian float32 bytes, computed exactly in int32: row i of A and
// every row of B, N² multiply-adds per row. It is the verifier's cost.
func ExpectedRows(seed [32]byte, n int, rows []int) [][]byte {
	out, _ := expectedRows(context.Background(), seed, n, rows, runtime.GOMAXPROCS(0))
	return out
}

// expectedRows is ExpectedRows on at most workers goroutines, given up
// with ctx's error once ctx ends (checked every 64 rows of B).
func expectedRows(ctx context.Context, seed [32]byte, n int, rows []int, workers int) ([][]byte, error) {
	a := make([][]int8, len(rows))
	for i, r := range rows {
		a[i] = make([]int8, n)
		Row(seed, MatrixA, r, a[i])
	}
	// Each worker sums the products of a range of B's rows; int32 sums
	// are exact, so the order of the final sum does not matter.
	var mu sync.Mutex
	acc := make([][]int32, len(rows))
	for i := range acc {
		acc[i] = make([]int32, n)
	}
	parallelOn(n, workers, func(lo, hi int) {
		part := make([][]int32, len(rows))
		for i := range part {
			part[i] = make([]int32, n)
		}
		b := make([]int8, n)
		for k := lo; k < hi; k++ {
			if k%64 == 0 && ctx.Err() != nil {
				return
			}
			Row(seed, MatrixB, k, b)
			for i := range rows {
				aik, p := int32(a[i][k]), part[i]
				if aik == 0 {
					continue
				}
				for j, v := range b {
					p[j] += aik * int32(v)
				}
			}
		}
		mu.Lock()
		for i := range acc {
			for j, v := range part[i] {
				acc[i][j] += v
			}
		}
		mu.Unlock()
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(rows))
	for i := range rows {
		out[i] = make([]byte, 4*n)
		for j, v := range acc[i] {
			binary.LittleEndian.PutUint32(out[i][4*j:], math.Float32bits(float32(v)))
		}
	}
	return out, nil
}

// parallel runs f over [0, n) in contiguous ranges, one per CPU.
func parallel(n int, f func(lo, hi int)) { parallelOn(n, runtime.GOMAXPROCS(0), f) }

// parallelOn runs f over [0, n) in contiguous ranges on at most workers
// goroutines.
func parallelOn(n, workers int, f func(lo, hi int)) {
	w := min(workers, n)
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() { f(i*n/w, (i+1)*n/w) })
	}
	wg.Wait()
}

// Tree is a Merkle tree over the rows of C: leaf i is SHA-256(0x00 ‖ row i),
// a node SHA-256(0x01 ‖ left ‖ right); leaves are padded to a power of two
// with zero hashes. It is immutable once built.
type Tree struct {
	n      int          // rows
	levels [][][32]byte // levels[0] the padded leaves, the last the root
}

// NewTree hashes the n rows of c (row-major little-endian float32 bytes,
// rows in parallel) and builds the tree over them.
func NewTree(c []byte, n int) *Tree {
	width := 1
	for width < n {
		width *= 2
	}
	leaves := make([][32]byte, width)
	stride := len(c) / n
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			leaves[i] = LeafHash(c[i*stride : (i+1)*stride])
		}
	})
	return treeOf(n, leaves)
}

// treeOf builds the tree of n rows over leaves, padded to a power of two.
func treeOf(n int, leaves [][32]byte) *Tree {
	t := &Tree{n: n, levels: [][][32]byte{leaves}}
	for l := leaves; len(l) > 1; {
		up := make([][32]byte, len(l)/2)
		for i := range up {
			up[i] = nodeHash(l[2*i], l[2*i+1])
		}
		t.levels, l = append(t.levels, up), up
	}
	return t
}

// Root returns the root hash.
func (t *Tree) Root() [32]byte { return t.levels[len(t.levels)-1][0] }

// Path returns the sibling hashes from leaf i up to the root.
func (t *Tree) Path(i int) [][32]byte {
	path := make([][32]byte, 0, len(t.levels)-1)
	for _, l := range t.levels[:len(t.levels)-1] {
		path = append(path, l[i^1])
		i /= 2
	}
	return path
}

// Depth returns the length of a path in a tree of n rows.
func Depth(n int) int {
	d := 0
	for w := 1; w < n; w *= 2 {
		d++
	}
	return d
}

// LeafHash is the hash of one row's bytes.
func LeafHash(row []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(row)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func nodeHash(l, r [32]byte) [32]byte {
	var buf [65]byte
	buf[0] = 1
	copy(buf[1:], l[:])
	copy(buf[33:], r[:])
	return sha256.Sum256(buf[:])
}

// VerifyPath reports whether row i, with path, leads to root in a tree of
// n rows.
func VerifyPath(root [32]byte, n, i int, row []byte, path [][32]byte) bool {
	if i < 0 || i >= n || len(path) != Depth(n) {
		return false
	}
	h := LeafHash(row)
	for _, s := range path {
		if i&1 == 0 {
			h = nodeHash(h, s)
		} else {
			h = nodeHash(s, h)
		}
		i /= 2
	}
	return h == root
}
