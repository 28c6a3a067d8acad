package blobnet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/infernet/infernet/node/blob"
)

// FetchStats describes one Fetch that transferred (or tried to) a blob.
type FetchStats struct {
	// Digest names the blob.
	Digest blob.Digest
	// Size is the blob's size in bytes.
	Size int64
	// Parallel is true when the blob was fetched by ranges.
	Parallel bool
	// Fallback is true when a parallel fetch could not be verified or
	// repaired and the blob was then fetched whole from one source.
	Fallback bool
	// Tried is how many distinct sources were contacted or considered.
	Tried int
	// Bytes is how many payload bytes each source delivered, verified or
	// not, in every phase.
	Bytes map[peer.ID]int64
	// Ranges is how many ranges each source delivered in the first pass of
	// a parallel fetch.
	Ranges map[peer.ID]int
	// Dropped says why each abandoned source was abandoned: unreachable,
	// stalled (a deadline error), too slow (below Config.MinRate), busy, not holding the blob, or sending
	// wrong sizes or bytes.
	Dropped map[peer.ID]error
	// Liars are the sources caught sending bytes that are not the blob's.
	Liars []peer.ID
	// Err is what Fetch returned.
	Err error
	// Elapsed is how long the transfer took.
	Elapsed time.Duration
}

// Fetch makes blob d of size bytes present in the Store, fetching it from
// peers if it is not: first the hints in order, then, with Routing, the
// providers it finds (never this host). It dials nothing else. Blobs of at
// least ParallelThreshold bytes are fetched by ChunkSize ranges from up to
// MaxSources sources at once; smaller ones whole from one source at a
// time. Sources that fail, stall, lie or send wrong sizes are dropped for
// the rest of the fetch and the next one is tried. Only verified bytes are
// stored.
//
// It returns nil once the blob is present, an error wrapping ErrUnavailable
// if no source delivered it, blob.ErrQuota if the Store could not make room
// for it (before its bytes are read), ErrClosed after Close, or ctx's error.
// Concurrent Fetches of the same digest share one transfer.
func (s *Service) Fetch(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error {
	return s.get(ctx, d, size, hints, false)
}

// FetchDirect is Fetch from the hints only: it never asks Routing for
// providers, so a private blob's digest (a job's input) is not sent to
// the DHT.
func (s *Service) FetchDirect(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error {
	return s.get(ctx, d, size, hints, true)
}

func (s *Service) get(ctx context.Context, d blob.Digest, size int64, hints []peer.ID, direct bool) error {
	if size < 0 {
		return fmt.Errorf("blobnet: fetch %s: negative size %d", d.Short(), size)
	}
	for {
		if _, ok := s.store.Has(d); ok {
			return nil
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		if c, ok := s.inflight[d]; ok {
			s.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if c.err != nil && ctx.Err() == nil && (isContextErr(c.err) || !containsAll(c.hints, hints)) {
				// The leader gave up, this caller has not; or it asked other
				// sources than this caller names, which it asks now.
				continue
			}
			return c.err
		}
		c := &call{done: make(chan struct{}), hints: hints}
		s.inflight[d] = c
		s.wg.Add(1)
		s.mu.Unlock()

		c.err = s.fetchBusy(ctx, d, size, hints, direct)
		s.mu.Lock()
		delete(s.inflight, d)
		s.mu.Unlock()
		close(c.done)
		s.wg.Done()
		return c.err
	}
}

// fetchBusy is fetch, tried again for Config.BusyRetry while no source
// delivered the blob and one said it was busy: a source at its limit of
// requests (Config.MaxStreams, MaxPerPeer) has room again soon, while one
// that is busy for ever (it will not serve) leaves ErrUnavailable.
func (s *Service) fetchBusy(ctx context.Context, d blob.Digest, size int64, hints []peer.ID, direct bool) error {
	until := time.Now().Add(s.cfg.BusyRetry)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := s.fetch(ctx, d, size, hints, direct)
		if !errors.Is(err, ErrBusy) || time.Now().Add(wait).After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-s.ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// containsAll reports whether have holds every peer of want.
func containsAll(have, want []peer.ID) bool {
	for _, p := range want {
		if !slices.Contains(have, p) {
			return false
		}
	}
	return true
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrClosed)
}

// fetcher is the state of one transfer. Its maps are guarded by mu; prov and
// sums are written by one worker per range index at a time, and read between
// phases.
type fetcher struct {
	s    *Service
	d    blob.Digest
	size int64
	src  *sources

	mu       sync.Mutex
	stats    FetchStats
	liars    map[peer.ID]bool
	suspects map[peer.ID]bool
	order    []peer.ID // contributors of ranges, in order of first range

	chunk int64
	prov  []peer.ID  // prov[i]: who sent range i's bytes now in the partial
	sums  [][32]byte // sums[i]: their SHA-256
	part  *blob.Partial
	// localErr is this node's failure to write a range (a full disk),
	// which ends a parallel fetch: no source is to blame.
	localErr error
}

func (s *Service) fetch(ctx context.Context, d blob.Digest, size int64, hints []peer.ID, direct bool) error {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	f := &fetcher{
		s: s, d: d, size: size,
		src:      newSources(ctx, s, d, hints, direct),
		liars:    make(map[peer.ID]bool),
		suspects: make(map[peer.ID]bool),
		chunk:    s.cfg.ChunkSize,
	}
	f.stats = FetchStats{Digest: d, Size: size, Bytes: map[peer.ID]int64{}, Ranges: map[peer.ID]int{}, Dropped: map[peer.ID]error{}}
	var err error
	if size >= s.cfg.ParallelThreshold {
		f.stats.Parallel = true
		err = f.parallel(ctx)
	} else {
		err = f.whole(ctx, nil)
	}
	if err != nil && s.ctx.Err() != nil {
		err = fmt.Errorf("blobnet: fetch %s: %w", d.Short(), ErrClosed)
	}
	f.mu.Lock()
	st := f.stats
	f.mu.Unlock()
	if errors.Is(err, ErrUnavailable) && slices.ContainsFunc(slices.Collect(maps.Values(st.Dropped)), func(e error) bool { return errors.Is(e, ErrBusy) }) {
		err = fmt.Errorf("%w (%w)", err, ErrBusy) // fetchBusy tries again
	}
	st.Tried = f.src.count()
	st.Err = err
	st.Elapsed = time.Since(start)
	s.log.Debug("blob fetch", "blob", d.Short(), "size", size, "parallel", st.Parallel, "fallback", st.Fallback,
		"tried", st.Tried, "bytes", fmtBytes(st.Bytes), "liars", len(st.Liars), "elapsed", st.Elapsed, "err", err)
	if s.cfg.OnFetch != nil {
		s.cfg.OnFetch(st)
	}
	return err
}

func fmtBytes(m map[peer.ID]int64) string {
	out := ""
	for p, n := range m {
		out += fmt.Sprintf("%s=%d ", shortID(p), n)
	}
	return out
}

func shortID(p peer.ID) string {
	s := p.String()
	if len(s) > 8 {
		s = s[len(s)-8:]
	}
	return s
}

func (f *fetcher) unavailable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), err)
	}
	return fmt.Errorf("blobnet: fetch %s: no source delivered it (%d tried): %w", f.d.Short(), f.src.count(), ErrUnavailable)
}

