// Package remote is a tensor backend in another process: a Backend
// forwards every operation over a pipe to a worker process that runs it on
// its own backend (on a provider, the CUDA backend of one GPU). A GPU
// fault that poisons the worker's CUDA context (a "sticky" error, after
// which even a new context fails) then ends the worker, not the provider:
// the job it hit fails as the provider's (tensor.ErrDeviceLost), the next
// Alloc starts a fresh worker, and the provider keeps its GPU.
//
// # Protocol
//
// The worker (Serve) reads operations from its stdin and writes replies to
// its stdout, in compact binary frames (wire.go); buffers are ids the
// parent chose. Read, Argmax and Sample wait for the worker's reply;
// every other operation, Alloc and Free included, is queued: written to a buffer that goes
// out at the next synchronous call (or when it fills), run by the worker
// in order, no reply. A queued operation's failure is kept on the buffers
// it writes, in the worker: a Read of any of them, or a synchronous
// operation on one, returns it, naming the operation; operations on them
// fail with it too. Failures follow the data rather than "the next call"
// because jobs share a Backend: another job's Read must not see them, and
// the buffers it only reads (a model's weights, shared by every job) keep
// none.
//
// Buffers of a MiB or more (a model's weights) travel through a shared
// memory file the parent passes the worker at its start (shm.go), not the
// pipe: one copy on each side, and a wait for the worker, which hands the
// memory to its backend.
//
// What the parent can check without the worker it checks before sending,
// so a bad call fails at once: the buffers are this Backend's, alive and
// of the current worker; Read and Write sizes; GEMM sizes and element
// types, which the CUDA backend takes on trust. Other shapes are the host
// module's to validate, as for every backend.
//
// A queued operation the worker's backend answers with
// tensor.ErrUnsupported runs on a reference backend in the worker (see
// Serve); a synchronous one returns the error, and the host module falls
// back as it does for any backend.
//
// A job's deadline travels with each operation, so the worker interrupts
// long operations as the backend would in process; a cancellation without
// a deadline stops the job's next operation in the parent, not one that
// is running.
//
// # Lost workers
//
// A worker that reports a lost device (an error wrapping
// tensor.ErrDeviceLost, such as cuda.Error's sticky faults) exits; one that
// crashes or is killed is the same. Every call waiting on it, and every
// later use of its buffers, fails with an error wrapping
// tensor.ErrDeviceLost. The next Alloc starts a new worker; while starts
// keep failing, a start is tried again after a delay that doubles from
// Config.Backoff up to Config.MaxBackoff, and calls in between fail at
// once.
package remote

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// Config says how to start a worker.
type Config struct {
	// Command returns the command of a new worker process, which runs
	// Serve (or Refuse) on its stdin and stdout; called at New and at each
	// restart. Its Stderr, if nil, is the parent's.
	Command func() *exec.Cmd
	// Logger reports lost and restarted workers; default slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds a worker's start, its backend's opening
	// included; default 1 minute.
	StartTimeout time.Duration
	// Backoff is the delay before a start is tried again after two failed
	// in a row (a worker lost before it answered anything counts as one);
	// it doubles with each further failure up to MaxBackoff. Defaults 1 s
	// and 1 minute.
	Backoff, MaxBackoff time.Duration
}

// Backend is a tensor.Backend and tensor.Transformer whose operations run
// in a worker process. It is safe for concurrent use; a Buffer is used by
// one job at a time.
type Backend struct {
	cfg        Config
	log        *slog.Logger
	name       string
	class      tensor.Class
	transforms bool
	precisions []tensor.Precision // the worker's backend's reduced ones
	weights    uint64             // the weight types it holds, bit dt
	ids        atomic.Uint64
	stats      counters

	closed atomic.Bool // set once, under mu

	mu    sync.Mutex // guards the fields below
	cur   *child
	fails int       // consecutive failed starts and workers lost unused
	next  time.Time // no start before
	last  error     // why the last start or worker failed
}

var (
	_ tensor.Backend      = (*Backend)(nil)
	_ tensor.Transformer  = (*Backend)(nil)
	_ tensor.Precisioner  = (*Backend)(nil)
	_ tensor.WeightHolder = (*Backend)(nil)
)

// errClosed is returned by operations on a closed Backend.
var errClosed = errors.New("remote: backend closed")

// New starts a worker and returns a Backend named and classed as the
// worker's backend. A worker that refuses (Refuse) gives an error of its
// class, wrapping tensor.ErrUnavailable when its backend cannot run here;
// one that fails to start gives an error wrapping tensor.ErrUnavailable.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Command == nil {
		return nil, errors.New("remote: no worker command")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	b := &Backend{cfg: cfg, log: cfg.Logger}
	c, h, err := b.start(ctx)
	if err != nil {
		var we *workerError
		if errors.As(err, &we) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", tensor.ErrUnavailable, err)
	}
	b.name, b.class, b.transforms, b.precisions, b.weights = h.name, h.class, h.transforms, h.precisions, h.weights
	b.cur = c
	return b, nil
}

