package host

import (
	"encoding/binary"
	"errors"
	"fmt"

	wasi "github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/infernet/infernet/abi"
)

// ModuleABI returns the lowest tensor ABI version whose hosts have every
// function of the infernet module that module imports (importABI): 0 for
// a module that imports none. A client offers a job only to providers
// whose host is at least that version, since an older one can only refuse
// it. A function of the infernet module this build does not know (a later
// ABI's, or a misspelling) needs abi.Version+1 and comes with an error
// wrapping ErrHostTooOld that names it. It reads the module's import
// section and nothing else: a module it cannot read is ErrInvalidModule,
// and one that imports what no host gives (another module's function, a
// memory, table or global) ErrImportNotAllowed, as the sandbox that
// compiles it would refuse it, with the reason.
func ModuleABI(module []byte) (int, error) {
	r := wasmReader{b: module}
	if magic := r.bytes(8); r.err != nil || string(magic) != "\x00asm\x01\x00\x00\x00" {
		return 0, fmt.Errorf("%w: not a WebAssembly 1.0 binary", ErrInvalidModule)
	}
	for r.err == nil && len(r.b) > 0 {
		id := r.byte()
		body := wasmReader{b: r.bytes(r.u32())}
		if r.err != nil {
			break
		}
		if id != 2 { // the import section
			continue
		}
		need := 0
		var refused, later error
		for n := body.u32(); n > 0 && body.err == nil; n-- {
			mod, name := body.name(), body.name()
			kind := body.importDesc()
			switch {
			case body.err != nil || refused != nil:
			case kind != "function" || mod != abi.ModuleName && mod != wasi.ModuleName:
				refused = fmt.Errorf("%w: %s %s.%s", ErrImportNotAllowed, kind, mod, name)
			case mod == abi.ModuleName:
				need = max(need, importABI(name))
				if since(name) == 0 && later == nil {
					later = fmt.Errorf("%w: function %s.%s, not in this build's ABI v%d (a later ABI's, or a misspelling)", ErrHostTooOld, mod, name, abi.Version)
				}
			}
		}
		switch {
		case body.err != nil:
			return 0, fmt.Errorf("%w: import section: %w", ErrInvalidModule, body.err)
		case refused != nil:
			return 0, refused
		}
		return need, later
	}
	if r.err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidModule, r.err)
	}
	return 0, nil
}

// wasmReader reads the WebAssembly binary format's primitives from b; the
// first error sticks and later reads return zero values.
type wasmReader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

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

// importDesc skips an import's description (a function's type index, a
// table's type and limits, a memory's limits or a global's type) and
// returns its kind.
func (r *wasmReader) importDesc() string {
	switch kind := r.byte(); kind {
	case 0:
		r.u32()
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