func (f *fetcher) addBytes(p peer.ID, n int64) {
	f.mu.Lock()
	f.stats.Bytes[p] += n
	f.mu.Unlock()
}

// drop records why source p is abandoned.
func (f *fetcher) drop(p peer.ID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.stats.Dropped[p]; !ok {
		f.stats.Dropped[p] = err
	}
	f.s.log.Debug("blob source dropped", "blob", f.d.Short(), "peer", p, "err", err)
}

// lied records that p sent bytes that are not the blob's.
func (f *fetcher) lied(p peer.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.liars[p] {
		return
	}
	f.liars[p] = true
	f.stats.Liars = append(f.stats.Liars, p)
	if _, ok := f.stats.Dropped[p]; !ok {
		f.stats.Dropped[p] = errLied
	}
	f.s.log.Warn("blob source lied", "blob", f.d.Short(), "peer", p)
}

func (f *fetcher) isLiar(p peer.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liars[p]
}

// whole fetches the blob whole, one source at a time: first those of
// order, then new ones from the sources. The store's ErrQuota ends it: no
// source can help with that.
func (f *fetcher) whole(ctx context.Context, order []peer.ID) error {
	for _, p := range order {
		err := f.wholeFrom(ctx, p)
		if err == nil {
			return nil
		}
		if local(err) {
			return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), err)
		}
		if ctx.Err() != nil {
			return f.unavailable(ctx)
		}
	}
	for {
		p, ok := f.src.next(ctx)
		if !ok {
			return f.unavailable(ctx)
		}
		err := f.wholeFrom(ctx, p)
		if err == nil {
			return nil
		}
		if local(err) {
			return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), err)
		}
	}
}

