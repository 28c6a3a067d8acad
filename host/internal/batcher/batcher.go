// Package batcher coalesces concurrent matmuls of several jobs against one
// shared weight tensor into one multiply over all their rows: when eight
// jobs decode from one model, the provider reads each weight once per step
// for all eight instead of once per job, and the multi-row kernels decode
// each block of it once for all their rows.
//
// Each job is a Member. A call on a weight that no other member is
// expected at runs at once, alone, in its caller's goroutine, exactly as
// without a batcher: a lone job never waits, and there is no time window.
// The members expected at a weight are those that called it before and
// have neither left (Member.Leave) nor been dropped for lateness. Calls
// that arrive while a multiply on the weight runs queue up and run, as one
// multiply, when it ends (group commit). A call that finds the weight idle
// but other members expected gathers: it waits until every member expected
// there is itself waiting in the batcher (here, or gathering at another
// weight, so that two gathers never wait for each other), then all the
// calls gathered run as one multiply. Group commit alone does not align
// decoding jobs (8 concurrent stories15M decodes met in 2% of their
// matmuls): the first job to arrive always ran alone and stayed ahead.
// Gathering aligns them within a step, after which they stay in lockstep.
// A gather waits at most Config.MaxWait; the members it still waits for
// then are dropped from every weight's expected set until they call it
// again, so a job that went elsewhere (a long prompt, a stall) holds the
// others up once, not at every weight.
//
// Strikes: dropping a late member is not enough against one that stalls
// again and again (or calls just under MaxWait each time): it is expected
// again as soon as it calls, and every job batched with it waits up to
// MaxWait at every step. So a member is struck when a gather expires
// while it is outside the batcher, or when it calls while a gather that
// expects it has waited more than MaxWait/2; after Strikes strikes it is
// no longer expected at any weight for its next BackoffCalls batchable
// calls, doubled at each strike after (exponential backoff, counted in
// calls, not time). Meanwhile it is still served: its call runs alone on
// an idle weight, joins a queue already there (group commit, or a gather
// others started), but never starts a gather nor is waited for. A staller
// thus costs the others O(log calls) gathers over a session rather than
// one per step, while an honest job struck by a rare stall (a long
// prompt's prefill runs outside the batcher) is batched again after a
// while, not never.
//
// Bits: only a tensor.RowwiseMatMul backend is batched, one whose MatMul
// computes each row of the output from its row of x alone, by the same
// arithmetic whatever the number of rows; so a job's rows are bit for bit
// what it gets unbatched, in exact and tolerance mode alike, and replicas
// still agree. Calls to any other backend, on buffers outside host memory,
// or of more than Config.MaxRows rows (a long prompt's prefill: its rows
// reuse its weights already) run directly.
//
// Waiting: a queued caller polls for its result for up to spinFor before
// it blocks, running blocks of a multiply that wants helpers meanwhile
// (par.Help), or yielding to other goroutines. Eight decoding jobs meet at
// some ten matmuls per layer; when each caller parked its thread, every
// meeting waited for parked threads to wake, in the multiply's helpers and
// in the callers it delivered to (8 jobs of a 110M model on 2 cores kept
// 1.45 cores busy; polling, 1.9).
//
// Isolation: a queued caller whose context ends leaves the queue at once;
// once its rows are taken into a multiply it waits for that multiply (one
// multiply of at most MaxRows rows, not cancelled for it) and returns its
// context's error. The multiply runs under no caller's context and on
// copies of the callers' rows, so one job's cancellation or deadline never
// fails another's rows. If a batched multiply fails or panics, every
// caller in it runs its own rows again, alone, under its own context: a
// failure is then the error (or panic) of the caller whose rows cause it,
// and no other's. The copies are the provider's memory, outside every
// job's limit: at most MaxRows·(n+k) floats per multiply in flight.
package batcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernet/infernet/host/internal/par"
	"github.com/infernet/infernet/host/tensor"
)

