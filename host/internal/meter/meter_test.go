package meter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// guestCase is a module and a way to run it that produces comparable output.
type guestCase struct {
	name  string
	wasm  func(testing.TB) []byte
	args  []string // run _start with these arguments
	calls []string // or call these exports, without arguments, in order
	env   bool     // needs the "env" module
}

func featuresWasm(tb testing.TB) []byte { return wat(tb, "features") }
func threadsWasm(tb testing.TB) []byte  { return wat(tb, "threads", "--enable-threads") }
func fuelWasm(tb testing.TB) []byte     { return wat(tb, "fuel") }

var guestCases = []guestCase{
	{name: "wat/features", wasm: featuresWasm, calls: []string{"calls", "simd", "bulk", "multi", "imported"}, env: true},
	{name: "wat/threads", wasm: threadsWasm, calls: []string{"atomics"}},
	{name: "wat/fuel", wasm: fuelWasm, calls: []string{"straight"}},
	{name: "c/mandel", wasm: cGuest, args: []string{"mandel", "100"}},
	{name: "c/sha", wasm: cGuest, args: []string{"sha", "1000"}},
	{name: "c/sort", wasm: cGuest, args: []string{"sort", "10000"}},
	{name: "go", wasm: goGuest, args: []string{"2000"}},
}

// run instantiates wasm in e and runs tc, returning everything observable.
func (tc guestCase) run(tb testing.TB, e *env, wasm []byte) (string, api.Module) {
	tb.Helper()
	if tc.env {
		e.addEnvModule(tb)
	}
	mod, stdout := e.instantiate(tb, wasm, tc.args...)
	if tc.args != nil {
		out, code, err := runStart(e.ctx, mod, stdout)
		if err != nil {
			tb.Fatalf("_start: %v", err)
		}
		return fmt.Sprintf("%sexit %d", out, code), mod
	}
	var out strings.Builder
	for _, name := range tc.calls {
		res, err := mod.ExportedFunction(name).Call(e.ctx)
		fmt.Fprintf(&out, "%s: %v %v\n", name, res, err)
	}
	return out.String(), mod
}

// TestInstrumentedGuestsRunTheSame runs every guest before and after
// instrumentation and compares everything they print or return.
func TestInstrumentedGuestsRunTheSame(t *testing.T) {
	for _, tc := range guestCases {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.wasm(t)
			metered, info := instrument(t, orig, Options{})
			if info.Functions == 0 || info.Checks < info.Functions {
				t.Errorf("Info = %+v: want functions and at least one check each", info)
			}

			want, _ := tc.run(t, newEnv(t, nil, nil), orig)
			host := &fuelHost{grant: 1 << 20}
			got, mod := tc.run(t, newEnv(t, host, nil), metered)
			if got != want {
				t.Errorf("instrumented output differs\n got: %q\nwant: %q", got, want)
			}
			if host.consumed(mod) <= 0 {
				t.Errorf("ticks = %d, consumed = %d: metering did not run", host.ticks, host.consumed(mod))
			}
			t.Logf("%s: consumed %d fuel, %d ticks, %+v", strings.TrimSpace(want), host.consumed(mod), host.ticks, info)
		})
	}
}

// TestFeaturesResults pins what features.wat computes, so that the test
// above cannot pass by both runs being equally wrong.
func TestFeaturesResults(t *testing.T) {
	metered, _ := instrument(t, featuresWasm(t), Options{})
	got, _ := guestCases[0].run(t, newEnv(t, &fuelHost{grant: 1 << 20}, nil), metered)
	// The digits of the table entries called, then ref.is_null + table.size,
	// then $started + host_add(100, 200).
	want := "calls: [12734836185132342] <nil>\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want prefix %q", got, want)
	}
}

