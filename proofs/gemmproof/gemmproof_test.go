package gemmproof

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/proofs/testkeys"
)

// keys returns the test keys of template n.
func keys(tb testing.TB, n int) (groth16.ProvingKey, groth16.VerifyingKey) {
	tb.Helper()
	ccs, err := ConstraintSystem(n)
	if err != nil {
		tb.Fatal(err)
	}
	pk, vk, err := testkeys.Setup(ccs)
	if err != nil {
		tb.Fatalf("setup template %d: %v", n, err)
	}
	return pk, vk
}

// randomOp returns stored-layout i8 operands of an m×n×k GEMM and their
// exact product.
func randomOp(m, n, k int, flags int32, seed uint64) (a, b []int8, c []int32) {
	rng := rand.New(rand.NewPCG(seed, 7))
	a, b = make([]int8, m*k), make([]int8, k*n)
	for i := range a {
		a[i] = int8(rng.IntN(256) - 128)
	}
	for i := range b {
		b[i] = int8(rng.IntN(256) - 128)
	}
	at := func(i, j int) int32 { // op(A)[i,j]
		if flags&1 != 0 {
			return int32(a[j*m+i])
		}
		return int32(a[i*k+j])
	}
	bt := func(i, j int) int32 {
		if flags&2 != 0 {
			return int32(b[j*k+i])
		}
		return int32(b[i*n+j])
	}
	c = make([]int32, m*n)
	for i := range m {
		for j := range n {
			for l := range k {
				c[i*n+j] += at(i, l) * bt(l, j)
			}
		}
	}
	return a, b, c
}

func TestFit(t *testing.T) {
	tests := []struct {
		m, n, k int
		want    int
		ok      bool
	}{
		{1, 1, 1, 16, true},
		{8, 8, 8, 16, true},
		{16, 2, 3, 16, true},
		{20, 12, 16, 32, true},
		{3, 3, 33, 64, true},
		{64, 64, 64, 64, true},
		{65, 1, 1, 0, false},
	}
	for _, tt := range tests {
		got, ok := Fit(Templates(), tt.m, tt.n, tt.k)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Fit(%d,%d,%d) = %d, %v, want %d, %v", tt.m, tt.n, tt.k, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNewOp checks that recording applies transposes and padding: the padded
// C is the product of the padded A and B for every flag combination.
func TestNewOp(t *testing.T) {
	for flags := int32(0); flags < 4; flags++ {
		t.Run(fmt.Sprintf("flags=%d", flags), func(t *testing.T) {
			const m, n, k, tn = 5, 3, 7, 16
			a, b, c := randomOp(m, n, k, flags, uint64(flags))
			op, err := NewOp(tn, m, n, k, flags, a, b, c)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tn {
				for j := range tn {
					var s int32
					for l := range tn {
						s += op.A[i*tn+l] * op.B[l*tn+j]
					}
					if s != op.C[i*tn+j] {
						t.Fatalf("padded (%d,%d): A·B = %d, C = %d", i, j, s, op.C[i*tn+j])
					}
				}
			}
		})
	}
	bad := []struct {
		name              string
		template, m, n, k int
		la, lb, lc        int
	}{
		{"too large", 16, 17, 1, 1, 17, 1, 17},
		{"zero dim", 16, 0, 1, 1, 0, 1, 0},
		{"short a", 16, 2, 2, 2, 3, 4, 4},
		{"short c", 16, 2, 2, 2, 4, 4, 3},
	}
	for _, tt := range bad {
		_, err := NewOp(tt.template, tt.m, tt.n, tt.k, 0, make([]int8, tt.la), make([]int8, tt.lb), make([]int32, tt.lc))
		if !errors.Is(err, ErrShape) {
			t.Errorf("%s: err = %v, want ErrShape", tt.name, err)
		}
	}
}

// TestProveVerify proves one op at n = 16 and checks that the proof
// verifies, that each tampered field fails, and that a wrong product
// cannot be proven.
func TestProveVerify(t *testing.T) {
	pk, vk := keys(t, 16)
	a, b, c := randomOp(8, 8, 8, 2, 1)
	op, err := NewOp(16, 8, 8, 8, 2, a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prove(pk, 3, op)
	if err != nil {
		t.Fatal(err)
	}
	if p.Index != 3 || p.Template != 16 || p.M != 8 || p.Flags != 2 {
		t.Errorf("proof header %+v", p)
	}
	if err := Verify(vk, p); err != nil {
		t.Fatalf("verify: %v", err)
	}
	tamper := []struct {
		name string
		edit func(p *Proof)
		want error
	}{
		{"digest A", func(p *Proof) { p.DigestA[31] ^= 1 }, ErrInvalid},
		{"digest B", func(p *Proof) { p.DigestB[31] ^= 1 }, ErrInvalid},
		{"digest C", func(p *Proof) { p.DigestC[30] ^= 1 }, ErrInvalid},
		{"digests swapped", func(p *Proof) { p.DigestA, p.DigestB = p.DigestB, p.DigestA }, ErrInvalid},
		{"non-canonical digest", func(p *Proof) { p.DigestC[0] = 0xff }, ErrInvalid},
		{"proof byte", func(p *Proof) { p.Groth16[40] ^= 1 }, ErrInvalid},
		{"proof truncated", func(p *Proof) { p.Groth16 = p.Groth16[:len(p.Groth16)-1] }, ErrInvalid},
		{"not a template", func(p *Proof) { p.Template = 17 }, ErrShape},
		{"shape past template", func(p *Proof) { p.M = 17 }, ErrShape},
	}
	for _, tt := range tamper {
		bad := p
		bad.Groth16 = slices.Clone(p.Groth16)
		tt.edit(&bad)
		if err := Verify(vk, bad); !errors.Is(err, tt.want) {
			t.Errorf("%s: verify = %v, want %v", tt.name, err, tt.want)
		}
	}
	op.C[0]++
	if _, err := Prove(pk, 0, op); err == nil {
		t.Error("proved a wrong product")
	}
}

// BenchmarkProve measures Prove per template size (keys are made on first
// use and cached on disk; n = 64 takes minutes the first time).
func BenchmarkProve(b *testing.B) {
	for _, n := range Templates() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			pk, vk := keys(b, n)
			x, y, z := randomOp(n, n, n, 0, 5)
			op, err := NewOp(n, n, n, n, 0, x, y, z)
			if err != nil {
				b.Fatal(err)
			}
			var p Proof
			for b.Loop() {
				if p, err = Prove(pk, 0, op); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := Verify(vk, p); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkVerify measures Verify per template size, proof decoding
// included.
func BenchmarkVerify(b *testing.B) {
	for _, n := range Templates() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			pk, vk := keys(b, n)
			x, y, z := randomOp(n, n, n, 0, 5)
			op, err := NewOp(n, n, n, n, 0, x, y, z)
			if err != nil {
				b.Fatal(err)
			}
			p, err := Prove(pk, 0, op)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := Verify(vk, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.Groth16)), "proof-bytes")
		})
	}
}