// Defaults of a Config.
const (
	// DefaultMaxRows is the rows of one batched multiply, at most, and the
	// most rows a call may have to join one.
	DefaultMaxRows = 64
	// DefaultMaxWait bounds a gather: long enough for jobs that start at
	// different times to fall into step without being dropped (8 jobs of
	// a 110M model on 2 cores: 145 gathers expired at 20 ms, 1 at 100 ms,
	// and 3.0x the tokens/s of unbatched against 1.5x), short enough that
	// a stalled job holds the others up briefly, and once.
	DefaultMaxWait = 100 * time.Millisecond
	// Strikes is how many strikes a member takes before it is no longer
	// expected anywhere (the first is forgiven: a long prompt, once).
	Strikes = 2
	// BackoffCalls is how many of its batchable calls a member is not
	// expected for after its Strikes-th strike; each later strike doubles
	// it. Some tokens of a small model's decode; about one of a 7B's.
	BackoffCalls = 1024
)

// Config configures a Batcher.
type Config struct {
	// MaxRows caps the rows of one batched multiply; a call of more rows
	// runs directly (default DefaultMaxRows).
	MaxRows int
	// MaxWait bounds how long a call waits for the other members expected
	// at its weight (default DefaultMaxWait).
	MaxWait time.Duration
}

// Batcher coalesces concurrent MatMul calls of its members against one
// weight. It is safe for concurrent use; the zero value is not usable,
// use New.
type Batcher struct {
	maxRows int
	maxWait time.Duration

	mu        sync.Mutex
	groups    map[key]*group  // weights with members or calls
	gathering map[*group]bool // groups whose queue gathers

	now func() time.Time // time.Now; tests set a clock of their own

	calls, runs, batched, rows, expired, late, struck atomic.Uint64
}

// key names what may be multiplied together: one backend (its kernels
// fix the bits) and one weight buffer of one shape.
type key struct {
	tr   tensor.Transformer
	w    *tensor.HostBuffer
	n, k int
}

// group is the state of one key. Guarded by Batcher.mu.
type group struct {
	key     key
	members map[*Member]bool // expected here
	queue   []*call
	busy    bool      // a multiply on the key runs
	round   int       // counts gathers, so a late timer finds its own
	since   time.Time // when the gather under way began
}

// state is where a member is. Guarded by Batcher.mu.
type state int

const (
	running   state = iota // outside the batcher
	gathering              // its call waits for others at an idle weight
	queued                 // its call waits for a running multiply, or is in one
	left                   // Leave was called
)

// Member is one job's part in a Batcher: the batcher waits for a member
// expected at a weight only while it is outside the batcher. Its MatMul
// calls are made one at a time (a job is one guest thread); Leave ends it.
type Member struct {
	b       *Batcher
	state   state
	at      map[key]bool // the keys whose groups expect it
	strikes int          // gathers it held up: see the package doc
	skip    int          // batchable calls left before it is expected again
}

// call is one queued MatMul.
type call struct {
	m      *Member
	t      int
	x, out []float32
	taken  bool       // its x was copied into a batch: guarded by Batcher.mu
	done   chan error // receives errRetry, or the batch's result, once
}

// errRetry tells a caller that its batch failed: it runs its rows alone.
var errRetry = errors.New("batcher: batch failed, retry alone")

// New returns a Batcher.
func New(cfg Config) *Batcher {
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	return &Batcher{maxRows: cfg.MaxRows, maxWait: cfg.MaxWait, groups: map[key]*group{}, gathering: map[*group]bool{}, now: time.Now}
}

// Join returns a new member, for one job.
func (b *Batcher) Join() *Member { return &Member{b: b, at: map[key]bool{}} }

// Stats are a Batcher's counters.
type Stats struct {
	Calls   uint64 // MatMul calls that could be batched
	Runs    uint64 // multiplies run for them, alone or batched
	Batched uint64 // calls served by a multiply of more than one call
	Rows    uint64 // rows of those multiplies
	Expired uint64 // gathers that ran at MaxWait without every member
	Late    uint64 // gathers whose last member came after MaxWait/2
	Struck  uint64 // members no longer expected after Strikes strikes
}

