package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	wasi "github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/meter"
	"github.com/infernet/infernet/host/internal/tensorhost"
)

// ModuleABI returns the lowest tensor ABI version whose hosts have every
// function of the infernet module that module imports (importABI): 0 for
// a module that imports none. A client offers a job only to providers
// whose host is at least that version, since an older one can only refuse
// it. A function of the infernet module this build does not know (a later
// ABI's, or a misspelling) needs abi.Version+1 and comes with an error
// wrapping ErrHostTooOld that names it.
//
// It reads the module's type, import, function and export sections, not
// its code, and refuses what the sandbox that compiles it would refuse
// for those: a module it cannot read, or one without a `_start` of type
// ()->(), is ErrInvalidModule; one that imports what no host gives
// (another module's function, a memory, table or global, or a host
// function with another signature) ErrImportNotAllowed, with the reason.
// A later ABI's function is said only when nothing else is wrong.
func ModuleABI(module []byte) (int, error) {
	m, err := readModule(module)
	if errors.Is(err, errReserved) {
		return 0, fmt.Errorf("%w: %w", ErrImportNotAllowed, err)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	need := 0
	var later error
	for _, imp := range m.imports {
		switch {
		case imp.kind != "function" || imp.module != abi.ModuleName && imp.module != wasi.ModuleName:
			return 0, fmt.Errorf("%w: %s %s.%s", ErrImportNotAllowed, imp.kind, imp.module, imp.name)
		case imp.module == abi.ModuleName:
			need = max(need, importABI(imp.name))
			if since(imp.name) == 0 {
				if later == nil {
					later = fmt.Errorf("%w: function %s.%s, not in this build's ABI v%d (a later ABI's, or a misspelling)", ErrHostTooOld, imp.module, imp.name, abi.Version)
				}
				continue
			}
		}
		want, ok := hostFunctions()[imp.module][imp.name]
		if !ok {
			return 0, fmt.Errorf("%w: function %s.%s", ErrImportNotAllowed, imp.module, imp.name)
		}
		if got := m.types[imp.typ]; !sameTypes(got.params, want.ParamTypes()) || !sameTypes(got.results, want.ResultTypes()) {
			return 0, fmt.Errorf("%w: function %s.%s has signature %s, want %s",
				ErrImportNotAllowed, imp.module, imp.name, got, signature(want))
		}
	}
	start, ok := m.start()
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: no _start export: not a WASI command module", ErrInvalidModule)
	case len(start.params) != 0 || len(start.results) != 0:
		return 0, fmt.Errorf("%w: _start has signature %s, want ()->()", ErrInvalidModule, start)
	}
	return need, later
}

// hostFunctions are the functions a sandbox's host modules give a job,
// by module and name (the meter's aside: a job may not import it), read
// once from a runtime of their own.
var hostFunctions = sync.OnceValue(func() map[string]map[string]api.FunctionDefinition {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	if _, err := wasi.Instantiate(ctx, rt); err != nil {
		panic(fmt.Sprintf("host: wasi: %v", err)) // the build's own host modules
	}
	if err := tensorhost.Instantiate(ctx, rt); err != nil {
		panic(fmt.Sprintf("host: infernet module: %v", err))
	}
	return exportedFunctions(rt, wasi.ModuleName, abi.ModuleName)
})

// exportedFunctions returns the functions each named module of rt exports.
func exportedFunctions(rt wazero.Runtime, modules ...string) map[string]map[string]api.FunctionDefinition {
	fns := make(map[string]map[string]api.FunctionDefinition, len(modules))
	for _, name := range modules {
		fns[name] = rt.Module(name).ExportedFunctionDefinitions()
	}
	return fns
}

// funcType is a function type of a module's type section.
type funcType struct{ params, results []api.ValueType }

func (f funcType) String() string { return typeString(f.params, f.results) }

// wasmImport is one import of a module; typ is a function's type index.
type wasmImport struct {
	module, name, kind string
	typ                uint32
}

// moduleHeader is what ModuleABI reads of a module: its function types,
// imports, the types of the functions it defines, and its exported
// functions' indices.
type moduleHeader struct {
	types   []funcType
	imports []wasmImport
	funcs   []uint32          // type index of each defined function
	exports map[string]uint32 // exported function → function index
}

// start returns the type of the function exported as _start.
func (m *moduleHeader) start() (funcType, bool) {
	i, ok := m.exports["_start"]
	if !ok {
		return funcType{}, false
	}
	for _, imp := range m.imports {
		if imp.kind != "function" {
			continue
		}
		if i == 0 {
			return m.types[imp.typ], true
		}
		i--
	}
	if uint64(i) >= uint64(len(m.funcs)) {
		return funcType{}, false
	}
	return m.types[m.funcs[i]], true
}

