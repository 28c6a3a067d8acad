// Package cudatest builds the FAKE CUDA driver and cuBLAS
// (host/tensor/cuda/testdata/fakecuda.c) for tests: package cuda's own, and
// those of packages that run a CUDA backend in another process (package
// remote), which point cuda.Config.Driver and CUBLAS at the library it
// builds.
//
// fake driver: checks our call sequence, not a GPU.
package cudatest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// builds caches each build by its C flags: one compile per test binary.
var (
	mu     sync.Mutex
	dir    string
	builds = map[string]build{}
)

type build struct {
	path, skip string
	err        error
}

// Build compiles the fake library with the extra C flags (say
// -DFAKE_NO_STRIDED_BATCHED) once per test binary and returns its path as
// the driver and as cuBLAS (one library holds both). Without a C compiler
// it skips tb; a failed compile fails it. Call Remove from TestMain when
// the tests are done.
func Build(tb testing.TB, flags ...string) (driver, cublas string) {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := strings.Join(flags, " ")
	b, ok := builds[key]
	if !ok {
		b = compile(flags)
		builds[key] = b
	}
	if b.skip != "" {
		tb.Skip("fake driver not built: " + b.skip)
	}
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path, b.path
}

// Remove deletes the libraries Build made.
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
	}
	clear(builds)
}

// compile builds one library; mu is held.
func compile(flags []string) build {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return build{skip: fmt.Sprintf("no C compiler (%s): %v", cc, err)}
	}
	src, err := source()
	if err != nil {
		return build{err: err}
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fakecuda"); err != nil {
			return build{err: err}
		}
	}
	out := filepath.Join(dir, fmt.Sprintf("libfakecuda%d.so", len(builds)))
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", out}, flags...)
	cmd := exec.Command(cc, append(args, src, "-lm", "-lpthread")...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return build{err: fmt.Errorf("%s: %w\n%s", cmd, err, msg)}
	}
	return build{path: out}
}

// fakeSource is fakecuda.c's path in the module; it includes ../kernels.cu.
const fakeSource = "host/tensor/cuda/testdata/fakecuda.c"

// source finds fakecuda.c from the working directory up to the module's
// root: go test runs a package's tests in its directory, and `make
// gpu-check` runs prebuilt test binaries in theirs too, on a copy of the
// tree that need not be where they were built.
func source() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			src := filepath.Join(d, fakeSource)
			// The compiler reads these, not this process: stat them so go
			// test's cache notices when they change.
			for _, f := range []string{src, filepath.Join(d, "host/tensor/cuda/kernels.cu")} {
				if _, err := os.Stat(f); err != nil {
					return "", err
				}
			}
			return src, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("cudatest: no go.mod above " + wd)
		}
	}
}