// Name implements tensor.Backend: the worker's backend's name.
func (b *Backend) Name() string { return b.name }

// Class implements tensor.Backend: the worker's backend's class.
func (b *Backend) Class() tensor.Class { return b.class }

// Backend returns b for the host module: b itself when the worker's
// backend implements tensor.Transformer, else b without those methods, so
// the host module runs language-model jobs in host memory rather than
// copying their operands to the worker and back for every fallback.
func (b *Backend) Backend() tensor.Backend {
	if b.transforms {
		return b
	}
	return struct{ tensor.Backend }{b}
}

// Close stops the worker: it closes its stdin, which ends Serve, and
// waits for it to exit (killing it after StartTimeout). Later operations
// fail; a second Close returns nil.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return nil
	}
	b.closed.Store(true)
	c := b.cur
	b.cur = nil
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.stop(b.cfg.StartTimeout)
}

// child returns the running worker, starting one if the last was lost.
func (b *Backend) child() (*child, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, errClosed
	}
	if b.cur != nil && b.cur.lostErr() == nil {
		return b.cur, nil
	}
	if wait := time.Until(b.next); wait > 0 {
		return nil, fmt.Errorf("remote: %w: next start of the worker in %v: %w", tensor.ErrDeviceLost, wait.Round(time.Millisecond), b.last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StartTimeout)
	defer cancel()
	c, _, err := b.start(ctx)
	if err != nil {
		b.failed(err)
		b.log.Warn("tensor worker did not start", "backend", b.name, "failures", b.fails, "err", err)
		return nil, fmt.Errorf("remote: %w: restarting the worker: %w", tensor.ErrDeviceLost, err)
	}
	b.cur = c
	b.log.Info("tensor worker restarted", "backend", b.name, "pid", c.cmd.Process.Pid)
	return c, nil
}

// failed counts a failure and sets when the next start may be; b.mu is
// held.
func (b *Backend) failed(err error) {
	b.fails++
	b.last = err
	var d time.Duration
	if b.fails > 1 {
		d = min(b.cfg.Backoff<<min(b.fails-2, 30), b.cfg.MaxBackoff)
	}
	b.next = time.Now().Add(d)
}

// lost records a worker's end.
func (b *Backend) lost(c *child, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return
	}
	if c.used.Load() {
		b.fails = 0 // it served: the device worked until now
	}
	b.failed(err)
	b.log.Warn("tensor worker lost", "backend", b.name, "pid", c.cmd.Process.Pid, "err", err)
}

// hello is what a worker's greeting says.
type hello struct {
	name       string
	class      tensor.Class
	transforms bool
	precisions []tensor.Precision // besides f32
	shm        bool               // it maps the shared memory passed
	weights    uint64             // the weight types its backend holds, bit dt
}

// start runs a worker and reads its greeting.
func (b *Backend) start(ctx context.Context) (*child, hello, error) {
	var h hello
	cmd := b.cfg.Command()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, h, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, h, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	m, err := newShm()
	if noShm {
		m, err = nil, errors.New("turned off by a test")
	}
	if err != nil {
		b.log.Debug("tensor worker without shared memory", "err", err)
	} else {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, m.f)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", shmEnv, 2+len(cmd.ExtraFiles)))
	}
	if err := cmd.Start(); err != nil {
		if m != nil {
			m.close()
		}
		return nil, h, fmt.Errorf("remote: starting the worker: %w", err)
	}
	c := &child{b: b, cmd: cmd, in: in, w: bufio.NewWriterSize(countWrites{in, &b.stats.writes}, bufSize),
		r: bufio.NewReaderSize(out, bufSize), done: make(chan struct{})}
	greeted := make(chan error, 1)
	go func() { greeted <- c.greeting(&h) }()
	select {
	case err = <-greeted:
	case <-ctx.Done():
		err = fmt.Errorf("remote: the worker did not start: %w", ctx.Err())
	}
	switch {
	case err != nil:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if m != nil {
			m.close()
		}
		return nil, h, err
	case m != nil && !h.shm:
		m.close() // a worker that does not map it
	default:
		c.shm = m
	}
	go c.readLoop()
	return c, h, nil
}