// Stats returns the counters so far. It is safe for concurrent use.
func (b *Batcher) Stats() Stats {
	return Stats{Calls: b.calls.Load(), Runs: b.runs.Load(), Batched: b.batched.Load(),
		Rows: b.rows.Load(), Expired: b.expired.Load(), Late: b.late.Load(), Struck: b.struck.Load()}
}

// Leave ends m: no weight expects it any more. m must not be used after.
func (m *Member) Leave() {
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	m.state = left
	b.forget(m)
	b.startReady()
}

// forget removes m from the expected sets. b.mu is held.
func (b *Batcher) forget(m *Member) {
	for kk := range m.at {
		if g := b.groups[kk]; g != nil {
			delete(g.members, m)
			b.tidy(g)
		}
	}
	clear(m.at)
}

// strike counts a strike against m, which held up a gather; at Strikes
// and after, m is no longer expected anywhere for a while. b.mu is held.
func (b *Batcher) strike(m *Member) {
	m.strikes++
	if m.strikes < Strikes {
		return
	}
	b.struck.Add(1)
	m.skip = BackoffCalls << min(m.strikes-Strikes, 20)
	b.forget(m)
}

// tidy deletes g when nothing refers to it. b.mu is held.
func (b *Batcher) tidy(g *group) {
	if len(g.members) == 0 && len(g.queue) == 0 && !g.busy {
		delete(b.groups, g.key)
	}
}

