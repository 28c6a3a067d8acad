// Package tensorhost implements the "infernet" host module (ABI v3, see
// package abi): a per-job table of tensor handles and the host functions that
// validate guest arguments and run operations on a tensor.Backend.
//
// Data tensors (tensor_from_data) are read-only buffers, shared through a
// model cache across jobs when the session has one. They live in host
// memory, except on a device backend that runs the language-model ops
// (tensor.Transformer) when the session has a DeviceCache: there they are
// copied to the device once and shared from its memory, so a model's
// weights cross the bus once per device, not once per job or op. An op that
// reads a data tensor in host memory runs on the session backend only if its
// buffers are host memory too, else on the reference backend with the job's
// own tensors copied there and back.
//
// The module is instantiated once per wazero runtime; per-job state (the
// Session) travels in the context.Context of each guest call, so many jobs can
// share one runtime concurrently.
package tensorhost

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/batcher"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Defaults for a Session's limits.
const (
	DefaultMaxHandles = 4096
	DefaultMaxBytes   = 256 << 20
)

// Config configures a Session.
type Config struct {
	// Mode is the job's determinism mode. In abi.ModeExact, Backend is ignored
	// and every op runs on Reference.
	Mode abi.Mode
	// Reference is the exact backend; required. It is also the fallback for
	// ops another backend does not support.
	Reference tensor.Backend
	// Backend runs ops in abi.ModeTolerance; nil means Reference.
	Backend tensor.Backend
	// Precision is the precision of the job's f32 GEMMs on Backend
	// (tensor.WithPrecision); ops Reference runs instead are f32. Other
	// than tensor.F32 it needs abi.ModeTolerance and a Backend that offers
	// it, else NewSession fails.
	Precision tensor.Precision
	// MaxHandles caps live tensors (default DefaultMaxHandles).
	MaxHandles int
	// MaxBytes caps the bytes of live tensors (default DefaultMaxBytes).
	MaxBytes int64
	// Budget, if set, is the job's memory budget, which live tensors share
	// with the guest's linear memory: a tensor is allocated only if Budget
	// grants its bytes as well (else ENOMEM), and they are given back when
	// it is freed. Nil: MaxBytes alone limits tensors.
	Budget Budget
	// Abort stops the calling guest for good with cause; it does not return.
	// The sandbox sets it; it is called when ctx is done during an op, and
	// in proof mode when the guest passes ProofConfig.MaxOps.
	Abort func(ctx context.Context, cause error)
	// Charge, if set, bills host work to the guest's fuel, so one counter
	// meters guest and host work alike.
	Charge func(units uint64)
	// Proofs, if set, puts the session in proof mode (see package abi):
	// every i8 GEMM is recorded as a gemmproof.Op, to be proven after the
	// job. Nil: off.
	Proofs *ProofConfig
	// Data are the job's data files by name (the files under /data), for
	// tensor_from_data; a name not here is abi.ENOENT.
	Data map[string]DataFile
	// Cache, if set, keeps data tensors across jobs, keyed by the file's
	// digest, outside the job's memory limit. Nil: each job reads its own,
	// counted in its memory like any tensor.
	Cache *modelcache.Cache
	// DeviceCache, if set with Cache, keeps copies of data tensors in the
	// memory of Backend (made with modelcache.NewOn, freeing to Backend),
	// when Backend's buffers are not host memory and it implements
	// tensor.Transformer. Nil: data tensors stay in host memory.
	DeviceCache *modelcache.Cache
	// Profile times every host call of the job, by function (Session.
	// Profile); off, the calls cost no clock reads.
	Profile bool
	// Batcher, if set, runs the job's matmuls against data tensors
	// (shared weights) through it, the session one of its members until
	// Close, so that concurrent jobs' multiplies by one weight may run as
	// one (package batcher: same bits). Nil: each runs alone.
	Batcher *batcher.Batcher
}

// OpTime is the host calls of one function of the module in a job: how
// many, and the time they took on the host, from the guest's call to its
// return. A queued op returns once its work is queued on the device, and a
// call that waits for the device (a read, argmax) includes the work queued
// before it.
type OpTime struct {
	Op    string
	Calls uint64
	Time  time.Duration
}

