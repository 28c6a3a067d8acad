package circuits

import (
	"fmt"
	"io"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/witness"
	"github.com/consensys/gnark/frontend"
)

// The benchmarks below report, per template: constraints, setup time
// (setup-s, one test-only groth16.Setup), prove time (ns/op), median verify
// time over 25 runs (verify-ms), and the sizes of WriteRawTo's proving key
// (pk-MB), verifying key (vk-kB) and proof (proof-B). On a shared machine wall
// times depend on the load, so setup-cpu-s and prove-cpu-s add the process'
// CPU time (all threads) per setup and per proof. Setups take minutes for
// the large templates; run with -timeout 60m, e.g.
//
//	go test ./circuits -run '^$' -bench 'GEMM|Exchange' -benchtime 5x -timeout 60m

func benchGroth16(b *testing.B, circuit frontend.Circuit, full, pub witness.Witness) {
	ccs := compile(b, circuit)
	start, cpu := time.Now(), cpuTime()
	pk, vk, err := groth16.Setup(ccs)
	if err != nil {
		b.Fatal(err)
	}
	setup, setupCPU := time.Since(start), cpuTime()-cpu

	var proof groth16.Proof
	cpu, proofs := cpuTime(), 0
	for b.Loop() {
		if proof, err = groth16.Prove(ccs, pk, full); err != nil {
			b.Fatal(err)
		}
		proofs++
	}
	proveCPU := (cpuTime() - cpu) / time.Duration(proofs)

	b.StopTimer()
	verify := make([]time.Duration, 25)
	for i := range verify {
		start := time.Now()
		if err := groth16.Verify(proof, vk, pub); err != nil {
			b.Fatal(err)
		}
		verify[i] = time.Since(start)
	}
	slices.Sort(verify)

	b.ReportMetric(float64(ccs.GetNbConstraints()), "constraints")
	b.ReportMetric(setup.Seconds(), "setup-s")
	b.ReportMetric(setupCPU.Seconds(), "setup-cpu-s")
	b.ReportMetric(proveCPU.Seconds(), "prove-cpu-s")
	b.ReportMetric(float64(verify[len(verify)/2].Microseconds())/1e3, "verify-ms")
	b.ReportMetric(float64(rawSize(b, pk))/1e6, "pk-MB")
	b.ReportMetric(float64(rawSize(b, vk))/1e3, "vk-kB")
	b.ReportMetric(float64(rawSize(b, proof)), "proof-B")
}

// cpuTime returns the user+system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawWriter is implemented by Groth16 keys and proofs.
type rawWriter interface {
	WriteRawTo(io.Writer) (int64, error)
}

func rawSize(b *testing.B, v rawWriter) int64 {
	n, err := v.WriteRawTo(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// benchMatrices returns A, B with entries of int32 magnitude (|x| ≤ 2^31/n
// for A, 1 for B, so C fits in int32) and C = A·B.
func benchMatrices(b *testing.B, n int) (x, y, z []int32) {
	x, _, _ = randomMatrices(b, n, math.MaxInt32/int32(n), 7)
	_, y, _ = randomMatrices(b, n, 1, 8)
	return x, y, matMul(b, n, x, y)
}

func BenchmarkGEMM(b *testing.B) {
	for _, n := range []int{16, 32, 64, 128} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			g, _ := NewGEMM(n)
			x, y, z := benchMatrices(b, n)
			full, _ := g.Witness(x, y, z)
			pub, _ := g.PublicWitness(x, y, z)
			benchGroth16(b, g.Circuit(), full, pub)
		})
	}
}

func BenchmarkCommittedGEMM(b *testing.B) {
	for _, n := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			g, _ := NewCommittedGEMM(n)
			x, y, z := benchMatrices(b, n)
			full, _ := g.Witness(x, y, z)
			dx, _ := MatrixDigest(n, x)
			dy, _ := MatrixDigest(n, y)
			dz, _ := MatrixDigest(n, z)
			pub, _ := g.PublicWitness(dx, dy, dz)
			benchGroth16(b, g.Circuit(), full, pub)
		})
	}
}

func BenchmarkExchange(b *testing.B) {
	for _, size := range []int{32, 256} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			x, _ := NewExchange(size)
			key, pt := randomKey(b), randomBytes(b, size)
			full, _ := x.Witness(key, pt)
			pub, _ := full.Public()
			benchGroth16(b, x.Circuit(), full, pub)
		})
	}
}

// BenchmarkNative measures the out-of-circuit functions a client, provider
// or aggregator runs.
func BenchmarkNative(b *testing.B) {
	for _, n := range []int{16, 64, 128} {
		m, _, _ := randomMatrices(b, n, math.MaxInt32, 9)
		b.Run(fmt.Sprintf("MatrixDigest/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := MatrixDigest(n, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	x, _ := NewExchange(256)
	key, pt := randomKey(b), randomBytes(b, 256)
	b.Run("Exchange256/Commit", func(b *testing.B) {
		for b.Loop() {
			x.Commit(pt)
		}
	})
	b.Run("Exchange256/Encrypt", func(b *testing.B) {
		for b.Loop() {
			x.Encrypt(key, pt)
		}
	})
}
