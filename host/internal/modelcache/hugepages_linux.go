package modelcache

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the hosts we serve
// (x86-64 and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// hugePages asks the kernel for transparent huge pages (MADV_HUGEPAGE) in
// the memory of b, which is not yet touched: Go's heap does not ask, so
// where THP is "madvise" (a common default) it gets none. The advice covers
// the 2 MiB-aligned span around b, not only its inside, so a weight of a
// few MiB (a 768×768 f32 projection is 2.25 MiB) that straddles two huge
// pages still gets them: the neighbouring bytes are other heap objects,
// most often the model's other weights, and advice changes no contents.
// Advice only: a failure (THP off, an old kernel) changes nothing.
func hugePages(b []byte) {
	if len(b) < hugePage {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := p&^(hugePage-1), (p+uintptr(len(b))+hugePage-1)&^(hugePage-1)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE)
	runtime.KeepAlive(b)
}