// TestRunawayGuestsAreStopped checks that loops and loop-free recursion pass
// checks often enough for tick to stop them close to the budget.
func TestRunawayGuestsAreStopped(t *testing.T) {
	const budget, grant = 5_000_000, 100_000
	tests := []struct {
		name string
		wasm func(testing.TB) []byte
		call string
		arg  uint64
		args []string
	}{
		{name: "infinite loop", wasm: fuelWasm, call: "spin"},
		{name: "infinite loop with parameters", wasm: fuelWasm, call: "spin_params"},
		{name: "exponential recursion", wasm: fuelWasm, call: "fan", arg: 60},
		{name: "exponential indirect recursion", wasm: fuelWasm, call: "fan_indirect", arg: 60},
		{name: "c mandel", wasm: cGuest, args: []string{"mandel", "100000"}},
		{name: "go", wasm: goGuest, args: []string{"1000000000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			metered, _ := instrument(t, tc.wasm(t), Options{})
			host := &fuelHost{grant: grant, budget: budget}
			e := newEnv(t, host, nil)
			mod, stdout := e.instantiate(t, metered, tc.args...)
			var code uint32
			if tc.args != nil {
				var err error
				if _, code, err = runStart(e.ctx, mod, stdout); err != nil {
					t.Fatal(err)
				}
			} else {
				var params []uint64
				if tc.arg != 0 {
					params = append(params, tc.arg)
				}
				_, err := mod.ExportedFunction(tc.call).Call(e.ctx, params...)
				var exit *sys.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("Call error = %v, want an exit error", err)
				}
				code = exit.ExitCode()
			}
			if code != exitBudget {
				t.Fatalf("exit code %d, want %d", code, exitBudget)
			}
			// tick stops the guest at the first check past the budget.
			if used := host.consumed(mod); used <= budget || used > budget+grant {
				t.Errorf("stopped after %d fuel, want just over %d", used, budget)
			}
		})
	}
}

// TestFuelAccounting checks exact costs on guests with known shapes.
func TestFuelAccounting(t *testing.T) {
	tests := []struct {
		call string
		args []uint64
		want int64
	}{
		{"straight", nil, 4},
		{"count", []uint64{1}, 2 + 7},
		{"count", []uint64{1000}, 2 + 7*1000},
		{"nested", []uint64{3, 5}, 2 + 3*(9+5*6)},
		{"nested", []uint64{10, 100}, 2 + 10*(9+100*6)},
		{"fan", []uint64{0}, 12},
		{"fan", []uint64{10}, 12 * (1<<11 - 1)},
	}
	metered, _ := instrument(t, fuelWasm(t), Options{})
	host := &fuelHost{grant: 1 << 40}
	e := newEnv(t, host, nil)
	mod, _ := e.instantiate(t, metered)
	for _, tc := range tests {
		before := host.consumed(mod)
		if _, err := mod.ExportedFunction(tc.call).Call(e.ctx, tc.args...); err != nil {
			t.Fatalf("%s%v: %v", tc.call, tc.args, err)
		}
		if got := host.consumed(mod) - before; got != tc.want {
			t.Errorf("%s%v consumed %d, want %d", tc.call, tc.args, got, tc.want)
		}
	}
}

// TestFuelIsDeterministic checks that real guests consume the same fuel on
// every run, and more for more work.
func TestFuelIsDeterministic(t *testing.T) {
	tests := []struct {
		name        string
		wasm        func(testing.TB) []byte
		small, more []string
	}{
		{"c", cGuest, []string{"sha", "1000"}, []string{"sha", "2000"}},
		{"go", goGuest, []string{"1000"}, []string{"2000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			metered, _ := instrument(t, tc.wasm(t), Options{})
			consumed := func(args []string) int64 {
				host := &fuelHost{grant: 1 << 16}
				e := newEnv(t, host, nil)
				mod, stdout := e.instantiate(t, metered, args...)
				if _, code, err := runStart(e.ctx, mod, stdout); err != nil || code != 0 {
					t.Fatalf("exit %d, %v", code, err)
				}
				return host.consumed(mod)
			}
			a, b, more := consumed(tc.small), consumed(tc.small), consumed(tc.more)
			if a != b {
				t.Errorf("consumed %d then %d for the same run", a, b)
			}
			if more <= a {
				t.Errorf("consumed %d for %v, not more than %d for %v", more, tc.more, a, tc.small)
			}
		})
	}
}

