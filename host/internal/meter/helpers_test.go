package meter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Test guests are built from testdata at test time, once per test binary.
var (
	buildDir   string
	buildMu    sync.Mutex
	buildCache = map[string][]byte{}
	buildErrs  = map[string]error{}

	// compileCache lets the many runtimes the tests create share compiled
	// code.
	compileCache = wazero.NewCompilationCache()
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meter-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build runs a build command once per key and returns the output file,
// which the command writes to the path given by the argument "OUT". It skips
// the test when the tool is not installed.
func build(tb testing.TB, key, tool string, args ...string) []byte {
	tb.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		tb.Skipf("%s not installed: %v", tool, err)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := buildCache[key]; ok {
		return b
	}
	if err := buildErrs[key]; err != nil {
		tb.Fatal(err)
	}
	out := buildPath(key)
	args = append([]string(nil), args...)
	for i, a := range args {
		if a == "OUT" {
			args[i] = out
		}
	}
	cmd := exec.Command(tool, args...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	msg, err := cmd.CombinedOutput()
	if err != nil {
		buildErrs[key] = fmt.Errorf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, msg)
		tb.Fatal(buildErrs[key])
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	buildCache[key] = b
	return b
}

func buildPath(key string) string { return filepath.Join(buildDir, key+".wasm") }

// wat compiles testdata/NAME.wat with a name section.
func wat(tb testing.TB, name string, flags ...string) []byte {
	tb.Helper()
	args := append([]string{"--debug-names", filepath.Join("testdata", name+".wat"), "-o", "OUT"}, flags...)
	return build(tb, "wat-"+name, "wat2wasm", args...)
}

// watSource compiles WAT text given inline, keyed by its content.
func watSource(tb testing.TB, src string, flags ...string) []byte {
	tb.Helper()
	key := fmt.Sprintf("inline-%x", hashString(src+strings.Join(flags, " ")))
	file := filepath.Join(buildDir, key+".wat")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	return build(tb, key, "wat2wasm", append([]string{file, "-o", "OUT"}, flags...)...)
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// cGuest is testdata/cguest built with clang for WASI. Compiling and
// linking separately keeps clang from running wasm-opt, which would strip
// the name section.
func cGuest(tb testing.TB) []byte {
	tb.Helper()
	build(tb, "cguest-obj", "clang", "--target=wasm32-wasi", "--sysroot=/usr", "-O2", "-c",
		filepath.Join("testdata", "cguest", "guest.c"), "-o", "OUT")
	return build(tb, "cguest", "clang", "--target=wasm32-wasi", "--sysroot=/usr", buildPath("cguest-obj"), "-o", "OUT")
}

// goGuest is testdata/goguest built with GOOS=wasip1.
func goGuest(tb testing.TB) []byte {
	tb.Helper()
	return build(tb, "goguest", "go", "build", "-o", "OUT", "./testdata/goguest")
}

// instrument instruments wasm or fails the test.
func instrument(tb testing.TB, wasm []byte, opts Options) ([]byte, Info) {
	tb.Helper()
	out, info, err := Instrument(wasm, opts)
	if err != nil {
		tb.Fatalf("Instrument: %v", err)
	}
	return out, info
}

const exitBudget = 99 // exit code of guests stopped by fuelHost

// fuelHost implements infernet_meter.tick: it grants fuel in fixed amounts
// and stops the guest once it has consumed more than budget.
type fuelHost struct {
	grant   int64
	budget  int64 // 0: unlimited
	granted int64
	ticks   int
}

func (h *fuelHost) tick(ctx context.Context, mod api.Module, stack []uint64) {
	fuel := int64(stack[0])
	if h.budget > 0 && h.granted-fuel > h.budget {
		_ = mod.CloseWithExitCode(ctx, exitBudget)
		panic(sys.NewExitError(exitBudget))
	}
	h.ticks++
	h.granted += h.grant
	stack[0] = uint64(fuel + h.grant)
}

// consumed is the fuel used so far by mod.
func (h *fuelHost) consumed(mod api.Module) int64 {
	return h.granted - int64(mod.ExportedGlobal(ExportFuel).Get())
}

// env is a runtime with WASI, the "env" module features.wat imports and,
// when host is set, the meter host module.
type env struct {
	ctx context.Context
	r   wazero.Runtime
}

func newEnv(tb testing.TB, host *fuelHost, cfg wazero.RuntimeConfig) *env {
	tb.Helper()
	ctx := context.Background()
	if cfg == nil {
		cfg = wazero.NewRuntimeConfigCompiler()
	}
	cfg = cfg.WithCompilationCache(compileCache).
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesThreads)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	var err error
	if host != nil {
		_, err = r.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(host.tick),
				[]api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).
			Export(ImportTick).Instantiate(ctx)
		if err != nil {
			tb.Fatal(err)
		}
	}
	return &env{ctx: ctx, r: r}
}

// envModule provides what features.wat imports. It is a wasm module because
// host modules cannot export globals.
const envModule = `(module
  (func (export "add") (param i32 i32) (result i32)
    (i32.add (i32.add (local.get 0) (local.get 1)) (i32.const 1000)))
  (global (export "scale") i32 (i32.const 7)))`

// addEnvModule instantiates envModule as "env".
func (e *env) addEnvModule(tb testing.TB) {
	tb.Helper()
	if _, err := e.r.InstantiateWithConfig(e.ctx, watSource(tb, envModule), wazero.NewModuleConfig().WithName("env")); err != nil {
		tb.Fatal(err)
	}
}

// instantiate compiles and instantiates wasm without running _start.
func (e *env) instantiate(tb testing.TB, wasm []byte, args ...string) (api.Module, *bytes.Buffer) {
	tb.Helper()
	compiled, err := e.r.CompileModule(e.ctx, wasm)
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	var stdout bytes.Buffer
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithArgs(append([]string{"guest"}, args...)...).WithStdout(&stdout).WithStderr(&stdout)
	mod, err := e.r.InstantiateModule(e.ctx, compiled, cfg)
	if err != nil {
		tb.Fatalf("instantiate: %v", err)
	}
	return mod, &stdout
}

// runStart runs a WASI command's _start and returns its output and exit
// code.
func runStart(ctx context.Context, mod api.Module, stdout *bytes.Buffer) (string, uint32, error) {
	_, err := mod.ExportedFunction("_start").Call(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return stdout.String(), exit.ExitCode(), nil
	}
	return stdout.String(), 0, err
}