// DataFile is one of the job's data files.
type DataFile struct {
	// Path is the file on the host.
	Path string
	// Digest returns the file's SHA-256, which names its tensors in the
	// Cache. The session calls it at most once, when the job first makes a
	// tensor of the file, and only with a Cache.
	Digest func() ([32]byte, error)
}

// Budget is a byte budget shared with other users of the job's memory
// (linmem.Budget implements it). It must be safe for concurrent use.
type Budget interface {
	// Reserve takes n bytes and reports whether they were available; on
	// false nothing is taken.
	Reserve(n int64) bool
	// Release gives back n bytes taken by Reserve.
	Release(n int64)
}

// ProofConfig configures a session's proof mode.
type ProofConfig struct {
	// Templates are the template sizes ops are padded to, ascending (a
	// subset of gemmproof.Templates). An i8 GEMM with max(m, n, k) above the
	// last one is answered with abi.ENOPROOF and not run.
	Templates []int
	// MaxOps caps the ops recorded. The guest's next i8 GEMM stops the job:
	// the session calls Abort with a cause wrapping ErrProofLimit (or, with
	// no Abort, answers abi.ENOPROOF).
	MaxOps int
}

// ErrProofLimit is the cause a proof-mode session stops a job with when it
// asks for more integer GEMMs than ProofConfig.MaxOps.
var ErrProofLimit = errors.New("proof limit exceeded")

// ErrModelCache is the cause a session stops a job with when the model
// cache cannot hold one of its data tensors: the provider's limit, not the
// job's outcome.
var ErrModelCache = errors.New("the model cache cannot hold the job's weights")

// A backend failure that wraps tensor.ErrDeviceLost (a GPU fault that
// poisoned its context, a GPU worker process that died) stops the job with
// that error as its cause: the provider's failure, not the job's outcome,
// like ErrModelCache. Answering EBACKEND instead would let the guest go on
// and finish with output that replicas on working devices do not share.

// Session is one job's view of the host module: its handle table, limits and
// counters. It is used by one guest at a time (guests are single-threaded).
type Session struct {
	cfg     Config
	backend tensor.Backend
	// named is the backend the job was given, which Backend reports; it
	// differs from backend once preferHost moved the job to host memory.
	named tensor.Backend
	// hostBuffers says backend's buffers are *tensor.HostBuffer, so pointer
	// forms can run on views of guest memory without copies.
	hostBuffers bool
	// onDevice holds the data tensors copied to backend's memory (from
	// Config.DeviceCache): read-only, shared with other jobs.
	onDevice map[tensor.Buffer]bool

	handles []*entry // handle h is handles[h-1]; nil when free
	free    []int32  // freed handles, reused first
	live    int
	bytes   int64

	// spare holds freed buffers by type and length, for the next op
	// result of that size (newResult), whose op writes all of it: a decode
	// step frees and makes the same intermediates every token, and on a
	// GPU worker each allocation is a frame and a memset on the device. A
	// new host buffer costs too: while the weights make most of the Go
	// heap, hundreds of tokens pass without a collection, so each is memory
	// the process never touched, whose first write faults its pages in
	// (about 250 faults, 2% of a 110M f32 decode step). Up to maxSpare
	// bytes (maxSpareHost in host memory); their bytes go back to the
	// job's limits while spare, as any freed tensor's.
	spare      map[spareKey][]tensor.Buffer
	spareBytes int64

	ops []gemmproof.Op // recorded in proof mode, in call order

	files map[string]openFile // data files resolved by tensor_from_data
	// pins counts the job's handles of each model-cache key; pinned is
	// what the keys it holds take, by file digest, and counted the bytes
	// of a key counted in the job's memory limit (see pinData).
	pins    map[modelcache.Key]int
	pinned  map[[32]byte]pinnedFile
	counted map[modelcache.Key]int64
	// read, without a Cache, is each region's one buffer while the job
	// holds it: a handle each had been a read each.
	read map[modelcache.Key]tensor.Buffer

	// Stats are the session's counters; read them after the job.
	Stats Stats

	prof []OpTime // by index in functions, with Config.Profile

	member *batcher.Member // in Config.Batcher; nil without
}

