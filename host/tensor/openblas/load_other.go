//go:build !(linux || darwin || freebsd || netbsd)

package openblas

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/infernet/infernet/host/tensor"
)

// library is never loaded on this platform: purego's dlopen is unix-only.
type library struct {
	path, coreName, coreType string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32,
		a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32,
		beta float32, c unsafe.Pointer, ldc int32)
}

func load(string) (*library, error) {
	return nil, fmt.Errorf("openblas: %w: not supported on %s", tensor.ErrUnavailable, runtime.GOOS)
}

func (*library) setThreads(int) {}
