package meter

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// wazeroCanDecode reports whether wazero can decode wasm without running
// out of memory: its decoder preallocates vectors, locals, data and names
// from their declared sizes before it finds out that the input is too
// short. So the fuzzer only asks it about inputs whose sizes are sane.
func wazeroCanDecode(wasm []byte) bool {
	m := &instrumenter{wasm: wasm}
	if m.split() != nil || m.prescan() != nil {
		return false
	}
	m.w.funcs, m.w.globals = 1<<32-1, 1<<32-1 // only sizes matter here
	for _, s := range m.sections {
		r := m.reader(s)
		switch s.id {
		case secTable, secMemory, secGlobal, secExport:
			r.count(1)
		case secCode:
			for n := r.count(2); n > 0 && r.err == nil; n-- {
				body := newReader(r.bytes(int(r.u32())), 0)
				locals := 0
				for g := body.count(2); g > 0 && body.err == nil; g-- {
					locals += int(body.u32())
					body.byte()
				}
				if locals > 1<<20 || body.err != nil {
					return false
				}
			}
		case secData:
			for n := r.count(1); n > 0 && r.err == nil; n-- {
				switch r.u32() {
				case 0:
					m.w.scan(r, false)
				case 2:
					r.u32()
					m.w.scan(r, false)
				}
				r.bytes(int(r.u32()))
			}
		case secElement:
			m.elementSection(r)
		case secCustom:
			if s.custom == "name" {
				m.nameSection(r)
			}
		}
		if r.err != nil {
			return false
		}
	}
	return true
}

// FuzzInstrument checks that Instrument never panics, is deterministic, and
// that it agrees with wazero: it accepts what wazero accepts (bar reserved
// names and memory limits), and wazero accepts its output then. Run it
// with: go test -run ^$ -fuzz FuzzInstrument ./host/internal/meter/
func FuzzInstrument(f *testing.F) {
	for _, tool := range []string{"wat2wasm", "clang"} {
		if _, err := exec.LookPath(tool); err != nil {
			f.Logf("%s not installed: fewer seeds", tool)
		}
	}
	have := func(tool string) bool { _, err := exec.LookPath(tool); return err == nil }
	if have("wat2wasm") {
		f.Add(featuresWasm(f))
		f.Add(fuelWasm(f))
		f.Add(threadsWasm(f))
		f.Add(watSource(f, `(module (memory 1 2) (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))`))
	}
	if have("clang") {
		f.Add(cGuest(f))
	}
	f.Add(moduleWithBody(0, opEnd))
	f.Add(moduleWithBody(1, 1, 0x7e, opLoop, 0x40, opBr, 0, opEnd, opEnd))

	// The interpreter validates as thoroughly as the compiler, much faster.
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().
		WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesThreads))
	f.Cleanup(func() { r.Close(ctx) })
	valid := func(wasm []byte) error {
		c, err := r.CompileModule(ctx, wasm)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}

	f.Fuzz(func(t *testing.T, wasm []byte) {
		opts := Options{MaxMemoryPages: 16}
		out, info, err := Instrument(wasm, opts)
		if err != nil {
			if out != nil {
				t.Fatal("output with an error")
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrMemoryLimit) && !errors.Is(err, ErrReserved) {
				t.Fatalf("unexpected error type: %v", err)
			}
			if errors.Is(err, ErrInvalid) && wazeroCanDecode(wasm) && valid(wasm) == nil {
				t.Fatalf("wazero accepts the input, Instrument says: %v", err)
			}
			return
		}
		again, info2, err := Instrument(wasm, opts)
		if err != nil || !bytes.Equal(out, again) || !reflect.DeepEqual(info, info2) {
			t.Fatalf("second run differs: %v", err)
		}
		if wazeroCanDecode(wasm) && valid(wasm) == nil {
			if err := valid(out); err != nil {
				t.Fatalf("wazero accepts the input but not the output: %v", err)
			}
		}
	})
}