// TestMemoryLimit checks capping and reporting of memory limits.
func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		name     string
		memory   string
		limit    uint32
		min, max uint32
		err      error
		flags    []string
	}{
		{name: "capped", memory: "(memory 2 10)", limit: 4, min: 2, max: 4},
		{name: "no max", memory: "(memory 1)", limit: 3, min: 1, max: 3},
		{name: "below cap", memory: "(memory 1 2)", limit: 10, min: 1, max: 2},
		{name: "min at cap", memory: "(memory 4)", limit: 4, min: 4, max: 4},
		{name: "min over cap", memory: "(memory 5 6)", limit: 4, err: ErrMemoryLimit},
		{name: "no limit", memory: "(memory 1)", min: 1, max: maxPages},
		{name: "no memory", memory: "", limit: 4},
		{name: "imported", memory: `(import "env" "mem" (memory 1 3))`, limit: 2, min: 1, max: 3},
		{name: "shared", memory: "(memory 1 100 shared)", limit: 4, min: 1, max: 4, flags: []string{"--enable-threads"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf("(module %s)", tc.memory)
			_, info, err := Instrument(watSource(t, src, tc.flags...), Options{MaxMemoryPages: tc.limit})
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if info.MemoryMinPages != tc.min || info.MemoryMaxPages != tc.max {
				t.Errorf("pages = %d..%d, want %d..%d", info.MemoryMinPages, info.MemoryMaxPages, tc.min, tc.max)
			}
		})
	}

	t.Run("grow stops at cap", func(t *testing.T) {
		src := `(module (memory 2 10)
		  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))`
		metered, _ := instrument(t, watSource(t, src), Options{MaxMemoryPages: 4})
		e := newEnv(t, &fuelHost{grant: 1 << 20}, nil)
		mod, _ := e.instantiate(t, metered)
		grow := mod.ExportedFunction("grow")
		for _, step := range []struct{ delta, want uint32 }{{2, 2}, {1, 0xffffffff}, {0, 4}} {
			res, err := grow.Call(e.ctx, uint64(step.delta))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(res[0]) != step.want {
				t.Errorf("memory.grow(%d) = %d, want %d", step.delta, int32(res[0]), int32(step.want))
			}
		}
	})
}

// moduleWithBody builds a module with one function of type () -> () and the
// given body (locals and expression), so decoder errors can be provoked.
func moduleWithBody(body ...byte) []byte {
	m := append([]byte(nil), magic...)
	m = append(m, secType, 4, 1, 0x60, 0, 0)
	m = append(m, secFunction, 2, 1, 0)
	code := appendU32([]byte{1}, uint32(len(body)))
	code = append(code, body...)
	m = append(m, secCode)
	m = appendU32(m, uint32(len(code)))
	return append(m, code...)
}

