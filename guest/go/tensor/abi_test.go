//go:build !wasip1

package tensor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
)

// arity is the number of i32 parameters of every ABI function, from the
// package comment of abi. Each function returns one i32.
var arity = map[string]int{
	abi.FuncABIVersion:          0,
	abi.FuncMode:                0,
	abi.FuncTensorNew:           3,
	abi.FuncTensorFree:          1,
	abi.FuncTensorWrite:         3,
	abi.FuncTensorRead:          3,
	abi.FuncTensorDType:         1,
	abi.FuncTensorShape:         3,
	abi.FuncTensorReshape:       3,
	abi.FuncGemm:                4,
	abi.FuncBinary:              3,
	abi.FuncUnary:               2,
	abi.FuncSoftmax:             1,
	abi.FuncReduce:              2,
	abi.FuncGemmF32:             7,
	abi.FuncGemmI8:              7,
	abi.FuncBinaryF32:           6,
	abi.FuncUnaryF32:            4,
	abi.FuncSoftmaxF32:          4,
	abi.FuncReduceF32:           5,
	abi.FuncLayerNorm:           3,
	abi.FuncLayerNormF32:        6,
	abi.FuncSoftmaxCausal:       1,
	abi.FuncSoftmaxCausalF32:    4,
	abi.FuncCrossEntropyF32:     6,
	abi.FuncAdamWF32:            6,
	abi.FuncGemmBatchedF32:      8,
	abi.FuncTransposeF32:        4,
	abi.FuncGatherF32:           6,
	abi.FuncTensorFromData:      7,
	abi.FuncMatMul:              2,
	abi.FuncEmbed:               3,
	abi.FuncRMSNorm:             3,
	abi.FuncRoPE:                5,
	abi.FuncSwiGLU:              2,
	abi.FuncCopyRows:            3,
	abi.FuncAttention:           5,
	abi.FuncArgmax:              1,
	abi.FuncSample:              4,
	abi.FuncRoPEFactors:         6,
	abi.FuncMatMulAdd:           3,
	abi.FuncMatMulSwiGLU:        3,
	abi.FuncRoPEKV:              10,
	abi.FuncRMSNormMatMul:       6,
	abi.FuncRMSNormMatMulSwiGLU: 5,
}

// TestGoImports checks that host_wasip1.go imports every ABI function, once,
// from the right module, with the right number of 32-bit parameters.
func TestGoImports(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "host_wasip1.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Doc == nil {
			continue
		}
		for _, c := range fd.Doc.List {
			fields := strings.Fields(c.Text)
			if len(fields) == 0 || fields[0] != "//go:wasmimport" {
				continue
			}
			if len(fields) != 3 || fields[1] != abi.ModuleName {
				t.Errorf("%s: bad directive %q", fd.Name.Name, c.Text)
				continue
			}
			name := fields[2]
			want, ok := arity[name]
			if !ok {
				t.Errorf("%s imports %q, which is not an ABI function", fd.Name.Name, name)
				continue
			}
			if seen[name] {
				t.Errorf("%q imported twice", name)
			}
			seen[name] = true
			var params int
			for _, p := range fd.Type.Params.List {
				typ := types(p.Type)
				if typ != "int32" && typ != "unsafe.Pointer" {
					t.Errorf("%s: parameter type %s is not an i32", name, typ)
				}
				params += max(len(p.Names), 1)
			}
			if params != want {
				t.Errorf("%s: %d parameters, want %d", name, params, want)
			}
			if r := fd.Type.Results; r == nil || len(r.List) != 1 || types(r.List[0].Type) != "int32" {
				t.Errorf("%s: want one int32 result", name)
			}
		}
	}
	for name := range arity {
		if !seen[name] {
			t.Errorf("ABI function %q is not imported", name)
		}
	}
}

