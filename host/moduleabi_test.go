package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/infernet/infernet/abi"
)

// TestModuleABI: the ABI a module needs is the latest of its infernet
// imports' (importABI); an unknown infernet function needs a later ABI
// than this build's, and is named (ErrHostTooOld). For every module here
// the answer agrees with wazero's own decoding of the imports. What no
// host gives (another module's function, a table, memory or global) is
// ErrImportNotAllowed, as the sandbox says; bytes that are not a module,
// or a module cut short inside its imports, are ErrInvalidModule.
func TestModuleABI(t *testing.T) {
	for _, tc := range []struct {
		path string
		want int
		err  error
		says string // in err
	}{
		{"testdata/random.wasm", 0, nil, ""},
		{"testdata/budget.wasm", 1, nil, ""},
		{"../testdata/bad/infernet_hostile.wasm", 2, nil, ""},
		{"testdata/hostcalls.wasm", 6, nil, ""},
		{"../guest/go/llama/runner.wasm", abi.Version, nil, ""},
		{"../testdata/bad/future_import.wasm", abi.Version + 1, ErrHostTooOld, "function infernet."},
		{"../testdata/bad/import_table.wasm", 0, ErrImportNotAllowed, "table "},
		{"../testdata/bad/import_memory.wasm", 0, ErrImportNotAllowed, "memory "},
		{"../testdata/bad/import_global.wasm", 0, ErrImportNotAllowed, "global "},
		{"../testdata/bad/unknown_import.wasm", 0, ErrImportNotAllowed, "function "},
	} {
		module, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ModuleABI(module)
		if got != tc.want || !errors.Is(err, tc.err) || tc.err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: ABI %d, %v; want %d, %v saying %q", tc.path, got, err, tc.want, tc.err, tc.says)
		}
		if tc.err == nil || tc.err == ErrHostTooOld {
			if want := wazeroABI(t, module); got != want {
				t.Errorf("%s: ABI %d, but %d from wazero's imports", tc.path, got, want)
			}
		}
	}

	runner, err := os.ReadFile("../guest/go/llama/runner.wasm")
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{nil, []byte("\x00asm"), []byte("\x00asm\x02\x00\x00\x00"), []byte("#!/bin/sh\necho hi\n")}
	for _, n := range []int{9, 10, 11, 40, 200} { // a section's header, and inside the import section
		bad = append(bad, runner[:n])
	}
	garbage, _ := filepath.Glob("../testdata/bad/garbage*.wasm")
	for _, p := range garbage {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, b)
	}
	for _, b := range bad {
		if v, err := ModuleABI(b); !errors.Is(err, ErrInvalidModule) {
			t.Errorf("%d bytes %q…: ABI %d, %v; want ErrInvalidModule", len(b), b[:min(len(b), 12)], v, err)
		}
	}
}

// wazeroABI is ModuleABI computed from wazero's decoding of module.
func wazeroABI(t *testing.T, module []byte) int {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	need := 0
	for _, f := range cm.ImportedFunctions() {
		if m, name, _ := f.Import(); m == abi.ModuleName {
			need = max(need, importABI(name))
		}
	}
	return need
}

// TestSinceCoversTheHost: every function of this host's infernet module
// has a version in since, at most this ABI's.
func TestSinceCoversTheHost(t *testing.T) {
	sb := newSandbox(t, Config{})
	fns := sb.allowed[abi.ModuleName]
	if len(fns) < 30 {
		t.Fatalf("%d infernet functions", len(fns))
	}
	for name := range fns {
		if v := since(name); v < 1 || v > abi.Version {
			t.Errorf("since(%q) = %d", name, v)
		}
	}
}

// TestModuleABIRefusesAsTheSandbox: what the client's check refuses
// before sending anything, the sandbox refuses too, for the same reason:
// a module without _start, a _start of another type, a host function
// imported with another signature, imports no host gives. Each was a
// provider's refusal after the job was sent (a newcomer's walk).
func TestModuleABIRefusesAsTheSandbox(t *testing.T) {
	// (module (import "wasi_snapshot_preview1" "fd_write" (func (param i32) (result i32)))
	//         (memory (export "memory") 1) (func (export "_start")))
	wrongSignature := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x09, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00, 0x02, 0x23, 0x01, 0x16, 0x77, 0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x08, 0x66, 0x64, 0x5f, 0x77, 0x72, 0x69, 0x74, 0x65, 0x00, 0x00, 0x03, 0x02, 0x01, 0x01, 0x05, 0x03, 0x01, 0x00, 0x01, 0x07, 0x13, 0x02, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00, 0x06, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x01, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sb := newSandbox(t, Config{})
	for _, tc := range []struct {
		name   string
		module []byte
		err    error
		says   string
	}{
		{"no _start", read("../testdata/bad/no_start.wasm"), ErrInvalidModule, "no _start export"},
		{"_start of another type", read("../testdata/bad/bad_start_type.wasm"), ErrInvalidModule, "_start has signature ("},
		{"a WASI function of another signature", wrongSignature, ErrImportNotAllowed, "fd_write has signature (i32)->(i32), want (i32,i32,i32,i32)->(i32)"},
		{"a function no host gives", read("../testdata/bad/unknown_import.wasm"), ErrImportNotAllowed, "function env.foo"},
		{"a memory", read("../testdata/bad/import_memory.wasm"), ErrImportNotAllowed, "memory "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ModuleABI(tc.module)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ModuleABI: %v; want %v saying %q", err, tc.err, tc.says)
			}
			_, err = sb.Run(context.Background(), Job{Module: tc.module}, NewJobConfig())
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("sandbox: %v; want %v saying %q, as ModuleABI", err, tc.err, tc.says)
			}
		})
	}
}

