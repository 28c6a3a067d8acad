// Command gemmproof is a test guest for the host's proof mode: it runs the
// integer GEMMs listed on stdin and prints each one's operands and result,
// so the test can recompute what the proofs must commit to.
//
// Input, one op per line: "FORM m n k flags", FORM being "handle" (gemm on
// i8 tensors; with the accumulate flag, into a zeroed i32 tensor) or "ptr"
// (gemm_i8 on guest memory). Operands are stored as the flags say (A as
// [k,m] with TransA, B as [n,k] with TransB) and filled from an integer PRNG
// seeded by the line number.
//
// Output, one line per op: "i errno | A… | B… | C…" (errno 0 on success;
// C is all zeros when the op failed).
//
// The host tests build it with GOOS=wasip1 GOARCH=wasm go build.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/tensor"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := 0; in.Scan(); i++ {
		var form string
		var m, n, k int
		var flags tensor.GemmFlags
		if _, err := fmt.Sscan(in.Text(), &form, &m, &n, &k, &flags); err != nil {
			fmt.Fprintln(os.Stderr, "bad line:", in.Text())
			os.Exit(2)
		}
		seed := uint32(2654435761 * uint32(i+1))
		a, b := fill(m*k, &seed), fill(k*n, &seed)
		c, err := run(form, m, n, k, flags, a, b)
		var e *tensor.Error
		errno := abi.OK
		if errors.As(err, &e) {
			errno = e.Errno
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Fprintf(out, "%d %d | %s | %s | %s\n", i, errno, join(a), join(b), join(c))
		out.Flush() // a later op may stop the job
	}
}

// run performs one op and returns C.
func run(form string, m, n, k int, flags tensor.GemmFlags, a, b []int8) ([]int32, error) {
	c := make([]int32, m*n)
	if form == "ptr" {
		return c, tensor.GemmI8(m, n, k, a, b, c, flags)
	}
	da, db := []int{m, k}, []int{k, n}
	if flags&tensor.TransA != 0 {
		da = []int{k, m}
	}
	if flags&tensor.TransB != 0 {
		db = []int{n, k}
	}
	ta, err := tensor.FromI8(a, da...)
	if err != nil {
		return nil, err
	}
	tb, err := tensor.FromI8(b, db...)
	if err != nil {
		return nil, err
	}
	if flags&tensor.Accumulate != 0 {
		tc, err := tensor.FromI32(c, m, n)
		if err != nil {
			return nil, err
		}
		if err := tensor.GemmInto(tc, ta, tb, flags); err != nil {
			return c, err
		}
		return tc.I32()
	}
	tc, err := tensor.Gemm(ta, tb, flags)
	if err != nil {
		return c, err
	}
	return tc.I32()
}

// fill returns n values of a xorshift PRNG, as i8.
func fill(n int, s *uint32) []int8 {
	out := make([]int8, n)
	for i := range out {
		*s ^= *s << 13
		*s ^= *s >> 17
		*s ^= *s << 5
		out[i] = int8(*s >> 24)
	}
	return out
}

func join[T int8 | int32](v []T) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}