func TestErrors(t *testing.T) {
	valid := moduleWithBody(0, opEnd)
	if _, _, err := Instrument(valid, Options{}); err != nil {
		t.Fatalf("baseline module: %v", err)
	}
	header := func(sections ...byte) []byte { return append(append([]byte(nil), magic...), sections...) }
	// wat builds a case's module with wat2wasm when the case runs, so that
	// only that case is skipped without wat2wasm.
	type wat []string // source, then flags
	tests := []struct {
		name string
		wasm any // []byte or wat
		err  error
		msg  []string // substrings the message must contain
	}{
		{"empty", nil, ErrInvalid, []string{"magic"}},
		{"version 2", []byte{0, 'a', 's', 'm', 2, 0, 0, 0}, ErrInvalid, []string{"version"}},
		{"truncated section", header(secType, 10, 1, 0x60), ErrInvalid, []string{"section header", "offset 0xa"}},
		{"out of order", header(secFunction, 1, 0, secType, 1, 0), ErrInvalid, []string{"type section out of order"}},
		{"unknown section", header(13, 0), ErrInvalid, []string{"section id 13"}},
		{"u32 too long", header(secType, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), ErrInvalid, []string{"longer than 5 bytes"}},
		{"u32 overflow", header(secType, 0x80, 0x80, 0x80, 0x80, 0x10), ErrInvalid, []string{"overflows"}},
		{"tail call", moduleWithBody(0, 0x12, 0, opEnd), ErrInvalid, []string{"code section: function 0", "offset 0x17", "0x12 (tail call)"}},
		{"exceptions", moduleWithBody(0, 0x06, 0x40, opEnd, opEnd), ErrInvalid, []string{"exception"}},
		{"GC", moduleWithBody(0, 0xfb, 0, opEnd), ErrInvalid, []string{"0xfb (GC)"}},
		{"SIMD gap", moduleWithBody(0, 0xfd, 0x9a, 0x01, opEnd), ErrInvalid, []string{"opcode 0xfd 154"}},
		{"relaxed SIMD", moduleWithBody(0, 0xfd, 0x80, 0x02, opEnd), ErrInvalid, []string{"opcode 0xfd 256"}},
		{"misc 18", moduleWithBody(0, 0xfc, 18, opEnd), ErrInvalid, []string{"opcode 0xfc 18"}},
		{"atomic gap", moduleWithBody(0, 0xfe, 0x04, opEnd), ErrInvalid, []string{"opcode 0xfe 4"}},
		{"fence byte", moduleWithBody(0, 0xfe, 0x03, 0x01, opEnd), ErrInvalid, []string{"atomic.fence"}},
		{"s32 too long", moduleWithBody(0, 0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x1a, opEnd), ErrInvalid, []string{"s32 LEB128 longer"}},
		{"s32 bad sign bits", moduleWithBody(0, 0x41, 0x80, 0x80, 0x80, 0x80, 0x40, 0x1a, opEnd), ErrInvalid, []string{"s32 LEB128 overflows"}},
		{"s64 bad sign bits", moduleWithBody(0, 0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0x1a, opEnd), ErrInvalid, []string{"s64 LEB128 overflows"}},
		{"negative block type", moduleWithBody(0, opBlock, 0x60, opEnd, opEnd), ErrInvalid, []string{"block type"}},
		{"memarg flags", moduleWithBody(0, 0x41, 0, 0x28, 0x40, 0, 0x1a, opEnd), ErrInvalid, []string{"alignment 64"}},
		{"global out of range", moduleWithBody(0, opGlobalG, 0, 0x1a, opEnd), ErrInvalid, []string{"global index 0 out of range"}},
		{"call out of range", moduleWithBody(0, opCall, 1, opEnd), ErrInvalid, []string{"function index 1 out of range"}},
		{"call_indirect type out of range", moduleWithBody(0, 0x41, 0, opCallIndirect, 1, 0, opEnd), ErrInvalid, []string{"type index 1 out of range"}},
		{"loop type out of range", moduleWithBody(0, opLoop, 1, opEnd, opEnd), ErrInvalid, []string{"invalid block type 1"}},
		{"branch out of range", moduleWithBody(0, opBr, 1, opEnd), ErrInvalid, []string{"branch depth 1 out of range"}},
		{"missing end", moduleWithBody(0, 0x01), ErrInvalid, []string{"unexpected end"}},
		{"bytes after end", moduleWithBody(0, opEnd, 0x01), ErrInvalid, []string{"after the function's final end"}},
		{"too many locals", moduleWithBody(2, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x01, 0x7f, opEnd), ErrInvalid, []string{"too many locals"}},
		{"code count", header(secType, 4, 1, 0x60, 0, 0, secFunction, 2, 1, 0, secCode, 1, 0), ErrInvalid, []string{"0 bodies for 1"}},
		{"no code", header(secType, 4, 1, 0x60, 0, 0, secFunction, 2, 1, 0), ErrInvalid, []string{"no code section"}},
		{"element flags", header(secElement, 3, 1, 8, 0), ErrInvalid, []string{"element section", "flags 8"}},
		{"vector too long", header(secType, 2, 0xff, 0x01), ErrInvalid, []string{"vector length 255"}},
		{"reserved import", wat{`(module (import "infernet_meter" "x" (func)))`}, ErrReserved, []string{"infernet_meter.x"}},
		{"reserved export", wat{`(module (global (export "infernet_meter_fuel") i32 (i32.const 0)))`}, ErrReserved, []string{"infernet_meter_fuel"}},
		{"tail call from wat2wasm", wat{`(module (func $f (return_call $f)))`, "--enable-tail-call"}, ErrInvalid, []string{"tail call"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wasm, _ := tc.wasm.([]byte)
			if w, ok := tc.wasm.(wat); ok {
				wasm = watSource(t, w[0], w[1:]...)
			}
			out, _, err := Instrument(wasm, Options{})
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if out != nil {
				t.Errorf("output on error")
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}

	t.Run("instrumented twice", func(t *testing.T) {
		once, _ := instrument(t, valid, Options{})
		if _, _, err := Instrument(once, Options{}); !errors.Is(err, ErrReserved) {
			t.Errorf("error = %v, want ErrReserved", err)
		}
	})
}

// tickWAT ends a check: tick if the fuel local is negative, with the global
// holding the fuel during the call.
const tickWAT = `local.get $f i64.const 0 i64.lt_s
	  if local.get $f global.set $fuel local.get $f call $tick local.set $f end
	  `

// checkWAT is the check at the entry of functions that call: load the fuel
// global into the fuel local $f, charge, tick if negative.
func checkWAT(cost int) string {
	return chargeWAT(cost) + tickWAT
}

// chargeWAT is the entry of functions that do not call.
func chargeWAT(cost int) string {
	return fmt.Sprintf("global.get $fuel i64.const %d i64.sub local.set $f\n", cost)
}

// loopCheckWAT is the inline check of a loop with parameters.
func loopCheckWAT(cost int) string {
	return fmt.Sprintf("local.get $f i64.const %d i64.sub local.set $f\n", cost) + tickWAT
}

// wrapHeadWAT starts a loop whose check branches out to wrapper blocks.
func wrapHeadWAT(cost int) string {
	return fmt.Sprintf("block loop block loop local.get $f i64.const %d i64.sub local.set $f\n", cost) +
		"local.get $f i64.const 0 i64.lt_s br_if 1\n"
}

// wrapEndWAT ends a wrapped loop: tick, refund the check, retry.
func wrapEndWAT(cost int) string {
	return fmt.Sprintf("end br 2 end local.get $f global.set $fuel local.get $f call $tick i64.const %d i64.add local.set $f br 0 end end\n", cost)
}

// flushWAT stores the fuel local in the global; loadWAT loads it back.
const (
	flushWAT = "local.get $f global.set $fuel\n"
	loadWAT  = "global.get $fuel local.set $f\n"
)

// TestGolden compares Instrument's output byte for byte with the expected
// module written in WAT. CHECK(n) and CHARGE(n) stand for the check and the
// charge of cost n, WLOOP(n) and WEND(n) for a wrapped loop's head and end.
func TestGolden(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "new type, import, global and export sections",
			in: `(module
			  (func $a (param i32) (result i32)
			    (loop $l (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
			    (call $b (local.get 0)))
			  (func $b (param i32) (result i32) (local.get 0)))`,
			want: `(module
			  (type (func (param i32) (result i32)))
			  (type (func (param i64) (result i64)))
			  (import "infernet_meter" "tick" (func $tick (type 1)))
			  (func $a (type 0) (local $f i64)
			    CHECK(4)
			    WLOOP(6) local.get 0 i32.const 1 i32.sub local.tee 0 br_if 0 WEND(6)
			    local.get 0 FLUSH call $b LOAD FLUSH)
			  (func $b (type 0) (local $f i64) CHARGE(2) local.get 0 FLUSH)
			  (global $fuel (mut i64) (i64.const 0))
			  (export "infernet_meter_fuel" (global $fuel)))`,
		},
		{
			name: "existing sections, type reuse, start, elements, ref.func",
			in: `(module
			  (type (func (param i64) (result i64)))
			  (import "env" "f" (func $imp))
			  (import "env" "g" (global $g i32))
			  (table 2 funcref)
			  (global $r funcref (ref.func $b))
			  (export "b" (func $b))
			  (export "imp" (func $imp))
			  (start $b)
			  (elem (i32.const 0) $b $imp)
			  (func $b (call $imp) (drop (ref.func $b))))`,
			want: `(module
			  (type (func (param i64) (result i64)))
			  (type (func))
			  (import "env" "f" (func $imp (type 1)))
			  (import "env" "g" (global $g i32))
			  (import "infernet_meter" "tick" (func $tick (type 0)))
			  (table 2 funcref)
			  (global $r funcref (ref.func $b))
			  (global $fuel (mut i64) (i64.const 0))
			  (export "b" (func $b))
			  (export "imp" (func $imp))
			  (export "infernet_meter_fuel" (global $fuel))
			  (start $b)
			  (elem (i32.const 0) $b $imp)
			  (func $b (type 1) (local $f i64) CHECK(4) FLUSH call $imp LOAD ref.func $b drop FLUSH))`,
		},
		{
			name: "branch depths across wrapped loops, loop with parameters",
			in: `(module
			  (type $p (func (param i32) (result i32)))
			  (func $c (param i32) (result i32)
			    block $out
			      loop $outer
			        loop $inner
			          local.get 0 br_if $out
			          local.get 0 br_if $outer
			          local.get 0 br_table $inner $outer $out
			        end
			      end
			    end
			    local.get 0
			    loop (type $p) i32.const 1 i32.sub end))`,
			want: `(module
			  (type $p (func (param i32) (result i32)))
			  (type (func (param i64) (result i64)))
			  (import "infernet_meter" "tick" (func $tick (type 1)))
			  (func $c (type $p) (local $f i64)
			    CHARGE(6)
			    block
			      WLOOP(2)
			        WLOOP(7)
			          local.get 0 br_if 8
			          local.get 0 br_if 4
			          local.get 0 br_table 0 4 8
			        WEND(7)
			      WEND(2)
			    end
			    local.get 0
			    loop (type $p) LCHECK(3) i32.const 1 i32.sub end FLUSH)
			  (global $fuel (mut i64) (i64.const 0))
			  (export "infernet_meter_fuel" (global $fuel)))`,
		},
		{
			name: "fuel local synced around calls and exits",
			in: `(module
			  (type $v (func))
			  (table 1 funcref)
			  (func $d (param i32 i64) (local f32 f32) (local i32)
			    block $b
			      local.get 0 br_if 1
			      local.get 0 br_if $b
			      local.get 0 br_table $b $b
			      local.get 0 br_table $b 1
			      local.get 0 call_indirect (type $v)
			      br 1
			    end
			    return))`,
			want: `(module
			  (type $v (func))
			  (type (func (param i32 i64)))
			  (type (func (param i64) (result i64)))
			  (import "infernet_meter" "tick" (func $tick (type 2)))
			  (table 1 funcref)
			  (func $d (type 1) (local f32 f32) (local i32) (local $f i64)
			    CHECK(15)
			    block
			      local.get 0 FLUSH br_if 1
			      local.get 0 br_if 0
			      local.get 0 br_table 0 0
			      local.get 0 FLUSH br_table 0 1
			      local.get 0 FLUSH call_indirect (type $v) LOAD
			      FLUSH br 1
			    end
			    FLUSH return FLUSH)
			  (global $fuel (mut i64) (i64.const 0))
			  (export "infernet_meter_fuel" (global $fuel)))`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			want = strings.ReplaceAll(want, "FLUSH", flushWAT)
			want = strings.ReplaceAll(want, "LOAD", loadWAT)
			for n := 0; n < 20; n++ {
				want = strings.ReplaceAll(want, fmt.Sprintf("LCHECK(%d)", n), loopCheckWAT(n))
				want = strings.ReplaceAll(want, fmt.Sprintf("CHECK(%d)", n), checkWAT(n))
				want = strings.ReplaceAll(want, fmt.Sprintf("CHARGE(%d)", n), chargeWAT(n))
				want = strings.ReplaceAll(want, fmt.Sprintf("WLOOP(%d)", n), wrapHeadWAT(n))
				want = strings.ReplaceAll(want, fmt.Sprintf("WEND(%d)", n), wrapEndWAT(n))
			}
			got, _ := instrument(t, watSource(t, tc.in), Options{})
			if exp := watSource(t, want); !bytes.Equal(got, exp) {
				t.Errorf("output differs from expected module\n got: %x\nwant: %x", got, exp)
			}
		})
	}
}

