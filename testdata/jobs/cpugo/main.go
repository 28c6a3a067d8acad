// Command cpugo is a CPU-bound infernet job in Go: the Go twin of
// testdata/jobs/cpu. It renders the same Mandelbrot image with the same
// arithmetic and prints the same line, so the two jobs check each other and
// compare the speed of Go and C guests.
//
// Input (stdin): text "size [maxiter]": the image is size×size pixels over
// [-2, 0.5]×[-1.25, 1.25], each iterating z = z²+c at most maxiter times
// (default 1000). Empty input means "800 1000".
//
// Output (stdout), one line:
//
//	mandelbrot <size>x<size> maxiter <maxiter> iterations <total> hash <fnv>
//
// total is the sum of the iteration counts of all pixels and hash a 32-bit
// FNV-1a over the counts in row-major order.
//
// The job uses strconv and os rather than fmt, which keeps the module small.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o cpugo.wasm .
package main

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// iterations returns how many steps of z = z²+c stay within |z| ≤ 2.
func iterations(cx, cy float64, maxiter uint32) uint32 {
	var zx, zy float64
	var it uint32
	for it < maxiter {
		x2, y2 := zx*zx, zy*zy
		if x2+y2 > 4 {
			break
		}
		// The explicit float64 conversion forbids fusing the multiply and
		// add into one FMA, which the Go spec would otherwise allow on some
		// architectures; the C version must round the same way.
		zy = float64(2*zx*zy) + cy
		zx = x2 - y2 + cx
		it++
	}
	return it
}

func main() {
	size, maxiter := 800, 1000
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: " + err.Error())
	}
	fields := strings.Fields(string(in))
	if len(fields) > 2 {
		fail(`input must be "size [maxiter]"`)
	}
	for i, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil {
			fail(`input must be "size [maxiter]"`)
		}
		if i == 0 {
			size = v
		} else {
			maxiter = v
		}
	}
	if size < 1 || size > 100000 || maxiter < 1 || maxiter > 1000000 {
		fail("size must be 1..100000 and maxiter 1..1000000")
	}

	var total uint64
	hash := uint32(2166136261) // FNV-1a offset basis
	for y := range size {
		cy := -1.25 + 2.5*float64(y)/float64(size)
		for x := range size {
			cx := -2.0 + 2.5*float64(x)/float64(size)
			it := iterations(cx, cy, uint32(maxiter))
			total += uint64(it)
			hash = (hash ^ it) * 16777619 // FNV prime
		}
	}

	h := strconv.FormatUint(uint64(hash), 16)
	os.Stdout.WriteString("mandelbrot " + strconv.Itoa(size) + "x" + strconv.Itoa(size) +
		" maxiter " + strconv.Itoa(maxiter) +
		" iterations " + strconv.FormatUint(total, 10) +
		" hash " + strings.Repeat("0", 8-len(h)) + h + "\n")
}

// fail reports a bad input and exits with status 2.
func fail(msg string) {
	os.Stderr.WriteString("cpugo: " + msg + "\n")
	os.Exit(2)
}