// local reports whether err, storing a blob, is this node's own (a quota
// it cannot make room in, a disk that failed): no other source does
// better, and the source is not to blame. A full disk had been said as
// "no source delivered it", the sources dropped one by one.
func local(err error) bool { return errors.Is(err, blob.ErrQuota) || errors.Is(err, blob.ErrWrite) }

// wholeFrom streams the whole blob from p into the store, verified.
func (f *fetcher) wholeFrom(ctx context.Context, p peer.ID) error {
	c, err := f.s.dial(ctx, p)
	if err != nil {
		f.drop(p, err)
		return err
	}
	r, err := c.get(f.d, f.size, 0, f.size)
	if err != nil {
		c.abort()
		f.drop(p, err)
		return err
	}
	cr := &countReader{r: r}
	err = f.s.store.PutVerified(cr, f.d, f.size)
	f.addBytes(p, cr.n)
	if err != nil {
		c.abort()
		switch {
		case local(err): // ours, not the source's
		case errors.Is(err, blob.ErrDigestMismatch):
			f.lied(p)
		default:
			f.drop(p, err)
		}
		return err
	}
	c.close()
	return nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (r *countReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += int64(n)
	return n, err
}

// rng returns the offset and length of range i.
func (f *fetcher) rng(i int) (off, n int64) {
	off = int64(i) * f.chunk
	return off, min(f.chunk, f.size-off)
}

// parallel fetches the blob by ranges into a Partial, verifies it, and if
// it does not verify, hunts the liars down, or falls back to whole fetches.
func (f *fetcher) parallel(ctx context.Context) error {
	part, err := f.s.store.NewPartial(f.size)
	if err != nil {
		return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), err)
	}
	defer part.Discard()
	f.part = part
	n := int((f.size + f.chunk - 1) / f.chunk)
	f.prov = make([]peer.ID, n)
	f.sums = make([][32]byte, n)

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	q := newQueue(n, pcancel)
	stopq := context.AfterFunc(pctx, q.abort)
	defer stopq()
	var wg sync.WaitGroup
	for range f.s.cfg.MaxSources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.rangeWorker(ctx, pctx, q)
		}()
	}
	wg.Wait()
	f.mu.Lock()
	lerr := f.localErr
	f.mu.Unlock()
	if lerr != nil {
		return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), lerr)
	}
	if left := q.left(); left > 0 {
		if ctx.Err() != nil {
			return f.unavailable(ctx)
		}
		f.s.log.Debug("blob parallel fetch incomplete", "blob", f.d.Short(), "ranges left", left)
		return f.unavailable(ctx)
	}
	err = part.Commit(f.d)
	if err == nil {
		return nil
	}
	if !errors.Is(err, blob.ErrDigestMismatch) {
		return fmt.Errorf("blobnet: fetch %s: %w", f.d.Short(), err)
	}
	f.s.log.Debug("blob ranges do not verify; auditing sources", "blob", f.d.Short())
	if f.audit(ctx) {
		return nil
	}
	if ctx.Err() != nil {
		return f.unavailable(ctx)
	}
	part.Discard()
	f.mu.Lock()
	f.stats.Fallback = true
	f.mu.Unlock()
	return f.whole(ctx, f.fallbackOrder())
}

