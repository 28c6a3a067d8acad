package meter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

// BenchmarkInstrument measures rewriting real modules.
func BenchmarkInstrument(b *testing.B) {
	for _, g := range []struct {
		name string
		wasm func(testing.TB) []byte
	}{{"go", goGuest}, {"c", cGuest}} {
		b.Run(g.name, func(b *testing.B) {
			wasm := g.wasm(b)
			b.SetBytes(int64(len(wasm)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Instrument(wasm, Options{MaxMemoryPages: 1024}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// guestKernels are CPU-bound guests taking 0.1 to 0.3 s each.
var guestKernels = []struct {
	name string
	wasm func(testing.TB) []byte
	args []string
}{
	{"c-mandel", cGuest, []string{"mandel", "600"}},
	{"c-sha", cGuest, []string{"sha", "150000"}},
	{"c-sort", cGuest, []string{"sort", "300000"}},
	{"go", goGuest, []string{"100000"}},
	// The project's CPU-bound example jobs (about 1 s each, default input).
	{"job-cpu", jobGuest("cpu"), nil},
	{"job-cpugo", jobGuest("cpugo"), nil},
}

// jobGuest returns a reader of testdata/jobs/NAME/NAME.wasm of the repository.
func jobGuest(name string) func(testing.TB) []byte {
	return func(tb testing.TB) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "jobs", name, name+".wasm"))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
}

// BenchmarkGuest runs CPU-bound guests uninstrumented ("plain"),
// instrumented ("metered") and uninstrumented under
// WithCloseOnContextDone ("closeOnDone"), side by side. Compilation and
// instantiation are not timed. Use a small -benchtime such as 3x.
func BenchmarkGuest(b *testing.B) {
	for _, k := range guestKernels {
		b.Run(k.name+"/plain", func(b *testing.B) {
			g := newBenchGuest(b, k.wasm(b), k.args, false, nil)
			g.bench(b)
		})
		b.Run(k.name+"/metered", func(b *testing.B) {
			g := newBenchGuest(b, k.wasm(b), k.args, true, nil)
			g.bench(b)
		})
		b.Run(k.name+"/closeOnDone", func(b *testing.B) {
			cfg := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true)
			g := newBenchGuest(b, k.wasm(b), k.args, false, cfg)
			g.bench(b)
		})
	}
}

// BenchmarkGuestRatio alternates plain and metered runs of each guest and
// reports the ratio of their fastest runs, which is steadier than comparing
// separate benchmarks on a busy machine.
func BenchmarkGuestRatio(b *testing.B) {
	for _, k := range guestKernels {
		b.Run(k.name, func(b *testing.B) {
			plain := newBenchGuest(b, k.wasm(b), k.args, false, nil)
			metered := newBenchGuest(b, k.wasm(b), k.args, true, nil)
			best := [2]time.Duration{1 << 62, 1 << 62}
			for b.Loop() {
				for i, g := range []*benchGuest{plain, metered} {
					if d := g.run(b); d < best[i] {
						best[i] = d
					}
				}
			}
			b.ReportMetric(float64(best[0].Nanoseconds()), "plain-ns")
			b.ReportMetric(float64(best[1].Nanoseconds()), "metered-ns")
			b.ReportMetric(float64(best[1])/float64(best[0]), "ratio")
		})
	}
}

// benchGuest runs one WASI guest repeatedly in one runtime.
type benchGuest struct {
	e    *env
	wasm []byte
	args []string
}

func newBenchGuest(b *testing.B, wasm []byte, args []string, metered bool, cfg wazero.RuntimeConfig) *benchGuest {
	var host *fuelHost
	if metered {
		wasm, _ = instrument(b, wasm, Options{})
		host = &fuelHost{grant: 1 << 24}
	}
	g := &benchGuest{e: newEnv(b, host, cfg), wasm: wasm, args: args}
	// A deadline that never fires, so closeOnDone has something to watch.
	ctx, cancel := context.WithTimeout(g.e.ctx, time.Hour)
	b.Cleanup(cancel)
	g.e.ctx = ctx
	g.run(b) // compile and warm up
	return g
}

// run instantiates the guest and times its _start.
func (g *benchGuest) run(b *testing.B) time.Duration {
	mod, stdout := g.e.instantiate(b, g.wasm, g.args...)
	start := time.Now()
	_, code, err := runStart(g.e.ctx, mod, stdout)
	d := time.Since(start)
	if err != nil || code != 0 {
		b.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	return d
}

// bench times runs of the guest, without instantiation.
func (g *benchGuest) bench(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		total += g.run(b)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "run-ns/op")
}