// TestNameSection checks that function and local names follow their
// functions to their new indices.
func TestNameSection(t *testing.T) {
	for _, tc := range []struct {
		name string
		wasm func(testing.TB) []byte
	}{{"wat", featuresWasm}, {"c", cGuest}, {"go", goGuest}} {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.wasm(t)
			metered, _ := instrument(t, orig, Options{})
			imported := countImportedFuncs(t, orig)
			before, beforeLocals := readNames(t, orig)
			after, afterLocals := readNames(t, metered)
			if len(before) == 0 {
				t.Fatal("guest has no function names")
			}
			if len(after) != len(before)+1 || after[imported] != tickName {
				t.Errorf("tick import %d named %q, %d names before, %d after", imported, after[imported], len(before), len(after))
			}
			for idx, name := range before {
				shifted := idx
				if idx >= imported {
					shifted++
				}
				if after[shifted] != name {
					t.Errorf("function %d was %q, now %d is %q", idx, name, shifted, after[shifted])
				}
				if beforeLocals[idx] != afterLocals[shifted] {
					t.Errorf("function %d: local names changed", idx)
				}
			}
		})
	}
}

func countImportedFuncs(tb testing.TB, wasm []byte) uint32 {
	m := &instrumenter{wasm: wasm}
	if err := m.split(); err != nil {
		tb.Fatal(err)
	}
	if err := m.prescan(); err != nil {
		tb.Fatal(err)
	}
	return m.importedFuncs
}