// Stats counts a Backend's traffic with its workers since New: what a
// decode step costs in crossings, whatever the device's speed.
type Stats struct {
	// Waits is the synchronous calls (Read, Argmax, Sample): each waits
	// for the worker to run everything queued before it.
	Waits uint64
	// Writes is the writes to the worker's pipe: queued operations go out
	// together, at the next wait or after flushFrames of them (or when the
	// buffer of bufSize fills).
	Writes uint64
	// Frames is the operations sent, Allocs and Frees among them.
	Frames, Allocs, Frees uint64
}

type counters struct{ waits, writes, frames, allocs, frees atomic.Uint64 }

// Stats returns b's counts so far.
func (b *Backend) Stats() Stats {
	c := &b.stats
	return Stats{Waits: c.waits.Load(), Writes: c.writes.Load(), Frames: c.frames.Load(), Allocs: c.allocs.Load(), Frees: c.frees.Load()}
}

// Sub returns the counts from o to s.
func (s Stats) Sub(o Stats) Stats {
	return Stats{Waits: s.Waits - o.Waits, Writes: s.Writes - o.Writes, Frames: s.Frames - o.Frames, Allocs: s.Allocs - o.Allocs, Frees: s.Frees - o.Frees}
}

// countWrites counts the writes to a worker's pipe.
type countWrites struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countWrites) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.w.Write(p)
}

// child is one worker process.
type child struct {
	b   *Backend
	cmd *exec.Cmd
	in  io.Closer
	r   *bufio.Reader // owned by the reading goroutine

	wmu     sync.Mutex // guards w, scratch and unsent; held while a frame is written
	w       *bufio.Writer
	scratch []byte
	unsent  int // queued frames written to w since it was last flushed

	pmu     sync.Mutex // guards pending and lost
	pending []*waiter  // synchronous calls sent, in order
	lost    error

	used atomic.Bool   // a reply came back
	done chan struct{} // closed when the worker has exited

	shmMu sync.Mutex // held by one large Write or Read at a time
	shm   *shm       // nil: large buffers go through the pipe
}

// waiter is a synchronous call waiting for its reply.
type waiter struct {
	op   opcode
	dst  []byte // Read's destination
	val  uint64
	err  error
	done chan struct{}
}

// greeting reads the worker's first frame.
func (c *child) greeting(h *hello) error {
	var f frame
	if err := readFrame(c.r, &f); err != nil {
		return fmt.Errorf("remote: reading the worker's greeting: %w", err)
	}
	switch {
	case f.code == replyErr && len(f.vals) == 1:
		return &workerError{msg: string(f.blob), class: errClass(f.vals[0])}
	case f.code != replyHello || len(f.vals) != 6:
		return fmt.Errorf("remote: the worker's greeting is frame %d with %d values", f.code, len(f.vals))
	case f.vals[0] != version:
		return fmt.Errorf("remote: the worker speaks version %d, not %d", f.vals[0], version)
	}
	h.name, h.class, h.transforms, h.shm, h.weights = string(f.blob), tensor.Class(f.vals[1]), f.vals[2] != 0, f.vals[4] != 0, f.vals[5]
	for _, p := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		if f.vals[3]&(1<<p) != 0 {
			h.precisions = append(h.precisions, p)
		}
	}
	return nil
}

// readLoop reads replies until the worker's stdout ends, then reaps it.
func (c *child) readLoop() {
	err := c.readReplies()
	_ = c.cmd.Process.Kill() // a protocol error leaves it running
	werr := c.cmd.Wait()
	if err == io.EOF {
		err = fmt.Errorf("remote: the worker exited: %v", werr)
		if werr == nil {
			err = errors.New("remote: the worker exited")
		}
	}
	c.die(fmt.Errorf("%w: %w", tensor.ErrDeviceLost, err))
	c.shmMu.Lock()
	if c.shm != nil {
		c.shm.close()
		c.shm = nil
	}
	c.shmMu.Unlock()
	close(c.done)
}

// readReplies hands each reply to its waiter; it returns at the end of
// the stream or on a lost device.
func (c *child) readReplies() error {
	var f frame
	for {
		n, err := readHeader(c.r, &f)
		if err != nil {
			return err
		}
		switch f.code {
		case replyLost:
			f.blob = make([]byte, n)
			if _, err := io.ReadFull(c.r, f.blob); err != nil {
				return unexpected(err)
			}
			c.die(fmt.Errorf("remote: %w: %s", tensor.ErrDeviceLost, f.blob))
			// It has nothing left to do, and must not hold the GPU's
			// memory while it takes its time to exit.
			_ = c.cmd.Process.Kill()
			continue // until its stdout ends
		case replyOK, replyErr:
		default:
			return fmt.Errorf("remote: unexpected frame %d from the worker", f.code)
		}
		c.pmu.Lock()
		if len(c.pending) == 0 {
			c.pmu.Unlock()
			return errors.New("remote: a reply nobody waits for")
		}
		w := c.pending[0]
		c.pending = c.pending[1:]
		c.pmu.Unlock()
		if err := c.receive(w, &f, n); err != nil {
			w.err = err
			close(w.done)
			return err
		}
		c.used.Store(true)
		close(w.done)
	}
}

