//go:build linux || darwin || freebsd || netbsd

package openblas

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/host/tensor"
)

// library is one loaded OpenBLAS with its resolved entry points.
type library struct {
	path     string
	coreName string
	coreType string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32,
		a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32,
		beta float32, c unsafe.Pointer, ldc int32)
	setNumThreads func(n int32)
	getNumThreads func() int32
	getCoreName   func() string

	threadsMu sync.Mutex
}

var (
	// envOnce sets OPENBLAS_CORETYPE once per process, before the first dlopen.
	envOnce     sync.Once
	envCoreType string

	// loadMu guards libs: every OpenBLAS is initialised once per process
	// (dlopen runs its constructor and starts its thread pool).
	loadMu sync.Mutex
	libs   = map[uintptr]*library{} // by dlopen handle
)

// defaultNames are tried in order when Config.Library is "".
var defaultNames = map[string][]string{
	"linux":   {"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0", "libopenblaso.so.0"},
	"freebsd": {"libopenblas.so.0", "libopenblas.so", "libopenblasp.so"},
	"netbsd":  {"libopenblas.so.0", "libopenblas.so"},
	"darwin": {"libopenblas.dylib", "/opt/homebrew/opt/openblas/lib/libopenblas.dylib",
		"/usr/local/opt/openblas/lib/libopenblas.dylib"},
}

// load returns the library named path (or the first default name that
// loads), loading and initialising it on first use.
func load(path string) (*library, error) {
	envOnce.Do(func() { envCoreType = setCoreType() })
	names := []string{path}
	if path == "" {
		names = defaultNames[runtime.GOOS]
	}
	var errs []error
	missing := true
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err)
			missing = missing && strings.Contains(err.Error(), "No such file")
			continue
		}
		return register(h, name)
	}
	if missing {
		// One line, not one per name tried: the usual case, OpenBLAS not
		// installed.
		return nil, fmt.Errorf("openblas: %w: not installed (none of %s found; on Debian: apt install libopenblas0)", tensor.ErrUnavailable, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("openblas: %w: %w", tensor.ErrUnavailable, errors.Join(errs...))
}

// register returns the library for the dlopen handle h, resolving its
// symbols the first time. dlopen returns the same handle for every name of
// one loaded file, so each library is set up once.
func register(h uintptr, name string) (*library, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if lib := libs[h]; lib != nil {
		purego.Dlclose(h) // balance this Dlopen; the first one keeps the library loaded
		return lib, nil
	}
	lib, err := resolve(h, name)
	if err != nil {
		purego.Dlclose(h)
		return nil, err
	}
	lib.coreType = envCoreType
	libs[h] = lib
	return lib, nil
}

// resolve binds the entry points of the freshly opened library h.
func resolve(h uintptr, name string) (*library, error) {
	lib := &library{path: name}
	for _, f := range []struct {
		fptr any
		sym  string
	}{
		{&lib.sgemm, "cblas_sgemm"},
		{&lib.setNumThreads, "openblas_set_num_threads"},
		{&lib.getNumThreads, "openblas_get_num_threads"},
		{&lib.getCoreName, "openblas_get_corename"},
	} {
		addr, err := purego.Dlsym(h, f.sym)
		if err != nil {
			return nil, fmt.Errorf("openblas: %s is not OpenBLAS: %w: %w", name, tensor.ErrUnavailable, err)
		}
		purego.RegisterFunc(f.fptr, addr)
	}
	lib.coreName = lib.getCoreName()
	return lib, nil
}

// setThreads sets OpenBLAS's process-wide thread count.
func (l *library) setThreads(n int) {
	l.threadsMu.Lock()
	defer l.threadsMu.Unlock()
	if int(l.getNumThreads()) != n {
		l.setNumThreads(int32(n))
	}
}

// setCoreType puts the chosen core type into the C environment, where
// OpenBLAS's constructor reads it, unless the user set one. It returns the
// value in force.
//
// os.Setenv reaches the C environment only through the runtime's cgo hook
// (_cgo_setenv). It is there with cgo (runtime/cgo, which purego imports
// when CGO_ENABLED=1) and without (purego's fakecgo provides it); both were
// verified on Linux. Other setups may lack it, so the C environment is read
// back through libc and, if it differs, written with libc's setenv.
func setCoreType() string {
	if v, ok := os.LookupEnv(coreTypeEnv); ok {
		return v
	}
	want := chooseCoreType()
	if want == "" {
		return ""
	}
	os.Setenv(coreTypeEnv, want)
	if cGetenv(coreTypeEnv) != want {
		cSetenv(coreTypeEnv, want)
	}
	return want
}

var (
	libcOnce   sync.Once
	libcGetenv func(name string) string
	libcSetenv func(name, value string, overwrite int32) int32
)

// libc binds getenv and setenv from the C library already in the process.
func libc() bool {
	libcOnce.Do(func() {
		name := "libc.so.6"
		switch runtime.GOOS {
		case "darwin":
			name = "/usr/lib/libSystem.B.dylib"
		case "freebsd":
			name = "libc.so.7"
		case "netbsd":
			name = "libc.so"
		}
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return
		}
		g, err1 := purego.Dlsym(h, "getenv")
		s, err2 := purego.Dlsym(h, "setenv")
		if err1 != nil || err2 != nil {
			return
		}
		purego.RegisterFunc(&libcGetenv, g)
		purego.RegisterFunc(&libcSetenv, s)
	})
	return libcGetenv != nil
}

// cGetenv reads the C environment ("" if unset or libc is not found).
func cGetenv(name string) string {
	if !libc() {
		return ""
	}
	return libcGetenv(name)
}

// cSetenv writes the C environment.
func cSetenv(name, value string) {
	if libc() {
		libcSetenv(name, value, 1)
	}
}