// Stats counts a session's host work.
type Stats struct {
	Ops   uint64  // host operations called
	Flops float64 // arithmetic operations performed (2·m·n·k per GEMM)
	// Fuel is the work charged for host ops, in the same units as guest
	// fuel: one unit per element touched, one per 8 multiply-adds.
	Fuel uint64
	// PeakBytes is the most tensor memory live at once.
	PeakBytes int64
	// Fallbacks counts ops the backend did not support, or could not run on
	// data tensors in host memory, and Reference ran.
	Fallbacks uint64
	// DataBytes is the size of the data tensors the job made; DataLoaded
	// is the part of it read from disk for this job, the rest came from the
	// model cache.
	DataBytes, DataLoaded int64
	// DataTime is the time spent making data tensors: hashing files,
	// reading them, or waiting for another job's read.
	DataTime time.Duration
	// DataUploaded is the part of DataBytes this job copied to the
	// device; the rest was there already (Config.DeviceCache).
	DataUploaded int64
}

type entry struct {
	dt    abi.DType
	shape []int
	buf   tensor.Buffer
	size  int64 // bytes counted in the job's limits: 0 for a cached data tensor
	// readOnly marks a data tensor: its buf is a *tensor.HostBuffer, or a
	// buffer of the backend from Config.DeviceCache, and unpin (if set)
	// gives it back to its cache.
	readOnly bool
	unpin    func()
	key      *modelcache.Key // a cached data tensor's, counted in Session.pins
}

func (e *entry) elems() int { return product(e.shape) }

type spareKey struct {
	dt abi.DType
	n  int
}

// maxSpare bounds Session.spare's bytes: a decode step's intermediates
// fit many times over; a long prompt's larger ones are allocated anew.
// maxSpareHost is the bound for host buffers, which are the provider's
// memory beside the model cache for each of its sessions.
const (
	maxSpare     = 64 << 20
	maxSpareHost = 8 << 20
)

// NewSession returns a session for one job.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Reference == nil {
		return nil, errors.New("tensorhost: a reference backend is required")
	}
	if cfg.MaxHandles <= 0 {
		cfg.MaxHandles = DefaultMaxHandles
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	s := &Session{cfg: cfg, backend: cfg.Reference}
	if cfg.Mode == abi.ModeTolerance && cfg.Backend != nil {
		s.backend = cfg.Backend
	}
	if cfg.Precision != tensor.F32 {
		if cfg.Mode != abi.ModeTolerance || cfg.Backend == nil {
			return nil, fmt.Errorf("tensorhost: precision %v needs tolerance mode and a fast backend", cfg.Precision)
		}
		b, err := tensor.WithPrecision(cfg.Backend, cfg.Precision)
		if err != nil {
			return nil, fmt.Errorf("tensorhost: %w", err)
		}
		s.backend = b
	}
	if b, err := s.backend.Alloc(abi.F32, 0); err == nil {
		_, s.hostBuffers = b.(*tensor.HostBuffer)
		s.backend.Free(b)
	}
	s.named = s.backend
	if cfg.Batcher != nil {
		s.member = cfg.Batcher.Join()
	}
	if cfg.Profile {
		s.prof = make([]OpTime, len(functions))
	}
	return s, nil
}

// Profile returns the job's host calls by function, the longest first,
// those it made only (nil without Config.Profile). Read it after the job.
func (s *Session) Profile() []OpTime {
	var out []OpTime
	for i, t := range s.prof {
		if t.Calls > 0 {
			t.Op = functions[i].Name
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b OpTime) int { return cmp.Compare(b.Time, a.Time) })
	return out
}

// GemmOps returns the integer GEMMs recorded in proof mode, in the order
// the guest called them (nil when proof mode is off). Read it after the job.
func (s *Session) GemmOps() []gemmproof.Op { return s.ops }