// receive reads the rest of a reply for w.
func (c *child) receive(w *waiter, f *frame, n int) error {
	if f.code == replyErr {
		msg := make([]byte, n)
		if _, err := io.ReadFull(c.r, msg); err != nil {
			return unexpected(err)
		}
		class := classOther
		if len(f.vals) > 0 {
			class = errClass(f.vals[0])
		}
		w.err = &workerError{msg: string(msg), class: class}
		return nil
	}
	if n != 0 && n != len(w.dst) || len(f.vals) != 1 {
		return fmt.Errorf("remote: a reply of %d bytes and %d values to %d", n, len(f.vals), w.op)
	}
	if _, err := io.ReadFull(c.r, w.dst[:n]); err != nil {
		return unexpected(err)
	}
	w.val = f.vals[0]
	return nil
}

// die marks the worker lost with err (the first cause wins) and fails the
// calls waiting on it.
func (c *child) die(err error) {
	c.pmu.Lock()
	if c.lost != nil {
		c.pmu.Unlock()
		return
	}
	c.lost = err
	pending := c.pending
	c.pending = nil
	c.pmu.Unlock()
	for _, w := range pending {
		w.err = err
		close(w.done)
	}
	c.b.lost(c, err)
}

// lostErr returns why the worker is lost, or nil.
func (c *child) lostErr() error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.lost
}

// send writes a frame; with a waiter it is a synchronous call, flushed at
// once, whose reply the reading goroutine hands to w.
func (c *child) send(op opcode, vals []uint64, blob []byte, w *waiter) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w != nil {
		c.pmu.Lock()
		if c.lost != nil {
			c.pmu.Unlock()
			return c.lost
		}
		c.pending = append(c.pending, w)
		c.pmu.Unlock()
	} else if err := c.lostErr(); err != nil {
		return err
	}
	c.b.stats.frames.Add(1)
	if w != nil {
		c.b.stats.waits.Add(1)
	}
	c.scratch = appendFrame(c.scratch[:0], byte(op), vals, len(blob))
	_, err := c.w.Write(c.scratch)
	if err == nil {
		_, err = c.w.Write(blob)
	}
	if c.unsent++; err == nil && (w != nil || c.unsent >= flushFrames) {
		err = c.w.Flush()
		c.unsent = 0
	}
	if err != nil {
		// A broken pipe: the worker is gone, and the reader will say why.
		_ = c.cmd.Process.Kill()
		if w == nil {
			return fmt.Errorf("remote: %w: %w", tensor.ErrDeviceLost, err)
		}
	}
	return nil
}

// flushFrames is how many queued operations go to the worker in one
// write at most: a few transformer layers' (13 each in a decode step), so
// the worker starts on a step's first layers while the guest issues its
// last, rather than on all of them at the token's wait. The host's floor
// under a 1.1B decode step (make bench-host, 2 cores, side by side):
// 894-952 tok/s with one write a token, 1,007-1,052 with 32 operations a
// write, 994-1,072 with 64, 893-908 with 4.
const flushFrames = 32

// call sends a synchronous operation and waits for its reply.
func (c *child) call(op opcode, vals []uint64, dst []byte) (uint64, error) {
	w := &waiter{op: op, dst: dst, done: make(chan struct{})}
	if err := c.send(op, vals, nil, w); err != nil {
		return 0, err
	}
	<-w.done
	return w.val, w.err
}

// stop closes the worker's stdin and waits for it to exit, killing it
// after timeout.
func (c *child) stop(timeout time.Duration) error {
	c.wmu.Lock()
	_ = c.w.Flush()
	err := c.in.Close()
	c.wmu.Unlock()
	if errors.Is(err, os.ErrClosed) {
		err = nil // exec's Wait closed it: the worker is gone already (readLoop reaped it)
	}
	select {
	case <-c.done:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("remote: the worker did not stop; killed")
	}
	return err
}

// buffer is a Backend's tensor: id in the worker c.
type buffer struct {
	c     *child
	id    uint64
	dt    abi.DType
	n     int
	freed atomic.Bool
}

// DType implements tensor.Buffer.
func (x *buffer) DType() abi.DType { return x.dt }

// Len implements tensor.Buffer.
func (x *buffer) Len() int { return x.n }

func (x *buffer) bytes() int64 { return x.dt.Bytes(x.n) }