// FuzzModuleABI: the client's check never panics, and it answers as the
// sandbox's compile does where both read the same things. A module the
// sandbox compiles it accepts (at most a later ABI's function, as the
// sandbox says); one it accepts, the sandbox refuses for its imports or
// _start never (what only the code or the meter says, it cannot know).
func FuzzModuleABI(f *testing.F) {
	sb := newSandbox(f, Config{})
	for _, p := range []string{"testdata/random.wasm", "testdata/budget.wasm", "../testdata/bad/no_start.wasm",
		"../testdata/bad/bad_start_type.wasm", "../testdata/bad/future_import.wasm", "../testdata/bad/unknown_import.wasm",
		"../testdata/bad/import_memory.wasm", "../testdata/bad/wasi_hostile.wasm"} {
		f.Add(readFile(f, p))
	}
	pages := uint32(NewJobConfig().memoryLimit / 65536)
	f.Fuzz(func(t *testing.T, module []byte) {
		need, err := ModuleABI(module)
		mod, cerr := sb.compile(context.Background(), module, pages)
		if mod != nil {
			defer mod.Close(context.Background())
		}
		switch {
		case cerr == nil && err != nil:
			t.Fatalf("the sandbox compiles it; ModuleABI: %v", err)
		case errors.Is(cerr, ErrHostTooOld) && !errors.Is(err, ErrHostTooOld):
			t.Fatalf("the sandbox: %v; ModuleABI: ABI %d, %v", cerr, need, err)
		case err == nil && (errors.Is(cerr, ErrImportNotAllowed) || strings.Contains(fmt.Sprint(cerr), "no _start export") ||
			strings.Contains(fmt.Sprint(cerr), "_start has signature")):
			// (Not any "_start": code that does not validate names the
			// function it is in, export["_start"], which the check does
			// not read.)
			t.Fatalf("ModuleABI accepts it; the sandbox: %v", cerr)
		}
	})
}

// leb128, section, wasmName and wasmModule write a module by hand.
func leb128(v uint32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
		} else {
			return append(out, b)
		}
	}
}

func section(id byte, body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	return append(append([]byte{id}, leb128(uint32(len(b)))...), b...)
}

func wasmName(s string) []byte { return append(leb128(uint32(len(s))), s...) }

func wasmModule(secs ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range secs {
		m = append(m, s...)
	}
	return m
}

var (
	typeVoid    = section(1, []byte{1, 0x60, 0, 0})
	funcOfType0 = section(3, []byte{1, 0})
	oneMemory   = section(5, []byte{1, 0, 1})
	emptyCode   = section(10, []byte{1, 2, 0, 0x0b})
)

// TestModuleABIExportsAsTheSandbox: what the client's check passes,
// no host refuses for its header's reasons (FuzzModuleABI's property), and
// both say the same of each module here: a module exporting the meter's
// reserved global name (every sandbox: import not allowed), one exporting
// _start twice (invalid), and one of a later ABI without _start (the
// sandbox said "host too old", the provider's limit, of a module every
// host refuses).
func TestModuleABIExportsAsTheSandbox(t *testing.T) {
	sb := newSandbox(t, Config{})
	pages := uint32(NewJobConfig().memoryLimit / 65536)
	for _, tc := range []struct {
		name   string
		module []byte
		err    error
	}{
		{"exports the meter's global", wasmModule(typeVoid, funcOfType0, oneMemory,
			section(7, []byte{2}, wasmName("_start"), []byte{0, 0}, wasmName("infernet_meter_fuel"), []byte{0, 0}), emptyCode), ErrImportNotAllowed},
		{"exports _start twice", wasmModule(typeVoid, funcOfType0, oneMemory,
			section(7, []byte{2}, wasmName("_start"), []byte{0, 0}, wasmName("_start"), []byte{0, 0}), emptyCode), ErrInvalidModule},
		{"a later ABI's function, no _start", wasmModule(typeVoid,
			section(2, []byte{1}, wasmName("infernet"), wasmName("no_such_function_yet"), []byte{0, 0}), funcOfType0, oneMemory,
			section(7, []byte{1}, wasmName("main"), []byte{0, 1}), emptyCode), ErrInvalidModule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ModuleABI(tc.module)
			mod, cerr := sb.compile(context.Background(), tc.module, pages)
			if mod != nil {
				mod.Close(context.Background())
			}
			if !errors.Is(err, tc.err) || !errors.Is(cerr, tc.err) {
				t.Errorf("ModuleABI: %v; sandbox: %v; want %v of both", err, cerr, tc.err)
			}
		})
	}
}