// rangeWorker takes ranges from q and fetches them from one source at a
// time over one reused stream, moving on to the next source when its
// source fails. It returns when q is finished or no source is left.
func (f *fetcher) rangeWorker(ctx, pctx context.Context, q *queue) {
	buf := make([]byte, f.chunk)
	var c *conn
	var p peer.ID
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	for {
		i, ok := q.take()
		if !ok {
			return
		}
		if c != nil && time.Since(c.last) > f.s.cfg.StreamTimeout/2 {
			c.close() // the server may have dropped it meanwhile
			c = nil
		}
		for c == nil {
			if p == "" {
				if p, ok = f.src.next(pctx); !ok {
					q.put(i)
					return
				}
			}
			var err error
			if c, err = f.s.dial(ctx, p); err != nil {
				f.drop(p, err)
				p = ""
			}
		}
		reused := c.used
		sum, err := f.fetchRange(c, i, buf)
		if err != nil && reused && !isVerdict(err) && ctx.Err() == nil {
			// The source may only have dropped a stream idle too long for
			// its own StreamTimeout: try once more on a new one.
			c.abort()
			if c, err = f.s.dial(ctx, p); err == nil {
				sum, err = f.fetchRange(c, i, buf)
			}
		}
		if err != nil {
			q.put(i)
			f.drop(p, err)
			if c != nil {
				c.abort()
			}
			c, p = nil, ""
			continue
		}
		off, n := f.rng(i)
		if _, err := f.part.WriteAt(buf[:n], off); err != nil {
			q.put(i)
			f.mu.Lock()
			f.localErr = err // a local failure, not p's: the fetch ends with it
			f.mu.Unlock()
			q.abort()
			return
		}
		f.prov[i], f.sums[i] = p, sum
		f.mu.Lock()
		if f.stats.Ranges[p] == 0 {
			f.order = append(f.order, p)
		}
		f.stats.Ranges[p]++
		f.mu.Unlock()
		q.done(i)
	}
}

// isVerdict reports whether err is the source's answer rather than a
// broken stream.
func isVerdict(err error) bool {
	for _, v := range []error{errNotFound, ErrBusy, errBadRange, errWrongSize, errWrongLength, errBadStatus, errTooSlow} {
		if errors.Is(err, v) {
			return true
		}
	}
	return false
}

// fetchRange reads range i from c into buf and returns its SHA-256.
func (f *fetcher) fetchRange(c *conn, i int, buf []byte) ([32]byte, error) {
	off, n := f.rng(i)
	r, err := c.get(f.d, f.size, off, n)
	if err != nil {
		return [32]byte{}, err
	}
	got, err := io.ReadFull(r, buf[:n])
	f.addBytes(c.peer, int64(got))
	if err != nil {
		return [32]byte{}, fmt.Errorf("range [%d,+%d): %w", off, n, err)
	}
	c.used = true
	return sha256.Sum256(buf[:n]), nil
}