// own converts bufs back to this Backend's buffers, all of one worker, and
// returns that worker; a lost worker's buffers give its error.
func (b *Backend) own(name string, bufs []tensor.Buffer, out []*buffer) (*child, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	var c *child
	for i, t := range bufs {
		x, ok := t.(*buffer)
		if !ok || x.c.b != b {
			return nil, fmt.Errorf("remote: %s: buffer %T not allocated by this backend", name, t)
		}
		if x.freed.Load() {
			return nil, fmt.Errorf("remote: %s: buffer used after Free", name)
		}
		if err := x.c.lostErr(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if c != nil && x.c != c {
			return nil, fmt.Errorf("remote: %s: buffers of two workers", name)
		}
		c, out[i] = x.c, x
	}
	return c, nil
}

// Alloc implements tensor.Backend (queued): the parent numbers the
// buffer and the worker allocates it when the operation arrives, so a
// step's intermediates cost no wait. A failed allocation (the device's
// memory is full) is kept on the buffer: the first wait on it returns it.
// A weight type the worker's backend does not hold is refused at once
// (tensor.ErrUnsupported). Alloc starts a new worker if the last was lost.
func (b *Backend) Alloc(dt abi.DType, n int) (tensor.Buffer, error) {
	if dt.Bytes(n) < 0 {
		return nil, fmt.Errorf("remote: alloc of %d elements of %v", n, dt)
	}
	if dt.Weight() && !b.HoldsWeights(dt) {
		return nil, fmt.Errorf("remote: %w: %v weights on the worker's %s", tensor.ErrUnsupported, dt, b.name)
	}
	c, err := b.child()
	if err != nil {
		return nil, err
	}
	x := &buffer{c: c, id: b.ids.Add(1), dt: dt, n: n}
	if err := c.send(opAlloc, []uint64{x.id, uint64(dt), word(n)}, nil, nil); err != nil {
		return nil, err
	}
	b.stats.allocs.Add(1)
	return x, nil
}

// Free implements tensor.Backend (queued). Freeing twice, or a buffer of a
// lost worker, is a no-op.
func (b *Backend) Free(t tensor.Buffer) {
	x, ok := t.(*buffer)
	if !ok || x.c.b != b || x.freed.Swap(true) {
		return
	}
	if x.c.send(opFree, []uint64{x.id}, nil, nil) == nil {
		b.stats.frees.Add(1)
	}
}

// Write implements tensor.Backend (queued): src is copied before Write
// returns.
func (b *Backend) Write(t tensor.Buffer, src []byte) error {
	var xs [1]*buffer
	c, err := b.own("write", []tensor.Buffer{t}, xs[:])
	if err != nil {
		return err
	}
	if int64(len(src)) != xs[0].bytes() {
		return fmt.Errorf("remote: write of %d bytes into %d elements of %v", len(src), xs[0].n, xs[0].dt)
	}
	copySrc := func(mem []byte) error { copy(mem, src); return nil }
	if ok, err := c.viaShm(opWriteShm, xs[0].id, len(src), copySrc, nil); ok {
		return err
	}
	return c.send(opWrite, []uint64{xs[0].id}, src, nil)
}

// Fill implements tensor.Filler: fill writes into the shared memory the
// worker copies t from (a buffer the pipe takes, small or huge, is filled
// in the heap and written as Write writes it).
func (b *Backend) Fill(t tensor.Buffer, fill func(dst []byte) error) error {
	var xs [1]*buffer
	c, err := b.own("write", []tensor.Buffer{t}, xs[:])
	if err != nil {
		return err
	}
	n := int(xs[0].bytes())
	if ok, err := c.viaShm(opWriteShm, xs[0].id, n, fill, nil); ok {
		return err
	}
	src := make([]byte, n)
	if err := fill(src); err != nil {
		return err
	}
	return c.send(opWrite, []uint64{xs[0].id}, src, nil)
}

// viaShm moves a large buffer of n bytes through shared memory, waiting
// for the worker: into buffer id as fill writes it (opWriteShm), or
// buffer id's bytes into dst (opReadShm). It reports false, having done
// nothing, for a buffer the pipe takes (small, huge, or a worker without
// shared memory); an error of fill's is returned as is, with nothing sent.
func (c *child) viaShm(op opcode, id uint64, n int, fill func(mem []byte) error, dst []byte) (bool, error) {
	if n < shmMin || n > shmMax {
		return false, nil
	}
	c.shmMu.Lock()
	defer c.shmMu.Unlock()
	if c.shm == nil {
		return false, nil
	}
	mem, err := c.shm.grow(n)
	if err != nil {
		return false, nil // the pipe still works
	}
	if fill != nil {
		if err := fill(mem); err != nil {
			return true, err
		}
	}
	if _, err := c.call(op, []uint64{id, word(n)}, nil); err != nil {
		return true, err
	}
	copy(dst, mem)
	return true, nil
}

// Read implements tensor.Backend: it waits for the operations queued
// before it, and returns the failure of one that wrote t.
func (b *Backend) Read(t tensor.Buffer, dst []byte) error {
	var xs [1]*buffer
	c, err := b.own("read", []tensor.Buffer{t}, xs[:])
	if err != nil {
		return err
	}
	if int64(len(dst)) != xs[0].bytes() {
		return fmt.Errorf("remote: read of %d elements of %v into %d bytes", xs[0].n, xs[0].dt, len(dst))
	}
	if ok, err := c.viaShm(opReadShm, xs[0].id, len(dst), nil, dst); ok {
		return err
	}
	_, err = c.call(opRead, []uint64{xs[0].id}, dst)
	return err
}

// op sends an operation on bufs with params p (and the blob of Embed):
// queued, or waited for when its spec says so.
func (b *Backend) op(ctx context.Context, op opcode, p []uint64, blob []byte, bufs ...tensor.Buffer) (int, error) {
	sp := &specs[op]
	var xs [maxVals]*buffer
	c, err := b.own(sp.name, bufs, xs[:len(bufs)])
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var vals [maxVals]uint64
	if d, ok := ctx.Deadline(); ok {
		vals[0] = uint64(d.UnixNano())
	}
	n := 1 + copy(vals[1:], p)
	for _, x := range xs[:len(bufs)] {
		vals[n] = x.id
		n++
	}
	if !sp.sync {
		return 0, c.send(op, vals[:n], blob, nil)
	}
	v, err := c.call(op, vals[:n], nil)
	return num(v), err
}

// queue sends a queued operation.
func (b *Backend) queue(ctx context.Context, op opcode, p []uint64, bufs ...tensor.Buffer) error {
	_, err := b.op(ctx, op, p, nil, bufs...)
	return err
}

// Gemm implements tensor.Backend (queued).
func (b *Backend) Gemm(ctx context.Context, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	return b.gemm(ctx, tensor.F32, p, a, x, c)
}

func (b *Backend) gemm(ctx context.Context, prec tensor.Precision, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	if err := checkGemm(1, p, a, x, c); err != nil {
		return err
	}
	g := gemmWords(p)
	return b.queue(ctx, opGemm, append(g[:], uint64(prec)), a, x, c)
}

// GemmBatched implements tensor.Backend (queued).
func (b *Backend) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	return b.gemmBatched(ctx, tensor.F32, batch, p, a, x, c)
}