func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return types(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// TestCHeader checks that guest/c/infernet.h declares every ABI function with
// the right arity and defines every constant with the value of package abi.
func TestCHeader(t *testing.T) {
	src, err := os.ReadFile("../../c/infernet.h")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)

	decl := regexp.MustCompile(`INFERNET_IMPORT\((\w+)\)\s*int32_t\s+infernet_(\w+)\(([^)]*)\);`)
	seen := map[string]bool{}
	for _, m := range decl.FindAllStringSubmatch(text, -1) {
		name, cname, params := m[1], m[2], strings.TrimSpace(m[3])
		want, ok := arity[name]
		if !ok {
			t.Errorf("header imports %q, which is not an ABI function", name)
			continue
		}
		if cname != name {
			t.Errorf("import %q is declared as infernet_%s", name, cname)
		}
		seen[name] = true
		n := 0
		if params != "void" {
			n = strings.Count(params, ",") + 1
		}
		if n != want {
			t.Errorf("%s: %d parameters in the header, want %d", name, n, want)
		}
	}
	for name := range arity {
		if !seen[name] {
			t.Errorf("ABI function %q is not declared in the header", name)
		}
	}

	consts := map[string]int64{
		"ABI_VERSION":      abi.Version,
		"MAX_DIMS":         abi.MaxDims,
		"MAX_NORM_MATMULS": abi.MaxNormMatMuls,
		"CANONICAL_NAN32":  int64(abi.CanonicalNaN32),
		"F32":              int64(abi.F32),
		"I8":               int64(abi.I8),
		"I32":              int64(abi.I32),
		"F16":              int64(abi.F16),
		"BF16":             int64(abi.BF16),
		"Q8_0":             int64(abi.Q8_0),
		"Q8_BLOCK":         abi.Q8Block,
		"Q4_0":             int64(abi.Q4_0),
		"Q4_1":             int64(abi.Q4_1),
		"Q5_0":             int64(abi.Q5_0),
		"Q5_1":             int64(abi.Q5_1),
		"Q4_K":             int64(abi.Q4_K),
		"Q5_K":             int64(abi.Q5_K),
		"Q6_K":             int64(abi.Q6_K),
		"K_BLOCK":          abi.KBlock,
		"ROPE_INTERLEAVED": int64(abi.RoPEInterleaved),
		"ROPE_HALVES":      int64(abi.RoPEHalves),
		"OP_ADD":           int64(abi.OpAdd),
		"OP_SUB":           int64(abi.OpSub),
		"OP_MUL":           int64(abi.OpMul),
		"OP_DIV":           int64(abi.OpDiv),
		"OP_RELU":          int64(abi.OpReLU),
		"OP_GELU":          int64(abi.OpGELU),
		"OP_EXP":           int64(abi.OpExp),
		"OP_LOG":           int64(abi.OpLog),
		"OP_TANH":          int64(abi.OpTanh),
		"OP_SQRT":          int64(abi.OpSqrt),
		"OP_SUM":           int64(abi.OpSum),
		"OP_MAX":           int64(abi.OpMax),
		"OP_MEAN":          int64(abi.OpMean),
		"GEMM_TRANS_A":     int64(abi.GemmTransA),
		"GEMM_TRANS_B":     int64(abi.GemmTransB),
		"GEMM_ACCUMULATE":  int64(abi.GemmAccumulate),
		"MODE_EXACT":       int64(abi.ModeExact),
		"MODE_TOLERANCE":   int64(abi.ModeTolerance),
		"OK":               int64(abi.OK),
		"EINVAL":           int64(abi.EINVAL),
		"EBADF":            int64(abi.EBADF),
		"ESHAPE":           int64(abi.ESHAPE),
		"EDTYPE":           int64(abi.EDTYPE),
		"EFAULT":           int64(abi.EFAULT),
		"ENOMEM":           int64(abi.ENOMEM),
		"ETOOMANY":         int64(abi.ETOOMANY),
		"EBACKEND":         int64(abi.EBACKEND),
		"ENOPROOF":         int64(abi.ENOPROOF),
		"ENOENT":           int64(abi.ENOENT),
		"EROFS":            int64(abi.EROFS),
	}
	define := regexp.MustCompile(`(?m)^#define INFERNET_(\w+)\s+\(?(-?(?:0x[0-9A-Fa-f]+|\d+))u?\)?`)
	got := map[string]int64{}
	for _, m := range define.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseInt(m[2], 0, 64)
		if err != nil {
			t.Errorf("INFERNET_%s: %v", m[1], err)
		}
		got[m[1]] = v
	}
	for name, want := range consts {
		if v, ok := got[name]; !ok {
			t.Errorf("INFERNET_%s is not defined", name)
		} else if v != want {
			t.Errorf("INFERNET_%s = %d, want %d", name, v, want)
		}
	}
	for name := range got {
		if _, ok := consts[name]; !ok {
			t.Errorf("INFERNET_%s is not checked against package abi", name)
		}
	}
}