// audit finds who sent wrong ranges after the assembled blob failed to
// verify: source by source, it fetches that source's ranges again from a
// different source and, where they differ, from a third one; the source
// outvoted is a liar and the majority's bytes are kept. After each source
// whose ranges changed it tries to commit. It reports whether it committed.
func (f *fetcher) audit(ctx context.Context) bool {
	f.mu.Lock()
	order := append([]peer.ID(nil), f.order...)
	f.mu.Unlock()
	for _, s := range order {
		var idx []int
		for i, p := range f.prov {
			if p == s {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			changed bool
			sem     = make(chan struct{}, f.s.cfg.MaxSources)
		)
		for _, i := range idx {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if f.auditRange(ctx, i) {
					mu.Lock()
					changed = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return false
		}
		if changed && f.part.Commit(f.d) == nil {
			return true
		}
	}
	return false
}

// auditRange checks range i against other sources and, if a majority says
// otherwise, rewrites it. It reports whether the range was rewritten.
func (f *fetcher) auditRange(ctx context.Context, i int) bool {
	orig, origSum := f.prov[i], f.sums[i]
	q, b, sumQ, ok := f.fetchFromOther(ctx, i, orig)
	if !ok {
		return false
	}
	if f.isLiar(orig) { // known liar: take the other's bytes unchecked (the commit checks)
		return f.rewrite(i, q, b, sumQ)
	}
	if sumQ == origSum {
		return false
	}
	t, _, sumT, ok := f.fetchFromOther(ctx, i, orig, q)
	switch {
	case !ok:
		f.mu.Lock()
		f.suspects[orig], f.suspects[q] = true, true
		f.mu.Unlock()
		return false
	case sumT == sumQ:
		f.lied(orig)
		return f.rewrite(i, q, b, sumQ)
	case sumT == origSum:
		f.lied(q)
		return false
	default:
		f.mu.Lock()
		f.suspects[orig], f.suspects[q], f.suspects[t] = true, true, true
		f.mu.Unlock()
		return false
	}
}

func (f *fetcher) rewrite(i int, p peer.ID, b []byte, sum [32]byte) bool {
	off, _ := f.rng(i)
	if _, err := f.part.WriteAt(b, off); err != nil {
		return false
	}
	f.prov[i], f.sums[i] = p, sum
	return true
}

// fetchFromOther fetches range i, on a new stream, from a known source that
// is neither excluded, nor a liar, nor dropped, starting the search at a
// source chosen by i to spread the load; if none is left, from a new
// source. It returns the source, the bytes and their SHA-256.
func (f *fetcher) fetchFromOther(ctx context.Context, i int, exclude ...peer.ID) (peer.ID, []byte, [32]byte, bool) {
	_, n := f.rng(i)
	buf := make([]byte, n)
	try := func(p peer.ID) ([32]byte, bool) {
		c, err := f.s.dial(ctx, p)
		if err != nil {
			f.drop(p, err)
			return [32]byte{}, false
		}
		sum, err := f.fetchRange(c, i, buf)
		if err != nil {
			c.abort()
			f.drop(p, err)
			return [32]byte{}, false
		}
		c.close()
		return sum, true
	}
	usable := func(p peer.ID) bool {
		for _, x := range exclude {
			if p == x {
				return false
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		_, dropped := f.stats.Dropped[p]
		return !dropped && !f.liars[p]
	}
	known := f.src.known()
	for k := range known {
		p := known[(i+k)%len(known)]
		if !usable(p) {
			continue
		}
		if sum, ok := try(p); ok {
			return p, buf, sum, true
		}
		if ctx.Err() != nil {
			return "", nil, [32]byte{}, false
		}
	}
	for {
		p, ok := f.src.next(ctx)
		if !ok {
			return "", nil, [32]byte{}, false
		}
		if sum, ok := try(p); ok {
			return p, buf, sum, true
		}
	}
}

// fallbackOrder lists the sources for whole fetches after a failed parallel
// fetch: first those above suspicion, then the suspects, then the liars
// (their bytes are verified anyway; a majority may have been wrong). Those
// that failed for other reasons are left out.
func (f *fetcher) fallbackOrder() []peer.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var clean, sus, liars []peer.ID
	for _, p := range f.src.known() {
		_, dropped := f.stats.Dropped[p]
		switch {
		case f.liars[p]:
			liars = append(liars, p)
		case dropped:
		case f.suspects[p]:
			sus = append(sus, p)
		default:
			clean = append(clean, p)
		}
	}
	return append(append(clean, sus...), liars...)
}

// queue hands out the indexes of ranges still to fetch.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	todo    []int
	pending int // ranges not done
	aborted bool
	// onDone is called once when the last range is done.
	onDone func()
}

func newQueue(n int, onDone func()) *queue {
	q := &queue{todo: make([]int, n), pending: n, onDone: onDone}
	for i := range q.todo {
		q.todo[i] = i
	}
	q.cond = sync.NewCond(&q.mu)
	if n == 0 {
		onDone()
	}
	return q
}

// take returns the next range to fetch, waiting while all the ranges left
// are being fetched. It returns false when none is left or q is aborted.
func (q *queue) take() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.todo) == 0 && q.pending > 0 && !q.aborted {
		q.cond.Wait()
	}
	if q.aborted || len(q.todo) == 0 {
		return 0, false
	}
	i := q.todo[0]
	q.todo = q.todo[1:]
	return i, true
}

