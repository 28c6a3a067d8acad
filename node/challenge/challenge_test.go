package challenge

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/reference"
)

func nonceOf(b byte) (n [32]byte) {
	for i := range n {
		n[i] = b + byte(i)
	}
	return n
}

// TestDerivation: rows are a function of (nonce, matrix, row) only, in
// range, and Matrix agrees with Row.
func TestDerivation(t *testing.T) {
	const n = 100 // not a multiple of 16
	x, y := nonceOf(1), nonceOf(2)
	r1, r2 := make([]int8, n), make([]int8, n)
	Row(x, MatrixA, 7, r1)
	Row(x, MatrixA, 7, r2)
	if !bytes.Equal(i8bytes(r1), i8bytes(r2)) {
		t.Fatal("same nonce, different rows")
	}
	for _, tc := range []struct {
		name  string
		nonce [32]byte
		m     byte
		row   int
	}{{"other nonce", y, MatrixA, 7}, {"other matrix", x, MatrixB, 7}, {"other row", x, MatrixA, 8}} {
		Row(tc.nonce, tc.m, tc.row, r2)
		if bytes.Equal(i8bytes(r1), i8bytes(r2)) {
			t.Errorf("%s: same row", tc.name)
		}
	}
	seen := map[int8]bool{}
	m := Matrix(x, MatrixB, n)
	for r := range n {
		Row(x, MatrixB, r, r1)
		for j, v := range r1 {
			if v < -8 || v > 7 {
				t.Fatalf("entry %d out of range", v)
			}
			seen[v] = true
			if f := math.Float32frombits(binary.LittleEndian.Uint32(m[4*(r*n+j):])); f != float32(v) {
				t.Fatalf("Matrix[%d,%d] = %v, Row says %d", r, j, f, v)
			}
		}
	}
	if len(seen) != 16 {
		t.Errorf("%d distinct values, want 16", len(seen))
	}
}

func i8bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// TestExact: C from the reference and the fast CPU backend is bit for bit
// the naive product, and ExpectedRows gives the same rows.
func TestExact(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		b    tensor.Backend
		n    int
	}{
		{"reference 64", reference.New(reference.Config{}), 64},
		{"reference 97", reference.New(reference.Config{}), 97},
		{"cpu 128", cpu.New(cpu.Config{}), 128},
		{"cpu 200", cpu.New(cpu.Config{}), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nonce, n := nonceOf(byte(tc.n)), tc.n
			tree, c, _, err := Compute(ctx, tc.b, nonce, n)
			if err != nil {
				t.Fatal(err)
			}
			naive := naiveProduct(nonce, n)
			if !bytes.Equal(c, naive) {
				t.Fatal("C differs from the naive product")
			}
			if tree.Root() != NewTree(naive, n).Root() {
				t.Fatal("root differs")
			}
			rows := []int{0, n / 2, n - 1}
			for k, w := range ExpectedRows(nonce, n, rows) {
				if !bytes.Equal(w, naive[4*n*rows[k]:4*n*(rows[k]+1)]) {
					t.Fatalf("ExpectedRows row %d differs", rows[k])
				}
			}
		})
	}
}

// naiveProduct is C = A·B by the textbook loop in float32.
func naiveProduct(nonce [32]byte, n int) []byte {
	a, b := make([][]int8, n), make([][]int8, n)
	for i := range n {
		a[i], b[i] = make([]int8, n), make([]int8, n)
		Row(nonce, MatrixA, i, a[i])
		Row(nonce, MatrixB, i, b[i])
	}
	out := make([]byte, 4*n*n)
	for i := range n {
		for j := range n {
			var s float32
			for k := range n {
				s += float32(a[i][k]) * float32(b[k][j])
			}
			binary.LittleEndian.PutUint32(out[4*(i*n+j):], math.Float32bits(s))
		}
	}
	return out
}

// TestMerkle: every path verifies; a changed row, path, index or root
// does not.
func TestMerkle(t *testing.T) {
	for _, n := range []int{16, 17, 31, 64} {
		c := make([]byte, 4*n*n)
		rand.NewChaCha8(nonceOf(byte(n))).Read(c)
		tree := NewTree(c, n)
		root := tree.Root()
		for i := range n {
			row := c[4*n*i : 4*n*(i+1)]
			path := tree.Path(i)
			if !VerifyPath(root, n, i, row, path) {
				t.Fatalf("n=%d row %d: honest path fails", n, i)
			}
			bad := append([]byte(nil), row...)
			bad[3] ^= 1
			tampered := append([][32]byte(nil), path...)
			tampered[len(tampered)-1][0] ^= 1
			for _, tc := range []struct {
				name string
				ok   bool
			}{
				{"row", VerifyPath(root, n, i, bad, path)},
				{"path", VerifyPath(root, n, i, row, tampered)},
				{"short path", VerifyPath(root, n, i, row, path[1:])},
				{"index", VerifyPath(root, n, (i+1)%n, row, path)},
				{"out of range", VerifyPath(root, n, n, row, path)},
			} {
				if tc.ok {
					t.Fatalf("n=%d row %d: tampered %s verifies", n, i, tc.name)
				}
			}
		}
	}
}

// TestParams: zero means defaults; sizes are clamped.
func TestParams(t *testing.T) {
	for _, tc := range []struct {
		in      Params
		n, rows int
	}{
		{Params{}, DefaultN, DefaultRows},
		{Params{N: 1 << 20, Rows: 1000}, MaxN, MaxRows},
		{Params{N: 3, Rows: 100}, MinN, MinN},
	} {
		p := tc.in.WithDefaults()
		if p.N != tc.n || p.Rows != tc.rows || p.Deadline != DefaultDeadline || p.Timeout != DefaultTimeout {
			t.Errorf("%+v: got %+v", tc.in, p)
		}
	}
}
