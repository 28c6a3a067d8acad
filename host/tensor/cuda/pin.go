package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/infernet/infernet/host/tensor"
)

// Pin page-locks mem, host memory the caller keeps (a GPU worker's shared
// memory with its parent, package remote), so that Write and Read copy it
// by DMA at the bus's speed: from pageable memory the driver copies through
// a staging buffer of its own, at a fraction of that (gpu-check's 256 MiB
// upload on the H100 took 78 ms, 3.3 GB/s). Unpin mem before it is
// unmapped or freed; Close unpins what is left. Without the driver's calls
// it returns an error wrapping tensor.ErrUnsupported; an error leaves the
// copies as they were, only slower.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) Pin(mem []byte) error {
	if b.drv.cuMemHostRegister == nil {
		return fmt.Errorf("cuda: %w: the driver cannot page-lock host memory", tensor.ErrUnsupported)
	}
	if len(mem) == 0 {
		return nil
	}
	p := unsafe.Pointer(&mem[0])
	return b.q.do(context.Background(), func() error {
		if _, ok := b.pinned[p]; ok {
			return fmt.Errorf("cuda: Pin of memory at %p pinned already", p)
		}
		if err := b.flush(); err != nil {
			return err
		}
		if err := cuErr(symHostRegister, b.drv.cuMemHostRegister(p, uintptr(len(mem)), 0)); err != nil {
			return err
		}
		b.pinned[p] = struct{}{}
		return nil
	})
}

// Unpin undoes Pin of mem. Nothing is in flight from it: Write and Read
// copy such memory synchronously.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) Unpin(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	p := unsafe.Pointer(&mem[0])
	return b.q.do(context.Background(), func() error {
		if _, ok := b.pinned[p]; !ok {
			return fmt.Errorf("cuda: Unpin of memory at %p not pinned", p)
		}
		if err := b.flush(); err != nil { // still pinned: Close unregisters it
			return err
		}
		delete(b.pinned, p)
		return cuErr(symHostUnregister, b.drv.cuMemHostUnregister(p))
	})
}
