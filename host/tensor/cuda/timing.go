package cuda

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/infernet/infernet/host/tensor"
)

// Device timing, for profiles: a mark is a CUDA event recorded on the
// default stream after the work queued so far, so the time between two
// marks is the device's time for the work queued between them, including
// any idle time when the device ran ahead of the host. A GPU worker
// brackets each operation with two marks under `generate --profile`
// (package remote); nothing marks otherwise.

// Mark records a mark after the work queued so far. Release it when done.
// Without the driver's events it returns an error wrapping
// tensor.ErrUnsupported.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) Mark() (uint64, error) {
	if b.drv.cuEventCreate == nil {
		return 0, fmt.Errorf("cuda: %w: the driver has no events", tensor.ErrUnsupported)
	}
	var ev uintptr
	err := b.q.do(context.Background(), func() error {
		if n := len(b.events); n > 0 {
			ev, b.events = b.events[n-1], b.events[:n-1]
		} else if err := cuErr(symEventCreate, b.drv.cuEventCreate(&ev, 0)); err != nil {
			return err
		}
		if err := b.flush(); err != nil { // an event on the default stream ends a capture
			b.events = append(b.events, ev)
			return err
		}
		if err := cuErr(symEventRecord, b.drv.cuEventRecord(ev, 0)); err != nil {
			b.events = append(b.events, ev)
			return err
		}
		b.marked[ev] = true
		return nil
	})
	return uint64(ev), err
}

// Elapsed is the device's time from mark from to mark to, waiting for the
// device to pass to.
func (b *Backend) Elapsed(from, to uint64) (time.Duration, error) {
	var ms float32
	err := b.q.do(context.Background(), func() error {
		if !b.marked[uintptr(from)] || !b.marked[uintptr(to)] {
			return fmt.Errorf("cuda: Elapsed of marks %#x, %#x not made by Mark or released", from, to)
		}
		if err := b.flush(); err != nil {
			return err
		}
		if err := cuErr(symEventSync, b.drv.cuEventSynchronize(uintptr(to))); err != nil {
			return err
		}
		return cuErr(symEventElapsed, b.drv.cuEventElapsedTime(&ms, uintptr(from), uintptr(to)))
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Release returns marks for reuse by Mark. Unknown marks are ignored.
func (b *Backend) Release(marks ...uint64) {
	_ = b.q.do(context.Background(), func() error {
		for _, m := range marks {
			if ev := uintptr(m); b.marked[ev] {
				delete(b.marked, ev)
				b.events = append(b.events, ev)
			}
		}
		return nil
	})
}

// destroyEvents destroys every event, marked or free; on the queue's
// thread, at Close.
func (b *Backend) destroyEvents() error {
	var errs []error
	for ev := range b.marked {
		b.events = append(b.events, ev)
	}
	clear(b.marked)
	for _, ev := range b.events {
		if err := cuErr(symEventDestroy, b.drv.cuEventDestroy(ev)); err != nil {
			errs = append(errs, err)
		}
	}
	b.events = nil
	return errors.Join(errs...)
}