// MatMul computes out[t,n] = x[t,k] · wᵀ with tr, as tr.MatMul(ctx, t, n,
// k, x, w, out) does and with its bits, batched with other members' calls
// on the same tr and w when the package documentation allows. Its
// arguments are as tr.MatMul's (the caller checked them).
func (m *Member) MatMul(ctx context.Context, tr tensor.Transformer, t, n, k int, x, w, out tensor.Buffer) error {
	b := m.b
	kk, xs, os, ok := b.batchable(tr, t, n, k, x, w, out)
	if !ok {
		return tr.MatMul(ctx, t, n, k, x, w, out)
	}
	b.calls.Add(1)
	b.mu.Lock()
	b.arrive(m)
	g := b.groups[kk]
	if g == nil {
		g = &group{key: kk, members: map[*Member]bool{}}
		b.groups[kk] = g
	}
	if m.skip > 0 {
		m.skip--
	} else {
		g.members[m], m.at[kk] = true, true
	}
	if !g.busy && len(g.queue) == 0 && (!g.members[m] || !b.othersExpected(g, m)) {
		// Nobody else is coming: run alone, now, as unbatched.
		g.busy = true
		b.mu.Unlock()
		b.runs.Add(1)
		b.rows.Add(uint64(t))
		defer b.next(g)
		return tr.MatMul(ctx, t, n, k, x, w, out)
	}
	c := &call{m: m, t: t, x: xs, out: os, done: make(chan error, 1)}
	g.queue = append(g.queue, c)
	if g.busy {
		m.state = queued
	} else {
		m.state = gathering
		if !b.gathering[g] {
			b.gathering[g] = true
			g.round++
			g.since = b.now()
			round := g.round
			time.AfterFunc(b.maxWait, func() { b.expire(g, round) })
		}
		b.startReady() // those waiting for m may go now, g among them
	}
	b.mu.Unlock()

	spin(c.done)
	select {
	case err := <-c.done:
		if errors.Is(err, errRetry) {
			return tr.MatMul(ctx, t, n, k, x, w, out)
		}
		return cmp.Or(err, ctx.Err())
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !c.taken {
		g.queue = remove(g.queue, c)
		m.state = running
		if len(g.queue) == 0 {
			delete(b.gathering, g)
		}
		b.tidy(g)
		b.mu.Unlock()
		return ctx.Err()
	}
	b.mu.Unlock()
	// Its rows are in a multiply that reads and writes only the batch's
	// own buffers until it delivers: wait for it, one multiply at most.
	if err := <-c.done; err != nil && !errors.Is(err, errRetry) {
		return err
	}
	return ctx.Err()
}

// spinFor is how long a queued call polls for its result before it
// blocks (see Waiting in the package documentation): about one multiply
// of a decode step, a few hundred microseconds.
const spinFor = 500 * time.Microsecond

// spin polls done for up to spinFor, running blocks of a multiply that
// wants helpers (par.Help) or yielding its thread to other goroutines
// meanwhile, so the thread stays awake for the multiply and for the
// callers it wakes.
func spin(done chan error) {
	start := time.Now()
	for i := 0; len(done) == 0; i++ {
		if !par.Help() {
			runtime.Gosched()
		}
		if i%16 == 15 && time.Since(start) > spinFor {
			return
		}
	}
}

// arrive strikes m, which calls from outside the batcher, if a gather
// that expects it has waited more than MaxWait/2. b.mu is held.
func (b *Batcher) arrive(m *Member) {
	if len(m.at) == 0 {
		return
	}
	var now time.Time
	for g := range b.gathering {
		if !g.members[m] {
			continue
		}
		if now.IsZero() {
			now = b.now()
		}
		if now.Sub(g.since) > b.maxWait/2 {
			b.late.Add(1)
			b.strike(m)
			return
		}
	}
}

// othersExpected reports whether a member other than m is expected at g
// and outside the batcher. b.mu is held.
func (b *Batcher) othersExpected(g *group, m *Member) bool {
	for o := range g.members {
		if o != m && o.state != gathering {
			return true
		}
	}
	return false
}

// ready reports whether gathering group g may run: every member it
// expects waits in the batcher, gathering, or its rows fill a multiply.
// b.mu is held.
func (b *Batcher) ready(g *group) bool {
	rows := 0
	for _, c := range g.queue {
		rows += c.t
	}
	if rows >= b.maxRows {
		return true
	}
	for o := range g.members {
		if o.state != gathering {
			return false
		}
	}
	return true
}

// startReady starts every gathering group that may run. Readiness is
// judged for all before any starts, so gathers that wait only for each
// other all go. b.mu is held.
func (b *Batcher) startReady() {
	var starts []*group
	for g := range b.gathering {
		if b.ready(g) {
			starts = append(starts, g)
		}
	}
	for _, g := range starts {
		b.start(g)
	}
}

// start runs gathering group g's queue. b.mu is held.
func (b *Batcher) start(g *group) {
	delete(b.gathering, g)
	g.busy = true
	if bt := b.take(g); bt != nil {
		go b.drain(g, bt)
	} else {
		g.busy = false
		b.tidy(g)
	}
}

// expire runs gather round of g at MaxWait, dropping the members it still
// waits for from every expected set.
func (b *Batcher) expire(g *group, round int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.gathering[g] || g.round != round {
		return
	}
	b.expired.Add(1)
	for o := range g.members {
		if o.state == running { // outside the batcher: it held g up
			b.strike(o) // not one queued for a multiply elsewhere
		}
		if o.state != gathering {
			b.forget(o)
		}
	}
	b.start(g)
	b.startReady()
}

// batchable returns the key and the host slices of a call that may be
// batched.
func (b *Batcher) batchable(tr tensor.Transformer, t, n, k int, x, w, out tensor.Buffer) (key, []float32, []float32, bool) {
	if _, ok := tr.(tensor.RowwiseMatMul); !ok || t <= 0 || t > b.maxRows || n <= 0 || k <= 0 {
		return key{}, nil, nil, false
	}
	if !reflect.TypeOf(tr).Comparable() { // a map key must not panic
		return key{}, nil, nil, false
	}
	hx, okx := x.(*tensor.HostBuffer)
	hw, okw := w.(*tensor.HostBuffer)
	ho, oko := out.(*tensor.HostBuffer)
	if !okx || !okw || !oko || len(hx.F32) != t*k || len(ho.F32) != t*n || hw.Len() != n*k {
		return key{}, nil, nil, false
	}
	return key{tr: tr, w: hw, n: n, k: k}, hx.F32, ho.F32, true
}

// next runs g's calls that queued behind a lone call, or marks g idle.
func (b *Batcher) next(g *group) {
	b.mu.Lock()
	bt := b.take(g)
	b.mu.Unlock()
	if bt != nil {
		go b.drain(g, bt)
	}
}

// take removes up to maxRows rows of calls from g's queue, in order,
// copying their rows of x into a batch; with none queued it marks g idle
// and returns nil. b.mu is held.
func (b *Batcher) take(g *group) *batch {
	if len(g.queue) == 0 {
		g.busy = false
		b.tidy(g)
		return nil
	}
	rows, i := 0, 0
	for ; i < len(g.queue) && (i == 0 || rows+g.queue[i].t <= b.maxRows); i++ {
		rows += g.queue[i].t
	}
	bt := &batch{calls: g.queue[:i:i], rows: rows, x: pooled(rows * g.key.k)[:0]}
	g.queue = append([]*call(nil), g.queue[i:]...)
	for _, c := range bt.calls {
		c.taken = true
		c.m.state = queued
		bt.x = append(bt.x, c.x...)
	}
	return bt
}

// batch is a multiply of several calls' rows.
type batch struct {
	calls []*call
	rows  int
	x     []float32 // the calls' rows of x, in order
}

// drain runs batches of g's queue until it is empty.
func (b *Batcher) drain(g *group, bt *batch) {
	for bt != nil {
		b.run(g.key, bt)
		b.mu.Lock()
		bt = b.take(g)
		b.mu.Unlock()
	}
}

// run multiplies bt's rows and delivers each call's.
func (b *Batcher) run(kk key, bt *batch) {
	b.runs.Add(1)
	b.rows.Add(uint64(bt.rows))
	if len(bt.calls) > 1 {
		b.batched.Add(uint64(len(bt.calls)))
	}
	out := pooled(bt.rows * kk.n)
	defer recycle(out)
	defer recycle(bt.x)
	// No caller's context: a job that leaves must not fail the others'
	// rows, and the multiply is at most maxRows rows long.
	err := multiply(context.Background(), kk, bt.rows, bt.x, out)
	off := 0
	for _, c := range bt.calls {
		if err == nil {
			copy(c.out, out[off:off+c.t*kk.n])
			off += c.t * kk.n
		}
		b.mu.Lock()
		if c.m.state == queued {
			c.m.state = running
		}
		b.mu.Unlock()
		if err != nil {
			c.done <- errRetry
		} else {
			c.done <- nil
		}
	}
}

// pool keeps the batches' copies of x and out for the next batch: a
// decode step of eight jobs multiplies about ten times per layer, and
// each fresh slice (up to a megabyte: a vocabulary's logits) cost an
// allocation and its clearing.
var pool sync.Pool

// pooled returns a slice of n floats, not cleared, from pool.
func pooled(n int) []float32 {
	if p, ok := pool.Get().(*[]float32); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]float32, n)
}

// recycle returns s to pool.
func recycle(s []float32) { pool.Put(&s) }

// multiply runs one batched MatMul, a panic turned into an error.
func multiply(ctx context.Context, kk key, t int, x, out []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("batcher: multiply panicked: %v", r)
		}
	}()
	return kk.tr.MatMul(ctx, t, kk.n, kk.k, &tensor.HostBuffer{F32: x}, kk.w, &tensor.HostBuffer{F32: out})
}

// remove returns q without c.
func remove(q []*call, c *call) []*call {
	for i, d := range q {
		if d == c {
			return append(q[:i], q[i+1:]...)
		}
	}
	return q
}