// admitProof decides, in proof mode, whether an i8 GEMM may run: it must be
// provable (no accumulate, fits a template) and within the cap of ops. Past
// the cap it stops the job.
func (s *Session) admitProof(ctx context.Context, gp tensor.GemmParams) abi.Errno {
	pc := s.cfg.Proofs
	if pc == nil {
		return abi.OK
	}
	if _, ok := gemmproof.Fit(pc.Templates, gp.M, gp.N, gp.K); !ok || gp.Accumulate {
		return abi.ENOPROOF
	}
	if len(s.ops) >= pc.MaxOps {
		if s.cfg.Abort != nil {
			s.cfg.Abort(ctx, fmt.Errorf("%w: more than %d integer GEMMs", ErrProofLimit, pc.MaxOps))
		}
		return abi.ENOPROOF
	}
	return abi.OK
}

// recordProof records an i8 GEMM that ran: a and b are its stored i8
// operands, c its little-endian i32 result. They are copied.
func (s *Session) recordProof(gp tensor.GemmParams, a, b, c []byte) abi.Errno {
	t, _ := gemmproof.Fit(s.cfg.Proofs.Templates, gp.M, gp.N, gp.K)
	var flags int32
	if gp.TransA {
		flags |= abi.GemmTransA
	}
	if gp.TransB {
		flags |= abi.GemmTransB
	}
	ci := make([]int32, len(c)/4)
	for i := range ci {
		ci[i] = int32(binary.LittleEndian.Uint32(c[4*i:]))
	}
	op, err := gemmproof.NewOp(t, gp.M, gp.N, gp.K, flags, int8s(a), int8s(b), ci)
	if err != nil {
		return abi.EBACKEND // cannot happen: admitProof and the shape checks agree
	}
	s.ops = append(s.ops, op)
	return abi.OK
}

// int8s returns bytes as signed values.
func int8s(b []byte) []int8 {
	out := make([]int8, len(b))
	for i, x := range b {
		out[i] = int8(x)
	}
	return out
}

// Backend returns the backend this session's ops run on.
func (s *Session) Backend() tensor.Backend { return s.named }

// preferHost moves a session whose data tensors would stay in host memory
// while its backend's buffers are elsewhere (a backend without the
// language-model ops, tensor.Transformer, a session without a DeviceCache,
// or weights of type dt, which the device does not hold) to the reference
// backend's host memory, at the job's first such data tensor and only while
// the job holds no tensors of its own nor any on the device. Otherwise
// every v3 op would copy its operands, a KV cache among them, off the device
// and back on each call: a 110M-parameter model generated 3.7 tokens/s that
// way on an H100 host against 67 on its CPU. Backend still names the backend
// the job was given; its ops run as that backend's fallbacks do.
func (s *Session) preferHost(dt abi.DType) {
	if s.hostBuffers {
		return
	}
	if s.dataOnDevice() && tensor.HoldsWeights(s.backend, dt) {
		return
	}
	for _, e := range s.handles {
		if e != nil && (!e.readOnly || s.onDevice[e.buf]) {
			return
		}
	}
	s.dropSpares() // the old backend's
	s.backend, s.hostBuffers = s.cfg.Reference, true
}

// dataOnDevice reports whether data tensors go to the memory of the
// session's backend: a device backend with the language-model ops, given a
// DeviceCache.
func (s *Session) dataOnDevice() bool {
	_, lm := s.backend.(tensor.Transformer)
	return lm && !s.hostBuffers && s.cfg.DeviceCache != nil && s.cfg.Cache != nil
}

// Close frees every live tensor and unpins its data tensors. The session
// must not be used afterwards.
func (s *Session) Close() {
	for i, e := range s.handles {
		if e != nil {
			s.drop(e)
			s.handles[i] = nil
		}
	}
	s.free, s.live = nil, 0
	s.dropSpares()
	if s.member != nil {
		s.member.Leave() // others stop waiting for this job
		s.member = nil
	}
}

// alloc creates a zeroed tensor and returns its handle or an errno.
func (s *Session) alloc(ctx context.Context, dt abi.DType, shape []int) (int32, *entry, abi.Errno) {
	return s.allocFor(ctx, dt, shape, false)
}

