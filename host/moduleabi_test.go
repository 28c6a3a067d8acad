package host

import (
	"context"
	"errors"
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