// readNames decodes the function names and the raw local name maps of the
// name section.
func readNames(tb testing.TB, wasm []byte) (funcs, locals map[uint32]string) {
	tb.Helper()
	m := &instrumenter{wasm: wasm}
	if err := m.split(); err != nil {
		tb.Fatal(err)
	}
	funcs, locals = map[uint32]string{}, map[uint32]string{}
	for _, s := range m.sections {
		if s.custom != "name" {
			continue
		}
		r := m.reader(s)
		for r.remaining() > 0 && r.err == nil {
			id := r.byte()
			sub := newReader(r.bytes(int(r.u32())), 0)
			if id != nameFunctions && id != nameLocals {
				continue
			}
			for n := sub.count(2); n > 0 && sub.err == nil; n-- {
				idx := sub.u32()
				if id == nameFunctions {
					funcs[idx] = string(sub.name())
					continue
				}
				start := sub.pos
				for k := sub.count(2); k > 0; k-- {
					sub.u32()
					sub.name()
				}
				locals[idx] = string(sub.buf[start:sub.pos])
			}
			if sub.err != nil {
				tb.Fatal(sub.err)
			}
		}
	}
	return funcs, locals
}

// TestElementSegmentForms makes sure features.wat really covers the eight
// element segment encodings, and that instrumenting keeps them.
func TestElementSegmentForms(t *testing.T) {
	orig := featuresWasm(t)
	metered, _ := instrument(t, orig, Options{})
	for _, wasm := range [][]byte{orig, metered} {
		flags := elementFlags(t, wasm)
		if fmt.Sprint(flags) != "[0 1 2 3 4 5 6 7]" {
			t.Errorf("element segment flags %v, want all of 0-7", flags)
		}
	}
}

