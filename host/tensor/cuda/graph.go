package cuda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unsafe"
)

// CUDA graphs (Config.Graphs). A decode step is a few hundred small
// kernels; launched one by one, each costs the host a driver call of a few
// microseconds and the device a gap between kernels. With Graphs, the
// Backend captures the work it would launch between two synchronisations
// (a step, up to the read of its token) on a stream of its own, and
// launches it as one graph when something must wait for it or cannot be
// captured: a read, a synchronisation, cuBLAS, a free that returns memory
// to the driver, an event. The stream is a blocking one, so the default
// stream's work and the graph's stay in order.
//
// Instantiating a graph costs far more than launching one, so each shape
// of step (its sequence of node kinds and kernels) keeps its instantiated
// graph, and the next capture of that shape updates it with its own
// parameters (cuGraphExecUpdate), as llama.cpp does. The Go side keeps what
// it captured, so that if any graph call fails the step still runs, its
// work launched directly, and graphs are off for the Backend from then on.
//
// hardware-untested: the calls and their order are tested against the
// fake driver, which captures, updates and replays as the driver
// documents; not the driver's own graphs.

// graphState is a Backend's capture state; owned by the queue's thread.
type graphState struct {
	on        bool    // Config.Graphs, the driver has the calls, nothing failed
	stream    uintptr // the capture stream
	capturing bool
	span      []spanOp // the captured work, in order
	shape     uint64   // a hash of span's node kinds and kernels
	execs     map[uint64]uintptr
	order     []uint64 // execs' shapes, oldest first
	stats     GraphStats
}

// GraphStats counts a Backend's graphs (Config.Graphs).
type GraphStats struct {
	// Captured is the operations captured into graphs; Launched the
	// graphs launched, Instantiated those instantiated and Updated those
	// launched after updating an instantiated one.
	Captured, Launched, Instantiated, Updated int64
	// Off is why graphs were turned off, or nil.
	Off error
}

// maxExecs bounds the instantiated graphs kept: a decode step has one
// shape or a few (a step split by a synchronisation).
const maxExecs = 8

// captureModeRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: other threads'
// calls (none here: every call is on the queue's thread) are not checked.
const captureModeRelaxed = 2

// spanOp is one captured operation: a kernel with its parameter values,
// or an async memset, device copy or staged host copy.
type spanOp struct {
	kind     spanKind
	k        kernelID
	grid     uint32
	nargs    int
	vals     [maxKernelParams]uint64
	dst, src uint64
	host     unsafe.Pointer
	n        uintptr
	v        uint8
}

type spanKind uint8

const (
	spanKernel spanKind = iota
	spanMemset
	spanDtoD
	spanHtoD
)

// initGraphs makes the capture stream, when Config.Graphs asks and the
// driver has the calls. Flags 0 make it a blocking stream: it waits for
// the default stream's work, and the default stream for its.
func (b *Backend) initGraphs() {
	g := &b.graph
	if !b.cfg.Graphs {
		return
	}
	if b.drv.cuStreamCreate == nil {
		b.graphsOff(errors.New("the driver lacks the graph calls (CUDA 12+)"))
		return
	}
	if err := cuErr(symStreamCreate, b.drv.cuStreamCreate(&g.stream, 0)); err != nil {
		b.graphsOff(err)
		return
	}
	g.on, g.execs = true, map[uint64]uintptr{}
}

// teardownGraphs launches what is captured and releases the graphs and the
// stream.
func (b *Backend) teardownGraphs() error {
	g := &b.graph
	err := b.flush()
	for _, e := range g.execs {
		err = errors.Join(err, cuErr(symExecDestroy, b.drv.cuGraphExecDestroy(e)))
	}
	g.execs, g.order, g.on = nil, nil, false
	if g.stream != 0 {
		err = errors.Join(err, cuErr(symStreamDestroy, b.drv.cuStreamDestroy(g.stream)))
		g.stream = 0
	}
	return err
}

// GraphStats returns the Backend's graph counts.
func (b *Backend) GraphStats() GraphStats {
	var s GraphStats
	_ = b.q.do(context.Background(), func() error { s = b.graph.stats; return nil })
	return s
}

// maxSpan bounds a capture: a chain of this many operations without a
// read (a training step's, say) is launched and waited for, as settle
// would have, so the device never runs far behind. A decode step is far
// smaller (a 1.1B model's: 295 nodes; an 80-layer one's about 1,200). A
// variable so tests can make chains long.
var maxSpan = 4096

// full reports whether a capture is under way with maxSpan operations:
// the next capturable call synchronises (launching it) first.
func (g *graphState) full() bool { return g.capturing && len(g.span) >= maxSpan }

// capture starts a capture, with graphs on and none under way, and
// reports the stream the next capturable call goes to: the capture
// stream, or 0 (the default stream) without one.
func (b *Backend) capture() (uintptr, error) {
	g := &b.graph
	if !g.on {
		return 0, nil
	}
	if g.full() {
		if err := b.sync(); err != nil {
			return 0, err
		}
	}
	if !g.capturing {
		if err := cuErr(symBeginCapture, b.drv.cuStreamBeginCapture(g.stream, captureModeRelaxed)); err != nil {
			b.graphsOff(err)
			return 0, nil
		}
		g.capturing, g.span, g.shape = true, g.span[:0], 14695981039346656037 // FNV-1a's offset basis
	}
	return g.stream, nil
}