// allocFor creates a tensor; for an op's result (result: the op writes
// all of it) a spare buffer of its size may serve, with what it held.
func (s *Session) allocFor(ctx context.Context, dt abi.DType, shape []int, result bool) (int32, *entry, abi.Errno) {
	if s.live >= s.cfg.MaxHandles {
		return 0, nil, abi.ETOOMANY
	}
	n := product(shape)
	if n < 0 {
		return 0, nil, abi.ENOMEM
	}
	size := dt.Bytes(n)
	if errno := s.reserve(size); errno != abi.OK {
		s.dropSpares()
		return 0, nil, errno
	}
	k := spareKey{dt, n}
	if bufs := s.spare[k]; result && len(bufs) > 0 {
		buf := bufs[len(bufs)-1]
		s.spare[k] = bufs[:len(bufs)-1]
		s.spareBytes -= size
		e := &entry{dt: dt, shape: shape, buf: buf, size: size}
		return s.insert(e), e, abi.OK
	}
	buf, err := s.backend.Alloc(dt, n)
	if err != nil {
		s.unreserve(size)
		return 0, nil, s.failed(ctx, err)
	}
	e := &entry{dt: dt, shape: shape, buf: buf, size: size}
	return s.insert(e), e, abi.OK
}

// maxSpare is the most bytes s keeps spare.
func (s *Session) maxSpare() int64 {
	if s.hostBuffers {
		return maxSpareHost
	}
	return maxSpare
}

// dropSpares frees the spare buffers: at the job's end, when it moves to
// host memory, and when it runs out of memory (the device's may be short
// too).
func (s *Session) dropSpares() {
	for _, bufs := range s.spare {
		for _, b := range bufs {
			s.backend.Free(b)
		}
	}
	s.spare, s.spareBytes = nil, 0
}

// reserve counts size bytes of tensors against the job's limits.
func (s *Session) reserve(size int64) abi.Errno {
	if s.bytes+size > s.cfg.MaxBytes {
		return abi.ENOMEM
	}
	if s.cfg.Budget != nil && !s.cfg.Budget.Reserve(size) {
		return abi.ENOMEM // the guest's memory holds the rest of the job's limit
	}
	s.bytes += size
	s.Stats.PeakBytes = max(s.Stats.PeakBytes, s.bytes)
	return abi.OK
}

// unreserve gives back bytes taken by reserve.
func (s *Session) unreserve(size int64) {
	s.bytes -= size
	if s.cfg.Budget != nil {
		s.cfg.Budget.Release(size)
	}
}

// insert gives e a handle; the caller checked MaxHandles.
func (s *Session) insert(e *entry) int32 {
	var h int32
	if k := len(s.free); k > 0 {
		h, s.free = s.free[k-1], s.free[:k-1]
		s.handles[h-1] = e
	} else {
		s.handles = append(s.handles, e)
		h = int32(len(s.handles))
	}
	s.live++
	return h
}

// drop releases a tensor's storage and the bytes it counted.
func (s *Session) drop(e *entry) {
	switch {
	case !e.readOnly && s.spareBytes+e.size <= s.maxSpare():
		if s.spare == nil {
			s.spare = map[spareKey][]tensor.Buffer{}
		}
		k := spareKey{e.dt, e.elems()}
		s.spare[k] = append(s.spare[k], e.buf)
		s.spareBytes += e.size
	case !e.readOnly:
		s.backend.Free(e.buf)
	case e.unpin != nil:
		e.unpin()
	}
	if e.key != nil {
		s.unpinData(*e.key)
	}
	s.unreserve(e.size)
}

func (s *Session) get(h int32) (*entry, abi.Errno) {
	if h <= 0 || int(h) > len(s.handles) || s.handles[h-1] == nil {
		return nil, abi.EBADF
	}
	return s.handles[h-1], abi.OK
}

func (s *Session) release(h int32) abi.Errno {
	e, errno := s.get(h)
	if errno != abi.OK {
		return errno
	}
	s.handles[h-1] = nil
	s.free = append(s.free, h)
	s.live--
	s.drop(e)
	return abi.OK
}