// elementFlags lists the flags of every element segment.
func elementFlags(tb testing.TB, wasm []byte) (flags []uint32) {
	m := &instrumenter{wasm: wasm, w: newRewriter(0, 1<<32-1, 1<<32-1, 0, 0, nil)}
	if err := m.split(); err != nil {
		tb.Fatal(err)
	}
	for _, s := range m.sections {
		if s.id != secElement {
			continue
		}
		r := m.reader(s)
		for n := r.count(2); n > 0 && r.err == nil; n-- {
			f := r.u32()
			flags = append(flags, f)
			if f == 2 || f == 6 {
				r.u32()
			}
			if f&1 == 0 {
				m.w.scan(r, false)
			}
			if f&3 != 0 {
				r.byte()
			}
			for items := r.count(1); items > 0 && r.err == nil; items-- {
				if f&4 == 0 {
					r.u32()
				} else {
					m.w.scan(r, false)
				}
			}
		}
		if r.err != nil {
			tb.Fatal(r.err)
		}
	}
	return flags
}

// TestOtherSectionsKept checks that sections Instrument does not need to
// rewrite, custom ones included, come out byte for byte and in order.
func TestOtherSectionsKept(t *testing.T) {
	orig := goGuest(t)
	// Add custom sections at both ends.
	custom := func(name, data string) []byte {
		c := appendName(nil, name)
		c = append(c, data...)
		return append(appendU32([]byte{secCustom}, uint32(len(c))), c...)
	}
	wasm := append(append(append([]byte(nil), magic...), custom("first", "1")...), orig[len(magic):]...)
	wasm = append(wasm, custom("last", "22")...)

	metered, _ := instrument(t, wasm, Options{})
	rewritten := map[byte]bool{secType: true, secImport: true, secGlobal: true, secExport: true,
		secStart: true, secElement: true, secCode: true}
	kept := func(wasm []byte) (out []string) {
		m := &instrumenter{wasm: wasm}
		if err := m.split(); err != nil {
			t.Fatal(err)
		}
		for _, s := range m.sections {
			if !rewritten[s.id] && s.custom != "name" {
				out = append(out, fmt.Sprintf("%d %q %x", s.id, s.custom, wasm[s.header:s.end]))
			}
		}
		return out
	}
	before, after := kept(wasm), kept(metered)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("sections changed:\nbefore: %.200q\nafter:  %.200q", before, after)
	}
	if len(before) < 4 {
		t.Errorf("only %d sections to compare", len(before))
	}
}

func TestDeterministic(t *testing.T) {
	wasm := goGuest(t)
	a, infoA := instrument(t, wasm, Options{MaxMemoryPages: 1000})
	b, infoB := instrument(t, wasm, Options{MaxMemoryPages: 1000})
	if !bytes.Equal(a, b) || !reflect.DeepEqual(infoA, infoB) {
		t.Error("two runs differ")
	}
}

// TestMalformedNameSection checks that a name section Instrument cannot
// parse is dropped, as the spec allows, rather than failing the module.
func TestMalformedNameSection(t *testing.T) {
	wasm := moduleWithBody(0, opEnd)
	names := appendName(nil, "name")
	names = append(names, nameFunctions, 10, 1, 0) // subsection longer than the section
	wasm = append(wasm, secCustom, byte(len(names)))
	wasm = append(wasm, names...)
	out, _ := instrument(t, wasm, Options{})
	if bytes.Contains(out, []byte("\x04name")) {
		t.Error("malformed name section kept")
	}
	newEnv(t, &fuelHost{grant: 1}, nil).instantiate(t, out)
}