func (b *Backend) gemmBatched(ctx context.Context, prec tensor.Precision, batch int, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	if err := checkGemm(batch, p, a, x, c); err != nil {
		return err
	}
	g := gemmWords(p)
	return b.queue(ctx, opGemmBatched, append(g[:], word(batch), uint64(prec)), a, x, c)
}

// HoldsWeights implements tensor.WeightHolder: what the worker's backend
// said at the first worker's start.
func (b *Backend) HoldsWeights(dt abi.DType) bool {
	return dt == abi.F32 || dt > 0 && dt < 64 && b.weights&(1<<dt) != 0
}

// Precisions implements tensor.Precisioner: the reduced precisions of the
// worker's backend.
func (b *Backend) Precisions() []tensor.Precision { return slices.Clone(b.precisions) }

// WithPrecision implements tensor.Precisioner: b itself for F32, else a
// view whose f32 products (Gemm, GemmBatched, MatMul) the worker runs on
// its backend's view at p; every other operation, and the buffers, are
// b's.
func (b *Backend) WithPrecision(p tensor.Precision) (tensor.Backend, error) {
	switch {
	case p == tensor.F32:
		return b.Backend(), nil
	case !slices.Contains(b.precisions, p):
		return nil, fmt.Errorf("remote: %w: precision %v on the worker's %s", tensor.ErrUnsupported, p, b.name)
	}
	v := &precisionView{Backend: b, p: p}
	if !b.transforms {
		return struct{ tensor.Backend }{v}, nil
	}
	return v, nil
}

// precisionView is a Backend whose f32 products run at precision p.
type precisionView struct {
	*Backend
	p tensor.Precision
}

// Gemm implements tensor.Backend at the view's precision (queued).
func (v *precisionView) Gemm(ctx context.Context, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	return v.gemm(ctx, v.p, p, a, x, c)
}

// GemmBatched implements tensor.Backend at the view's precision (queued).
func (v *precisionView) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, x, c tensor.Buffer) error {
	return v.gemmBatched(ctx, v.p, batch, p, a, x, c)
}

// MatMul implements tensor.Transformer at the view's precision (queued).
func (v *precisionView) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	return v.matMul(ctx, v.p, t, n, k, x, w, out)
}

