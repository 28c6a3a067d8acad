package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// Serve is a worker's loop: it greets the parent on w with be's name and
// class, then runs the operations read from r on be until r ends (the
// parent closed it: nil) or ctx does. An operation that fails with an
// error wrapping tensor.ErrDeviceLost (a sticky CUDA fault) is reported to
// the parent and ends Serve with that error: the process must exit, since
// nothing in it can use the device again.
//
// A backend that page-locks host memory (Pin and Unpin, as cuda.Backend)
// gets the shared memory with the parent pinned each time the worker maps
// it, so large writes and reads are copied at the bus's speed.
//
// A queued operation that be answers with tensor.ErrUnsupported runs on a
// reference backend in the worker, with the buffers copied there and back:
// by the time it runs, the host module has moved on and cannot fall back
// itself. The reference backend's results are the same bits wherever it
// runs, so the job sees what the host module's fallback would give.
func Serve(ctx context.Context, r io.Reader, w io.Writer, be tensor.Backend) error {
	_, tr := be.(tensor.Transformer)
	var precs uint64
	for _, p := range tensor.PrecisionsOf(be) {
		precs |= 1 << p
	}
	s := &server{
		be:     be,
		ref:    reference.New(reference.Config{}),
		bufs:   map[uint64]tensor.Buffer{},
		poison: map[uint64]error{},
		w:      bufio.NewWriterSize(w, bufSize),
		shm:    workerShm(),
	}
	if p, ok := be.(pinner); ok && s.shm != nil {
		s.shm.pin = p // a GPU's copies of shared memory at the bus's speed
		defer s.shm.unpinMapping()
	}
	if err := writeFrame(s.w, replyHello, []uint64{version, uint64(be.Class()), flag(tr), precs, flag(s.shm != nil), heldWeights(be)}, []byte(be.Name())); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	rd := bufio.NewReaderSize(r, bufSize)
	var f frame
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := readFrame(rd, &f); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("remote: reading the parent: %w", err)
		}
		if err := s.handle(ctx, &f); err != nil {
			if errors.Is(err, tensor.ErrDeviceLost) {
				_ = writeFrame(s.w, replyLost, nil, []byte(err.Error()))
				_ = s.w.Flush()
			}
			return err
		}
	}
}

// Refuse answers a parent's handshake with err instead of a backend, for a
// worker whose backend could not open (no driver, no device): the parent's
// New returns an error of err's class, tensor.ErrUnavailable for one that
// wraps it.
func Refuse(w io.Writer, err error) error {
	bw := bufio.NewWriter(w)
	if werr := writeFrame(bw, replyErr, []uint64{uint64(classOf(err))}, []byte(err.Error())); werr != nil {
		return werr
	}
	return bw.Flush()
}

// bufSize is the buffering of each direction of the pipe: queued
// operations collect there and go out together at the next synchronous
// call, or after flushFrames of them.
const bufSize = 64 << 10

// server is a worker's state. Its maps are keyed by the parent's buffer
// ids.
type server struct {
	be, ref tensor.Backend
	bufs    map[uint64]tensor.Buffer
	// poison holds, per buffer, the failure of a queued operation that
	// wrote it (writes): reading it returns that error, operations on it fail
	// with it, and writing all of it again clears it. Failures follow the
	// data, so one job's failed operation never shows in another's reads.
	poison map[uint64]error
	views  map[tensor.Precision]tensor.Backend // of be, by precision (at)
	w      *bufio.Writer
	shm    *shm     // large buffers' way, when the parent passed it
	prof   *profile // while a profile is on (Backend.Profile)

	// The context of the last deadline, kept while operations share it.
	deadline uint64
	dctx     context.Context
	dcancel  context.CancelFunc
}