// TestHostResourceLimits: tables are capped like memories, functions with
// more than MaxLocals locals are refused before any compiler sees them, and
// every import is reported with its kind.
func TestHostResourceLimits(t *testing.T) {
	tables := watSource(t, `(module
  (import "env" "g" (global i32))
  (import "env" "t" (table 1 funcref))
  (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
  (table 10 funcref)
  (table 5 100 externref)
  (func (export "_start")))`)
	_, info, err := Instrument(tables, Options{MaxTableElements: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := []Import{{"env", "g", ImportGlobal}, {"env", "t", ImportTable}, {"wasi_snapshot_preview1", "proc_exit", ImportFunc}}
	if !reflect.DeepEqual(info.Imports, want) {
		t.Errorf("imports %v, want %v", info.Imports, want)
	}
	if _, _, err := Instrument(tables, Options{MaxTableElements: 8}); !errors.Is(err, ErrMemoryLimit) {
		t.Errorf("table of 10 under a cap of 8: %v, want ErrMemoryLimit", err)
	}

	// table.grow stops at the cap even without a declared maximum.
	grow := watSource(t, `(module
  (table $t 1 funcref)
  (func (export "grow") (param i32) (result i32)
    (table.grow $t (ref.null func) (local.get 0))))`)
	out, _ := instrument(t, grow, Options{MaxTableElements: 64})
	e := newEnv(t, &fuelHost{grant: 1 << 20}, wazero.NewRuntimeConfigCompiler())
	mod, _ := e.instantiate(t, out)
	for _, tt := range []struct{ delta, want uint64 }{{63, 1}, {1, uint64(1<<32 - 1)}} {
		res, err := mod.ExportedFunction("grow").Call(context.Background(), tt.delta)
		if err != nil || res[0] != tt.want {
			t.Errorf("table.grow(%d) = %v, %v; want %d", tt.delta, res, err, tt.want)
		}
	}

	// A function declaring MaxLocals+1 locals: wasm bytes built by hand since
	// text tools expand locals one by one.
	body := appendU32(nil, 1)           // one local group
	body = appendU32(body, MaxLocals+1) // of MaxLocals+1
	body = append(body, 0x7e, 0x0b)     // i64 locals; end
	code := appendU32(appendU32(nil, 1), uint32(len(body)))
	code = append(code, body...)
	mod2 := append([]byte{}, magic...)
	mod2 = append(mod2, 1, 4, 1, 0x60, 0, 0) // type section: () -> ()
	mod2 = append(mod2, 3, 2, 1, 0)          // function section: one function of type 0
	mod2 = append(mod2, 10)
	mod2 = appendU32(mod2, uint32(len(code)))
	mod2 = append(mod2, code...)
	if _, _, err := Instrument(mod2, Options{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "too many locals") {
		t.Errorf("too many locals: %v", err)
	}
}

// TestControlCost: Info reports the quantities the structural limits apply
// to, with each instruction's weight, and passing a limit gives ErrLimit.
func TestControlCost(t *testing.T) {
	const opNop, opI32, opBrTable = 0x01, 0x41, 0x0e
	rep := func(n int, b ...byte) []byte { return bytes.Repeat(b, n) }
	body := func(parts ...[]byte) []byte {
		b := []byte{0} // no locals
		for _, p := range parts {
			b = append(b, p...)
		}
		return append(b, opEnd)
	}
	tests := []struct {
		name          string
		body          []byte
		nesting, cost int
		err           error
	}{
		{"straight line", body(rep(3, opNop)), 0, 0, nil},
		{"blocks count 1", body(rep(5, opBlock, 0x40, opEnd)), 1, 25, nil},
		{"ifs count 2", body(rep(3, opI32, 0, opIf, 0x40, opEnd)), 1, 36, nil},
		{"loops count 4", body(rep(2, opLoop, 0x40, opEnd)), 1, 64, nil},
		{"br_if counts 2", body([]byte{opBlock, 0x40}, rep(3, opI32, 0, opBrIf, 0), []byte{opEnd}), 1, 49, nil},
		{"br_table counts its targets", body([]byte{opBlock, 0x40, opI32, 0, opBrTable, 2, 0, 0, 0, opEnd}), 1, 16, nil},
		{"nesting at the limit", body(rep(MaxNesting, opBlock, 0x40), rep(MaxNesting, opEnd)), MaxNesting, MaxNesting * MaxNesting, nil},
		{"nesting over the limit", body(rep(MaxNesting+1, opBlock, 0x40), rep(MaxNesting+1, opEnd)), 0, 0, ErrLimit},
		{"cost over the limit", body(rep(1<<14+1, opBlock, 0x40, opEnd)), 0, 0, ErrLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, info, err := Instrument(moduleWithBody(tt.body...), Options{})
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err == nil && (info.MaxNesting != tt.nesting || info.ControlCost != tt.cost) {
				t.Fatalf("nesting %d cost %d, want %d and %d", info.MaxNesting, info.ControlCost, tt.nesting, tt.cost)
			}
			if err == nil && (info.CodeBytes != len(tt.body) || info.MaxFunctionBytes != len(tt.body)) {
				t.Fatalf("code %d bytes, largest %d, want %d", info.CodeBytes, info.MaxFunctionBytes, len(tt.body))
			}
		})
	}
}
