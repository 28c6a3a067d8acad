package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/infernet/infernet/host/internal/meter"
)

// commandModule encodes a WASI command module with one page of memory and
// one function of type () -> () per body (function 0 is _start). Each body
// is the function's instructions without locals or the final end.
func commandModule(bodies ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	section := func(id byte, content []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(content)))
		out = append(out, content...)
	}
	section(1, []byte{1, 0x60, 0, 0}) // type 0: () -> ()
	funcs := appendU32(nil, uint32(len(bodies)))
	section(3, append(funcs, make([]byte, len(bodies))...)) // all of type 0
	section(5, []byte{1, 0, 1})                             // memory of one page
	section(7, []byte{2, 6, '_', 's', 't', 'a', 'r', 't', 0, 0, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0})
	code := appendU32(nil, uint32(len(bodies)))
	for _, b := range bodies {
		code = appendU32(code, uint32(len(b)+2))
		code = append(code, 0) // no locals
		code = append(code, b...)
		code = append(code, 0x0b)
	}
	section(10, code)
	return out
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func repeat(b []byte, n int) []byte { return []byte(strings.Repeat(string(b), n)) }

// Function bodies that stress wazero's compiler; n is the count of the
// construct.
func nestedBlocks(n int) []byte {
	return append(repeat([]byte{0x02, 0x40}, n), repeat([]byte{0x0b}, n)...)
}
func siblingBlocks(n int) []byte { return repeat([]byte{0x02, 0x40, 0x0b}, n) }
func nestedLoops(n int) []byte {
	return append(repeat([]byte{0x03, 0x40}, n), repeat([]byte{0x0b}, n)...)
}
func brIfs(n int) []byte {
	return append(append([]byte{0x02, 0x40}, repeat([]byte{0x41, 0, 0x0d, 0}, n)...), 0x0b)
}
func loads(n int) []byte { return repeat([]byte{0x41, 0, 0x28, 2, 0, 0x1a}, n) } // i32.load 0; drop
func calls(n int) []byte { return repeat([]byte{0x10, 1}, n) }                   // call a function other than _start

// hostileNesting is the reported attack: ~300 KB of nested blocks, which
// wazero v1.11.0 compiled for tens of seconds to minutes of CPU.
func hostileNesting() []byte { return commandModule(nestedBlocks(100_000)) }

// TestStructuralLimits: modules over the compile-cost limits are refused,
// quickly, with ErrInvalidModule and a message naming the limit; modules
// just under them are accepted by the meter (compiling those is measured
// by BenchmarkCompileWorst).
func TestStructuralLimits(t *testing.T) {
	empty := []byte{}
	many := func(n int, body []byte) [][]byte {
		b := make([][]byte, n)
		for i := range b {
			b[i] = body
		}
		return b
	}
	tests := []struct {
		name   string
		module []byte
		want   string // "" : accepted
	}{
		{"hostile nesting", hostileNesting(), fmt.Sprintf("control nesting %d over limit %d", meter.MaxNesting+1, meter.MaxNesting)},
		{"nesting at the limit", commandModule(nestedBlocks(meter.MaxNesting)), ""},
		{"blocks at the control cost limit", commandModule(siblingBlocks(1 << 14)), ""},
		{"blocks over the control cost limit", commandModule(siblingBlocks(1<<14 + 1)), "control cost 268468225 over limit 268435456"},
		{"loops count 4", commandModule(repeat([]byte{0x03, 0x40, 0x0b}, 1<<12+1)), "control cost"},
		{"br_ifs count 2", commandModule(brIfs(1 << 13)), "control cost"}, // the enclosing block makes 2^14+1
		{"cost summed over functions", commandModule(siblingBlocks(1<<13), siblingBlocks(1<<13), siblingBlocks(1<<13), siblingBlocks(1<<13), siblingBlocks(1)), "control cost"},
		{"function at the size limit", commandModule(loads((meter.MaxFunctionBytes - 2) / 6)), ""},
		{"function over the size limit", commandModule(loads(meter.MaxFunctionBytes/6 + 1)), "body of 524294 bytes over limit 524288"},
		{"code over the limit", commandModule(many(9, loads(meter.MaxFunctionBytes/6-1))...), "code section of"},
		{"functions over the limit", commandModule(many(meter.MaxFunctions+1, empty)...), "65537 functions over limit 65536"},
	}
	sb := newSandbox(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if _, _, err := meter.Instrument(tt.module, meter.Options{}); err != nil {
					t.Fatalf("refused under the limits: %v", err)
				}
				return
			}
			_, err := sb.Compile(context.Background(), tt.module, NewJobConfig())
			if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidModule with %q", err, tt.want)
			}
		})
	}
}

// BenchmarkCompileWorst compiles, in a fresh sandbox each time (no cache),
// the costliest modules the structural limits let through, one per kind of
// cost, next to a Go guest and the refused hostile module. Run it with
// -benchtime=1x: each op is one compile.
func BenchmarkCompileWorst(b *testing.B) {
	// fill returns as many of the largest bodies of one instruction of
	// width bytes as the code limit allows.
	fill := func(body func(int) []byte, width int) [][]byte {
		one := body((meter.MaxFunctionBytes - 8) / width)
		var bodies [][]byte
		for size := 16; size+len(one)+8 < meter.MaxCodeBytes; size += len(one) + 8 {
			bodies = append(bodies, one)
		}
		return bodies
	}
	modules := []struct {
		name string
		wasm []byte
	}{
		{"go-guest", readFile(b, "../testdata/jobs/mlp/mlp.wasm")},
		{"hostile-nesting-300KB", hostileNesting()},
		{"blocks-16384", commandModule(siblingBlocks(1 << 14))},
		{"nested-4096", commandModule(nestedBlocks(meter.MaxNesting), nestedBlocks(meter.MaxNesting), nestedBlocks(meter.MaxNesting))},
		{"loops-4096", commandModule(nestedLoops(1 << 12))},
		{"ifs-8192", commandModule(repeat([]byte{0x41, 0, 0x04, 0x40, 0x0b}, 1<<13))},
		{"br_ifs-8191", commandModule(brIfs(1<<13 - 1))},
		{"loads-4MiB", commandModule(fill(loads, 6)...)},
		{"calls-4MiB", commandModule(append([][]byte{calls(1)}, fill(calls, 2)...)...)},
		{"empty-functions-65536", commandModule(make([][]byte, meter.MaxFunctions)...)},
		{"loads-and-blocks", commandModule(append(fill(loads, 6), siblingBlocks(1<<14))...)},
	}
	only := os.Getenv("COMPILE_ONLY")
	for _, m := range modules {
		if only != "" && !strings.Contains(m.name, only) {
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			var err error
			for b.Loop() {
				sb := newSandbox(b, Config{})
				_, err = sb.Compile(context.Background(), m.wasm, NewJobConfig())
				sb.Close(context.Background())
			}
			if err != nil && !errors.Is(err, ErrInvalidModule) {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(m.wasm)), "bytes")
			if err != nil {
				b.ReportMetric(1, "refused")
			}
		})
	}
}