// handle runs one frame; it returns an error only when the worker must
// stop (a lost device, a broken pipe).
func (s *server) handle(ctx context.Context, f *frame) error {
	op := opcode(f.code)
	if (op == opFree || op == opWrite || op == opRead) && len(f.vals) != 1 ||
		(op == opWriteShm || op == opReadShm) && (len(f.vals) != 2 || s.shm == nil) ||
		op == opProfile && len(f.vals) != 1 {
		return fmt.Errorf("remote: operation %d with %d values", op, len(f.vals))
	}
	switch op {
	case opAlloc:
		return s.alloc(f.vals)
	case opFree:
		id := f.vals[0]
		if x, ok := s.bufs[id]; ok {
			s.be.Free(x)
		}
		delete(s.bufs, id)
		delete(s.poison, id)
		return nil
	case opWrite:
		id := f.vals[0]
		x, ok := s.bufs[id]
		if !ok {
			return nil // freed or never allocated: the parent refused it already
		}
		if err := s.be.Write(x, f.blob); err != nil {
			if errors.Is(err, tensor.ErrDeviceLost) {
				return fmt.Errorf("write: %w", err)
			}
			s.poison[id] = fmt.Errorf("write: %w", err)
			return nil
		}
		delete(s.poison, id)
		return nil
	case opRead:
		return s.read(f.vals[0])
	case opWriteShm:
		return s.writeShm(f.vals[0], num(f.vals[1]))
	case opReadShm:
		return s.readShm(f.vals[0], num(f.vals[1]))
	case opProfile:
		return s.profileOp(f.vals[0] != 0)
	}
	if op == 0 || op >= numOps || specs[op].run == nil || len(f.vals) != 1+specs[op].params+specs[op].bufs {
		return fmt.Errorf("remote: operation %d with %d values", op, len(f.vals))
	}
	sp := &specs[op]
	p, ids := f.vals[1:1+sp.params], f.vals[1+sp.params:]
	var bufs [maxVals]tensor.Buffer
	err := s.poisoned(op, ids)
	for i, id := range ids {
		x, ok := s.bufs[id]
		if !ok && err == nil {
			err = fmt.Errorf("%s: buffer %d not allocated", sp.name, id)
		}
		bufs[i] = x
	}
	idx, be := 0, s.be
	if err == nil && precise[op] {
		be, err = s.at(tensor.Precision(p[len(p)-1]))
	}
	if err == nil {
		octx := s.context(ctx, f.vals[0])
		var t timing
		if s.prof != nil {
			t = s.prof.begin()
		}
		idx, err = sp.run(octx, be, p, bufs[:len(ids)], f.blob)
		if errors.Is(err, tensor.ErrUnsupported) && !sp.sync {
			err = s.fallback(octx, op, p, bufs[:len(ids)], f.blob)
		}
		if s.prof != nil {
			s.prof.end(op, t)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", sp.name, err)
		}
		if errors.Is(err, tensor.ErrDeviceLost) {
			return err
		}
	}
	if sp.sync {
		return s.reply(err, word(idx), nil)
	}
	for i, id := range ids {
		switch {
		case err != nil && writes[op]&(1<<i) != 0:
			if _, ok := s.bufs[id]; ok {
				s.poison[id] = err
			}
		case err == nil && whole[op]&(1<<i) != 0:
			delete(s.poison, id) // written anew
		}
	}
	return nil
}

// at returns the worker's backend at precision p, its view made once.
func (s *server) at(p tensor.Precision) (tensor.Backend, error) {
	if p == tensor.F32 {
		return s.be, nil
	}
	if v, ok := s.views[p]; ok {
		return v, nil
	}
	v, err := tensor.WithPrecision(s.be, p)
	if err != nil {
		return nil, err
	}
	if s.views == nil {
		s.views = map[tensor.Precision]tensor.Backend{}
	}
	s.views[p] = v
	return v, nil
}

// alloc makes buffer id (queued): a failure is kept on id, so the
// parent's first wait on it returns it.
func (s *server) alloc(v []uint64) error {
	if len(v) != 3 {
		return fmt.Errorf("remote: alloc with %d values", len(v))
	}
	id := v[0]
	if _, ok := s.bufs[id]; ok {
		return fmt.Errorf("remote: alloc of buffer %d, which exists", id) // the parent numbers them once
	}
	x, err := s.be.Alloc(abi.DType(v[1]), num(v[2]))
	if err != nil {
		err = fmt.Errorf("alloc: %w", err)
		if errors.Is(err, tensor.ErrDeviceLost) {
			return err
		}
		s.poison[id] = err
		return nil
	}
	s.bufs[id] = x
	return nil
}

// read answers a Read of buffer id with its bytes, or the failure that
// poisoned it.
func (s *server) read(id uint64) error {
	if err := s.poison[id]; err != nil {
		return s.reply(err, 0, nil)
	}
	x, ok := s.bufs[id]
	if !ok {
		return s.reply(fmt.Errorf("read: buffer %d not allocated", id), 0, nil)
	}
	data := make([]byte, x.DType().Bytes(x.Len()))
	if err := s.be.Read(x, data); err != nil {
		err = fmt.Errorf("read: %w", err)
		if errors.Is(err, tensor.ErrDeviceLost) {
			return err
		}
		return s.reply(err, 0, nil)
	}
	return s.reply(nil, 0, data)
}