// checkGemm refuses, before anything is sent, batch products of p that
// their buffers do not fit, which a GPU backend takes on trust (cuBLAS
// would read past them), and element types no backend multiplies, with
// tensor.ErrUnsupported at once rather than at the next Read.
func checkGemm(batch int, p tensor.GemmParams, a, b, c tensor.Buffer) error {
	switch {
	case a.DType() == abi.F32 && b.DType() == abi.F32 && c.DType() == abi.F32:
	case a.DType() == abi.I8 && b.DType() == abi.I8 && c.DType() == abi.I32:
	default:
		return fmt.Errorf("remote: gemm %v·%v→%v: %w", a.DType(), b.DType(), c.DType(), tensor.ErrUnsupported)
	}
	if batch < 0 || p.M < 0 || p.N < 0 || p.K < 0 ||
		a.Len() != batch*p.M*p.K || b.Len() != batch*p.K*p.N || c.Len() != batch*p.M*p.N {
		return fmt.Errorf("remote: %d gemms of %d×%d×%d with buffers of %d, %d, %d elements",
			batch, p.M, p.N, p.K, a.Len(), b.Len(), c.Len())
	}
	return nil
}

// Binary implements tensor.Backend (queued).
func (b *Backend) Binary(ctx context.Context, op abi.Op, a, x, out tensor.Buffer) error {
	return b.queue(ctx, opBinary, []uint64{uint64(op)}, a, x, out)
}

// Unary implements tensor.Backend (queued).
func (b *Backend) Unary(ctx context.Context, op abi.Op, a, out tensor.Buffer) error {
	return b.queue(ctx, opUnary, []uint64{uint64(op)}, a, out)
}

// Softmax implements tensor.Backend (queued).
func (b *Backend) Softmax(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return b.queue(ctx, opSoftmax, []uint64{word(rows), word(cols)}, a, out)
}

// Reduce implements tensor.Backend (queued).
func (b *Backend) Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out tensor.Buffer) error {
	return b.queue(ctx, opReduce, []uint64{uint64(op), word(rows), word(cols)}, a, out)
}

// LayerNorm implements tensor.Backend (queued).
func (b *Backend) LayerNorm(ctx context.Context, rows, cols int, a, g, x, out tensor.Buffer) error {
	return b.queue(ctx, opLayerNorm, []uint64{word(rows), word(cols)}, a, g, x, out)
}

// SoftmaxCausal implements tensor.Backend (queued).
func (b *Backend) SoftmaxCausal(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return b.queue(ctx, opSoftmaxCausal, []uint64{word(rows), word(cols)}, a, out)
}

// CrossEntropy implements tensor.Backend (queued).
func (b *Backend) CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad tensor.Buffer) error {
	return b.queue(ctx, opCrossEntropy, []uint64{word(rows), word(cols)}, logits, targets, loss, grad)
}

// AdamW implements tensor.Backend (queued).
func (b *Backend) AdamW(ctx context.Context, p tensor.AdamWParams, w, g, m, v tensor.Buffer) error {
	f := f64word
	return b.queue(ctx, opAdamW, []uint64{f(p.LR), f(p.Beta1), f(p.Beta2), f(p.Eps), f(p.Decay), word(p.Step)}, w, g, m, v)
}

// Transpose implements tensor.Backend (queued).
func (b *Backend) Transpose(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return b.queue(ctx, opTranspose, []uint64{word(rows), word(cols)}, a, out)
}

// Gather implements tensor.Backend (queued).
func (b *Backend) Gather(ctx context.Context, rows, cols int, table, idx, out tensor.Buffer) error {
	return b.queue(ctx, opGather, []uint64{word(rows), word(cols)}, table, idx, out)
}

// MatMul implements tensor.Transformer (queued).
func (b *Backend) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	return b.matMul(ctx, tensor.F32, t, n, k, x, w, out)
}

func (b *Backend) matMul(ctx context.Context, prec tensor.Precision, t, n, k int, x, w, out tensor.Buffer) error {
	return b.queue(ctx, opMatMul, []uint64{word(t), word(n), word(k), uint64(prec)}, x, w, out)
}

var _ tensor.Fused = (*Backend)(nil)

// MatMulAdd implements tensor.Fused (queued): one operation for the
// worker, which runs it fused where its backend can and composed where it
// cannot (tensor.MatMulAdd).
func (b *Backend) MatMulAdd(ctx context.Context, t, n, k int, x, w, r, out tensor.Buffer) error {
	return b.queue(ctx, opMatMulAdd, []uint64{word(t), word(n), word(k), uint64(tensor.F32)}, x, w, r, out)
}