// captured records op, just issued to the capture stream.
func (b *Backend) captured(op spanOp) {
	g := &b.graph
	g.span = append(g.span, op)
	for _, c := range [2]uint64{uint64(op.kind), uint64(op.k)} {
		g.shape = (g.shape ^ c) * 1099511628211
	}
	g.stats.Captured++
}

// flush ends a capture under way and launches it as a graph: the work
// captured so far runs before whatever comes next on the default stream.
// Every driver call that cannot be captured is preceded by one. When a
// graph call fails, graphs go off and the captured work is launched
// directly; the error returned is then that launch's.
func (b *Backend) flush() error {
	g := &b.graph
	if !g.capturing {
		return nil
	}
	g.capturing = false
	var graph uintptr
	if err := cuErr(symEndCapture, b.drv.cuStreamEndCapture(g.stream, &graph)); err != nil {
		b.graphsOff(err)
		return b.replay()
	}
	defer b.drv.cuGraphDestroy(graph)
	exec, ok := g.execs[g.shape]
	if ok {
		var info graphUpdateInfo
		if b.drv.cuGraphExecUpdate(exec, graph, &info) == 0 {
			g.stats.Updated++
		} else { // a shape's hash collided, or the driver would not: start over
			_ = b.drv.cuGraphExecDestroy(exec)
			b.forget(g.shape)
			ok = false
		}
	}
	if !ok {
		if err := cuErr(symInstantiate, b.drv.cuGraphInstantiate(&exec, graph, 0)); err != nil {
			b.graphsOff(err)
			return b.replay()
		}
		g.stats.Instantiated++
		b.keep(g.shape, exec)
	}
	if err := cuErr(symGraphLaunch, b.drv.cuGraphLaunch(exec, g.stream)); err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Sticky() {
			return err // the device is gone: nothing can run the work now
		}
		b.graphsOff(err)
		return b.replay()
	}
	g.stats.Launched++
	return nil
}

// keep remembers exec as shape's, giving back the oldest beyond maxExecs.
func (b *Backend) keep(shape uint64, exec uintptr) {
	g := &b.graph
	if len(g.order) >= maxExecs {
		old := g.order[0]
		_ = b.drv.cuGraphExecDestroy(g.execs[old])
		b.forget(old)
	}
	g.execs[shape] = exec
	g.order = append(g.order, shape)
}

// forget drops shape's graph from the cache (already destroyed).
func (b *Backend) forget(shape uint64) {
	g := &b.graph
	delete(g.execs, shape)
	for i, s := range g.order {
		if s == shape {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
}

// graphsOff turns graphs off for good, keeping why, and says so once on
// the default logger (a GPU worker's goes to its provider's stderr).
func (b *Backend) graphsOff(err error) {
	g := &b.graph
	g.on = false
	if g.stats.Off == nil {
		g.stats.Off = fmt.Errorf("cuda graphs off: %w", err)
		slog.Warn("cuda: CUDA graphs turned off; each operation is launched on its own", "err", err)
	}
}

// replay launches the captured span directly on the default stream, in
// order: what the graph would have run.
func (b *Backend) replay() error {
	g := &b.graph
	span := g.span
	g.span = g.span[:0]
	for i := range span {
		if err := b.run(&span[i], 0); err != nil {
			return err
		}
	}
	return nil
}

// issue runs op in order with the queued work: captured, with graphs on,
// else on the default stream.
func (b *Backend) issue(op *spanOp) error {
	s, err := b.capture()
	if err != nil {
		return err
	}
	if err := b.run(op, s); err != nil {
		return err
	}
	if s != 0 {
		b.captured(*op)
	}
	return nil
}

// run issues op to stream s, or without one (0) to the default stream,
// where memsets and device copies are the synchronous calls (which the
// default stream orders with its kernels).
func (b *Backend) run(op *spanOp, s uintptr) error {
	switch op.kind {
	case spanKernel:
		return b.launchVals(op.k, op.grid, op.vals[:op.nargs], s)
	case spanMemset:
		if s != 0 {
			return cuErr(symMemsetD8Async, b.drv.cuMemsetD8Async(op.dst, op.v, op.n, s))
		}
		return cuErr(symMemsetD8, b.drv.cuMemsetD8(op.dst, op.v, op.n))
	case spanDtoD:
		if s != 0 {
			return cuErr(symMemcpyDtoDA, b.drv.cuMemcpyDtoDAsync(op.dst, op.src, op.n, s))
		}
		return cuErr(symMemcpyDtoD, b.drv.cuMemcpyDtoD(op.dst, op.src, op.n))
	case spanHtoD:
		return cuErr(symMemcpyHtoDA, b.drv.cuMemcpyHtoDAsync(op.dst, op.host, op.n, s))
	}
	return fmt.Errorf("cuda: operation kind %d", op.kind)
}

// memset sets n bytes at p to v in order with the queued work.
func (b *Backend) memset(p uint64, v uint8, n uintptr) error {
	return b.issue(&spanOp{kind: spanMemset, dst: p, v: v, n: n})
}

// copyDtoD copies n bytes from src to dst on the device in order with the
// queued work.
func (b *Backend) copyDtoD(dst, src uint64, n uintptr) error {
	return b.issue(&spanOp{kind: spanDtoD, dst: dst, src: src, n: n})
}