// charge records one host op of the given size.
func (s *Session) charge(elements int, flops float64) {
	s.Stats.Ops++
	s.Stats.Flops += flops
	units := uint64(elements) + uint64(flops/16)
	s.Stats.Fuel += units
	if s.cfg.Charge != nil {
		s.cfg.Charge(units)
	}
}

// run executes op on the session backend, falling back to the reference
// backend (through host copies) when the backend does not support it, or
// when a buffer is a data tensor in host memory that the backend cannot
// read. Errors that are the context's end or a lost device stop the job;
// others become EBACKEND (see failed).
func (s *Session) run(ctx context.Context, op func(tensor.Backend, []tensor.Buffer) error, bufs ...tensor.Buffer) abi.Errno {
	err := tensor.ErrUnsupported
	if s.hostBuffers || !slices.ContainsFunc(bufs, inHost) {
		err = op(s.backend, bufs)
	}
	if errors.Is(err, tensor.ErrUnsupported) && s.backend != s.cfg.Reference {
		s.Stats.Fallbacks++
		err = s.onReference(ctx, op, bufs)
	}
	if err == nil {
		return abi.OK
	}
	return s.failed(ctx, err)
}

// failed is the errno of a backend call that returned err: EBACKEND, or
// the job stops (Abort) when err is a lost device (its cause wraps
// tensor.ErrDeviceLost) or the job's context ended.
func (s *Session) failed(ctx context.Context, err error) abi.Errno {
	if s.cfg.Abort != nil {
		switch {
		case errors.Is(err, tensor.ErrDeviceLost):
			if s.cfg.DeviceCache != nil {
				s.cfg.DeviceCache.Purge() // its copies went with the device
			}
			s.cfg.Abort(ctx, fmt.Errorf("tensor backend %s: %w", s.backend.Name(), err))
		case ctx.Err() != nil:
			s.cfg.Abort(ctx, ctx.Err())
		}
	}
	return abi.EBACKEND
}

// inHost reports whether b, a buffer of a session whose backend's buffers
// are not host memory, is a data tensor in host memory: those alone are
// host buffers there.
func inHost(b tensor.Buffer) bool {
	_, ok := b.(*tensor.HostBuffer)
	return ok
}

// isData reports whether b is a data tensor, in host or device memory:
// read-only, and maybe shared with other jobs.
func (s *Session) isData(b tensor.Buffer) bool { return inHost(b) || s.onDevice[b] }

// onReference runs op on the reference backend with copies of bufs and
// copies every buffer back: correct for any backend, used only for the rare
// unsupported op and for ops on data tensors, which the reference reads
// where they are.
func (s *Session) onReference(ctx context.Context, op func(tensor.Backend, []tensor.Buffer) error, bufs []tensor.Buffer) error {
	ref := s.cfg.Reference
	if s.hostBuffers {
		return op(ref, bufs)
	}
	copies := make([]tensor.Buffer, len(bufs))
	scratch := make([][]byte, len(bufs))
	for i, b := range bufs {
		if inHost(b) {
			copies[i] = b
			continue
		}
		c, err := ref.Alloc(b.DType(), b.Len())
		if err != nil {
			return err
		}
		scratch[i] = make([]byte, b.DType().Bytes(b.Len()))
		if err := s.backend.Read(b, scratch[i]); err != nil {
			return err
		}
		if err := ref.Write(c, scratch[i]); err != nil {
			return err
		}
		copies[i] = c
	}
	if err := op(ref, copies); err != nil {
		return err
	}
	for i, b := range bufs {
		if s.isData(b) {
			continue // read-only
		}
		if err := ref.Read(copies[i], scratch[i]); err != nil {
			return err
		}
		if err := s.backend.Write(b, scratch[i]); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// product returns the element count of shape, or -1 if it overflows an int32
// element count (no single tensor may exceed 2^31-1 elements).
func product(shape []int) int {
	n := 1
	for _, d := range shape {
		if d <= 0 || n > (1<<31-1)/d {
			return -1
		}
		n *= d
	}
	return n
}

func (s *Session) String() string {
	return fmt.Sprintf("tensor session on %s: %d live tensors, %d bytes", s.backend.Name(), s.live, s.bytes)
}