// writeShm writes buffer id whole from the first n bytes of shared
// memory (a Write's), and answers once they are copied: the parent reuses
// the memory then. A failure is kept on the buffer too, as a queued
// write's.
func (s *server) writeShm(id uint64, n int) error {
	x, ok := s.bufs[id]
	if !ok {
		return s.reply(nil, 0, nil) // freed or never allocated: the parent refused it already
	}
	data, err := s.shm.view(n)
	if err == nil {
		err = s.be.Write(x, data)
	}
	if err != nil {
		err = fmt.Errorf("write: %w", err)
		if errors.Is(err, tensor.ErrDeviceLost) {
			return err
		}
		s.poison[id] = err
		return s.reply(err, 0, nil)
	}
	delete(s.poison, id)
	return s.reply(nil, 0, nil)
}

// readShm answers a Read of buffer id, n bytes, with them in shared
// memory, or the failure that poisoned it.
func (s *server) readShm(id uint64, n int) error {
	if err := s.poison[id]; err != nil {
		return s.reply(err, 0, nil)
	}
	x, ok := s.bufs[id]
	if !ok {
		return s.reply(fmt.Errorf("read: buffer %d not allocated", id), 0, nil)
	}
	data, err := s.shm.view(n)
	if err == nil && int64(n) != x.DType().Bytes(x.Len()) {
		err = fmt.Errorf("%d bytes of a buffer of %d", n, x.DType().Bytes(x.Len()))
	}
	if err == nil {
		err = s.be.Read(x, data)
	}
	if err != nil {
		err = fmt.Errorf("read: %w", err)
		if errors.Is(err, tensor.ErrDeviceLost) {
			return err
		}
	}
	return s.reply(err, 0, nil)
}

// poisoned returns the failure kept on one of the buffers op reads, or
// nil: not on one it writes whole, whatever befell what that buffer held
// (a job reuses its freed buffers for new results).
func (s *server) poisoned(op opcode, ids []uint64) error {
	for i, id := range ids {
		if whole[op]&(1<<i) != 0 {
			continue // written anew; where it is read too, that place checks it
		}
		if err := s.poison[id]; err != nil {
			return err
		}
	}
	return nil
}

// reply answers a synchronous operation and sends everything out.
func (s *server) reply(err error, val uint64, blob []byte) error {
	var werr error
	if err != nil {
		werr = writeFrame(s.w, replyErr, []uint64{uint64(classOf(err))}, []byte(err.Error()))
	} else {
		werr = writeFrame(s.w, replyOK, []uint64{val}, blob)
	}
	if werr == nil {
		werr = s.w.Flush()
	}
	return werr
}

// context returns ctx with the deadline the parent's context had (Unix
// nanoseconds; 0: none), reusing the last one's while it is the same, as
// it is for a job's run of operations.
func (s *server) context(ctx context.Context, deadline uint64) context.Context {
	if deadline == 0 {
		return ctx
	}
	if deadline != s.deadline {
		if s.dcancel != nil {
			s.dcancel()
		}
		s.deadline = deadline
		s.dctx, s.dcancel = context.WithDeadline(ctx, time.Unix(0, int64(deadline)))
	}
	return s.dctx
}

// fallback runs op on the reference backend with copies of bufs (one per
// distinct buffer, so aliasing is kept) and copies back those it writes.
func (s *server) fallback(ctx context.Context, op opcode, p []uint64, bufs []tensor.Buffer, blob []byte) error {
	sp := &specs[op]
	copies := make([]tensor.Buffer, len(bufs))
	seen := map[tensor.Buffer]tensor.Buffer{}
	var order []tensor.Buffer // the written ones, to copy back
	defer func() {
		for _, c := range seen {
			s.ref.Free(c)
		}
	}()
	for i, x := range bufs {
		if writes[op]&(1<<i) != 0 && !slices.Contains(order, x) {
			order = append(order, x)
		}
		if c, ok := seen[x]; ok {
			copies[i] = c
			continue
		}
		c, err := s.ref.Alloc(x.DType(), x.Len())
		if err != nil {
			return err
		}
		data := make([]byte, x.DType().Bytes(x.Len()))
		if err := s.be.Read(x, data); err != nil {
			s.ref.Free(c)
			return err
		}
		if err := s.ref.Write(c, data); err != nil {
			s.ref.Free(c)
			return err
		}
		seen[x], copies[i] = c, c
	}
	if _, err := sp.run(ctx, s.ref, p, copies, blob); err != nil {
		return err
	}
	for _, x := range order {
		data := make([]byte, x.DType().Bytes(x.Len()))
		if err := s.ref.Read(seen[x], data); err != nil {
			return err
		}
		if err := s.be.Write(x, data); err != nil {
			return err
		}
	}
	return nil
}