// MatMulSwiGLU implements tensor.Fused (queued), as MatMulAdd.
func (b *Backend) MatMulSwiGLU(ctx context.Context, t, n, k int, x, gate, up, out tensor.Buffer) error {
	return b.queue(ctx, opMatMulSwiGLU, []uint64{word(t), word(n), word(k), uint64(tensor.F32)}, x, gate, up, out)
}

// RMSNormMatMul implements tensor.Fused (queued), as MatMulAdd: one
// operation for up to 3 weights, else the norm and the matmuls composed
// here.
func (b *Backend) RMSNormMatMul(ctx context.Context, t, k int, eps float32, x, g tensor.Buffer, ws []tensor.Buffer, ns []int, outs []tensor.Buffer) error {
	m := len(ws)
	if m == 0 || m > 3 || len(ns) != m || len(outs) != m {
		return tensor.ComposeRMSNormMatMul(ctx, b, t, k, eps, x, g, ws, ns, outs)
	}
	var pa [6]uint64
	var ba [8]tensor.Buffer
	p := append(pa[:0], word(t), word(k), f32word(eps))
	bufs := append(ba[:0], x, g)
	for i := range ws {
		p = append(p, word(ns[i]))
	}
	bufs = append(append(bufs, ws...), outs...)
	return b.queue(ctx, opRMSNormMatMul1+opcode(m-1), p, bufs...)
}

// RMSNormMatMulSwiGLU implements tensor.Fused (queued), as MatMulAdd.
func (b *Backend) RMSNormMatMulSwiGLU(ctx context.Context, t, n, k int, eps float32, x, g, gate, up, out tensor.Buffer) error {
	return b.queue(ctx, opRMSNormMatMulSwiGLU, []uint64{word(t), word(n), word(k), f32word(eps)}, x, g, gate, up, out)
}

// Embed implements tensor.Transformer (queued): ids are copied before it
// returns.
func (b *Backend) Embed(ctx context.Context, rows, cols int, table tensor.Buffer, ids []int32, out tensor.Buffer) error {
	blob := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(blob[4*i:], uint32(id))
	}
	_, err := b.op(ctx, opEmbed, []uint64{word(rows), word(cols)}, blob, table, out)
	return err
}

// RMSNorm implements tensor.Transformer (queued).
func (b *Backend) RMSNorm(ctx context.Context, rows, cols int, eps float32, x, g, out tensor.Buffer) error {
	return b.queue(ctx, opRMSNorm, []uint64{word(rows), word(cols), f32word(eps)}, x, g, out)
}

// RoPE implements tensor.Transformer (queued).
func (b *Backend) RoPE(ctx context.Context, p tensor.RoPEParams, x tensor.Buffer) error {
	params := ropeWords(p)
	if p.Factors != nil {
		return b.queue(ctx, opRoPEFactors, params, x, p.Factors)
	}
	return b.queue(ctx, opRoPE, params, x)
}

// RoPEKV implements tensor.Fused (queued), as MatMulAdd.
func (b *Backend) RoPEKV(ctx context.Context, p tensor.RoPEParams, qCols int, q, k, v, kc, vc tensor.Buffer) error {
	params := ropeWords(p, word(qCols))
	if p.Factors != nil {
		return b.queue(ctx, opRoPEKVFactors, params, q, k, v, kc, vc, p.Factors)
	}
	return b.queue(ctx, opRoPEKV, params, q, k, v, kc, vc)
}

// SwiGLU implements tensor.Transformer (queued).
func (b *Backend) SwiGLU(ctx context.Context, a, x, out tensor.Buffer) error {
	return b.queue(ctx, opSwiGLU, nil, a, x, out)
}

// CopyRows implements tensor.Transformer (queued).
func (b *Backend) CopyRows(ctx context.Context, row, cols int, src, dst tensor.Buffer) error {
	return b.queue(ctx, opCopyRows, []uint64{word(row), word(cols)}, src, dst)
}

// Attention implements tensor.Transformer (queued).
func (b *Backend) Attention(ctx context.Context, p tensor.AttentionParams, q, k, v, out tensor.Buffer) error {
	return b.queue(ctx, opAttention, []uint64{word(p.Rows), word(p.Heads), word(p.KVHeads), word(p.HeadDim), word(p.Pos)}, q, k, v, out)
}

// Argmax implements tensor.Transformer; it waits for the worker.
func (b *Backend) Argmax(ctx context.Context, x tensor.Buffer) (int, error) {
	return b.op(ctx, opArgmax, nil, nil, x)
}

// Sample implements tensor.Transformer; it waits for the worker.
func (b *Backend) Sample(ctx context.Context, p tensor.SampleParams, x tensor.Buffer) (int, error) {
	return b.op(ctx, opSample, []uint64{f32word(p.Temperature), f32word(p.TopP), f32word(p.Coin)}, nil, x)
}