// readModule reads module's sections up to its code, checking each type
// index it meets against the type section.
func readModule(module []byte) (*moduleHeader, error) {
	r := wasmReader{b: module}
	if magic := r.bytes(8); r.err != nil || string(magic) != "\x00asm\x01\x00\x00\x00" {
		return nil, errors.New("not a WebAssembly 1.0 binary")
	}
	m := &moduleHeader{exports: map[string]uint32{}}
	names := map[string]bool{} // every export's, of any kind
	typeIndex := func(body *wasmReader) uint32 {
		i := body.u32()
		if body.err == nil && uint64(i) >= uint64(len(m.types)) {
			body.err = fmt.Errorf("type index %d of %d", i, len(m.types))
		}
		return i
	}
	for r.err == nil && len(r.b) > 0 {
		id := r.byte()
		body := wasmReader{b: r.bytes(r.u32())}
		if r.err != nil {
			break
		}
		switch id {
		case 1:
			for n := body.u32(); n > 0 && body.err == nil; n-- {
				if form := body.byte(); form != 0x60 && body.err == nil {
					body.err = fmt.Errorf("function type form %#x", form)
				}
				m.types = append(m.types, funcType{params: body.valTypes(), results: body.valTypes()})
			}
		case 2:
			for n := body.u32(); n > 0 && body.err == nil; n-- {
				imp := wasmImport{module: body.name(), name: body.name()}
				imp.kind = body.importDesc(func() uint32 { return typeIndex(&body) }, &imp.typ)
				m.imports = append(m.imports, imp)
			}
		case 3:
			for n := body.u32(); n > 0 && body.err == nil; n-- {
				m.funcs = append(m.funcs, typeIndex(&body))
			}
		case 7:
			for n := body.u32(); n > 0 && body.err == nil; n-- {
				name, kind, index := body.name(), body.byte(), body.u32()
				switch {
				case body.err != nil:
				case names[name]:
					body.err = fmt.Errorf("export %q twice", name)
				case name == meter.ExportFuel: // the sandbox's meter's own
					return nil, fmt.Errorf("%w: module exports %q", errReserved, name)
				}
				names[name] = true
				if kind == 0 {
					m.exports[name] = index
				}
			}
		}
		if body.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, body.err)
		}
		if id == 7 || id == 10 { // the export section is read; the code need not be
			return m, nil
		}
	}
	return m, r.err
}

// wasmReader reads the WebAssembly binary format's primitives from b; the
// first error sticks and later reads return zero values.
type wasmReader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

// errReserved is an export of a name the sandbox's meter keeps for its
// own (meter.ErrReserved): every sandbox refuses it as an import no host
// allows.
var errReserved = errors.New("a reserved name")

func (r *wasmReader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *wasmReader) byte() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *wasmReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[:min(len(r.b), 5)])
	if n <= 0 || v > 1<<32-1 {
		r.err = errors.New("bad LEB128")
		return 0
	}
	r.b = r.b[n:]
	return uint32(v)
}

func (r *wasmReader) name() string { return string(r.bytes(r.u32())) }

// importDesc reads an import's description (a function's type index into
// *typ, with typeIndex; a table's type and limits, a memory's limits or a
// global's type, skipped) and returns its kind.
func (r *wasmReader) importDesc(typeIndex func() uint32, typ *uint32) string {
	switch kind := r.byte(); kind {
	case 0:
		*typ = typeIndex()
		return "function"
	case 1: // reftype, then limits
		r.byte()
		r.limits()
		return "table"
	case 2:
		r.limits()
		return "memory"
	case 3: // valtype, mutability
		r.bytes(2)
		return "global"
	default:
		if r.err == nil {
			r.err = fmt.Errorf("import kind %d", kind)
		}
		return ""
	}
}

// valTypes reads a vector of value types.
func (r *wasmReader) valTypes() []api.ValueType {
	n := r.u32()
	return r.bytes(n)
}

func (r *wasmReader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// importABI is the ABI version a host needs to serve the import of
// function name of the infernet module: since's, or abi.Version+1 for a
// name this build does not know (a later ABI's, or none at all).
func importABI(name string) int {
	if v := since(name); v > 0 {
		return v
	}
	return abi.Version + 1
}

// since returns the ABI version that added host function name of the
// infernet module: 1 for those of v1, 2 for those of v2, and so on; 0 for
// a name the ABI does not have. A host of ABI v answers every function
// whose since is at most v.
func since(name string) int {
	switch name {
	case abi.FuncLayerNorm, abi.FuncLayerNormF32, abi.FuncSoftmaxCausal, abi.FuncSoftmaxCausalF32, abi.FuncCrossEntropyF32,
		abi.FuncAdamWF32, abi.FuncGemmBatchedF32, abi.FuncTransposeF32, abi.FuncGatherF32:
		return 2
	case abi.FuncTensorFromData, abi.FuncMatMul, abi.FuncEmbed, abi.FuncRMSNorm, abi.FuncRoPE, abi.FuncSwiGLU, abi.FuncCopyRows,
		abi.FuncAttention, abi.FuncArgmax, abi.FuncSample:
		return 3
	case abi.FuncRoPEFactors:
		return 5
	case abi.FuncMatMulAdd, abi.FuncMatMulSwiGLU:
		return 6
	case abi.FuncRoPEKV:
		return 7
	case abi.FuncRMSNormMatMul, abi.FuncRMSNormMatMulSwiGLU:
		return 8
	case abi.FuncABIVersion, abi.FuncMode, abi.FuncTensorNew, abi.FuncTensorFree, abi.FuncTensorWrite, abi.FuncTensorRead,
		abi.FuncTensorDType, abi.FuncTensorShape, abi.FuncTensorReshape, abi.FuncGemm, abi.FuncBinary, abi.FuncUnary, abi.FuncSoftmax,
		abi.FuncReduce, abi.FuncGemmF32, abi.FuncGemmI8, abi.FuncBinaryF32, abi.FuncUnaryF32, abi.FuncSoftmaxF32, abi.FuncReduceF32:
		return 1
	}
	return 0
}
