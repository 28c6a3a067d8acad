package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// errClosed is returned by operations on a closed Backend.
var errClosed = errors.New("cuda: backend closed")

// queue runs functions one at a time on a single goroutine locked to its OS
// thread. A CUDA context is current per thread, so creating it on that
// thread and making every later call there keeps it current without
// cuCtxSetCurrent on each call; it also serialises the jobs sharing a
// Backend, which the single default stream would serialise anyway.
//
// An inline queue (Config.CallerThread) has no goroutine: its functions
// run on the caller's, which owns the thread.
type queue struct {
	mu     sync.RWMutex // held for reading by do, for writing by close
	closed bool
	ops    chan func()
	exited chan struct{}

	inline bool
	one    sync.Mutex // an inline queue's one function at a time
}

// startQueue starts the worker and runs init on it; inline, it runs init
// on the caller's thread. If init fails, fail runs on the same thread to
// undo what init did, the worker exits and the error is returned.
func startQueue(init, fail func() error, inline bool) (*queue, error) {
	if inline {
		if err := protect(init); err != nil {
			return nil, errors.Join(err, protect(fail))
		}
		return &queue{inline: true}, nil
	}
	q := &queue{ops: make(chan func()), exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(q.exited)
		// Never unlocked: the thread held a CUDA context, so it ends with the
		// goroutine instead of going back to the scheduler's pool.
		runtime.LockOSThread()
		if err := protect(init); err != nil {
			started <- errors.Join(err, protect(fail))
			return
		}
		started <- nil
		for f := range q.ops {
			f()
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return q, nil
}

// protect runs f, turning a panic (say, a purego misuse) into an error so a
// provider keeps serving on its other backends.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: panic on the CUDA thread: %v", r)
		}
	}()
	return f()
}

// do runs f on the worker and returns its error. It gives up with ctx.Err()
// if ctx ends before f starts; once started, f itself checks ctx.
func (q *queue) do(ctx context.Context, f func() error) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.inline {
		q.one.Lock()
		defer q.one.Unlock()
		return protect(f)
	}
	res := make(chan error, 1)
	select {
	case q.ops <- func() { res <- protect(f) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-res
}

// close waits for running operations, runs final on the worker and stops
// it. Later calls return nil.
func (q *queue) close(final func() error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	if q.inline {
		q.one.Lock()
		defer q.one.Unlock()
		return protect(final)
	}
	res := make(chan error, 1)
	q.ops <- func() { res <- protect(final) }
	err := <-res
	close(q.ops)
	<-q.exited
	return err
}