// put gives range i back after a failure.
func (q *queue) put(i int) {
	q.mu.Lock()
	q.todo = append(q.todo, i)
	q.mu.Unlock()
	q.cond.Broadcast()
}

// done marks range i fetched.
func (q *queue) done(int) {
	q.mu.Lock()
	q.pending--
	last := q.pending == 0
	q.mu.Unlock()
	if last {
		q.onDone()
	}
	q.cond.Broadcast()
}

func (q *queue) abort() {
	q.mu.Lock()
	q.aborted = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queue) left() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// sources yields a fetch's candidate sources: the hints, then providers
// found through Routing (searched only once the hints run out), each once,
// never this host.
type sources struct {
	s   *Service
	d   blob.Digest
	ctx context.Context // the fetch's: ends the provider search

	// direct: the hints only, no provider search.
	direct bool

	recv  sync.Mutex // serializes reads of provs
	provs <-chan peer.AddrInfo

	mu    sync.Mutex // guards the fields below
	hints []peer.ID
	seen  map[peer.ID]bool
	all   []peer.ID
}

func newSources(ctx context.Context, s *Service, d blob.Digest, hints []peer.ID, direct bool) *sources {
	return &sources{s: s, d: d, ctx: ctx, hints: hints, direct: direct, seen: map[peer.ID]bool{s.h.ID(): true}}
}

// next returns a source not returned before, waiting for the provider
// search if need be; false when there is none left or ctx is done.
func (x *sources) next(ctx context.Context) (peer.ID, bool) {
	x.mu.Lock()
	for len(x.hints) > 0 {
		p := x.hints[0]
		x.hints = x.hints[1:]
		if p != "" && !x.seen[p] {
			x.seen[p] = true
			x.all = append(x.all, p)
			x.mu.Unlock()
			return p, true
		}
	}
	x.mu.Unlock()
	if x.s.cfg.Routing == nil || x.direct {
		return "", false
	}
	x.recv.Lock()
	defer x.recv.Unlock()
	if x.provs == nil {
		count := 4 * x.s.cfg.MaxSources
		x.provs = x.s.cfg.Routing.FindProvidersAsync(x.ctx, blob.CID(x.d), count)
	}
	for {
		select {
		case ai, ok := <-x.provs:
			if !ok {
				return "", false
			}
			x.mu.Lock()
			if x.seen[ai.ID] {
				x.mu.Unlock()
				continue
			}
			x.seen[ai.ID] = true
			x.all = append(x.all, ai.ID)
			x.mu.Unlock()
			if len(ai.Addrs) > 0 {
				x.s.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			}
			return ai.ID, true
		case <-ctx.Done():
			return "", false
		}
	}
}

// known returns the sources returned so far, in order.
func (x *sources) known() []peer.ID {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]peer.ID(nil), x.all...)
}

func (x *sources) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.all)
}
