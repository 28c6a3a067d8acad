// Package batcher coalesces concurrent matmuls of several jobs against one
// shared weight tensor into one multiply over all their rows: when eight
// jobs decode from one model, the provider reads each weight once per step
// for all eight instead of once per job.
//
// It is group commit, with no time window: the first call on a weight runs
// at once, alone, in its caller's goroutine, exactly as without a batcher.
// Calls that arrive while a multiply on that weight runs queue up; when it
// ends, everything queued runs as one multiply (at most Config.MaxRows
// rows) on a goroutine of the batcher, and each caller gets its own rows
// back. A lone user never waits for anyone.
//
// Bits: only a tensor.RowwiseMatMul backend is batched, one whose MatMul
// computes each row of the output from its row of x alone, by the same
// arithmetic whatever the number of rows; so a job's rows are bit for bit
// what it gets unbatched, in exact and tolerance mode alike, and replicas
// still agree. Calls to any other backend, on buffers outside host memory,
// or of more than MaxRows rows (a prompt's prefill: its weights are reused
// across its own rows already), run directly.
//
// Isolation: a queued caller whose context ends leaves the queue at once;
// once its rows are taken into a multiply it waits for that multiply (one
// multiply of at most MaxRows rows, not cancelled for it) and then returns
// its context's error. The multiply runs under no caller's context, so one
// job's cancellation or deadline never fails another's rows. If a batched
// multiply fails or panics, every caller in it runs its own rows again,
// alone, under its own context: a failure is then the error (or panic) of
// the caller whose rows cause it, and no other's.
package batcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/infernet/infernet/host/tensor"
)

// DefaultMaxRows is Config.MaxRows's default: the rows of one batched
// multiply, and the most rows a call may have to join one.
const DefaultMaxRows = 64

// Config configures a Batcher.
type Config struct {
	// MaxRows caps the rows of one batched multiply; a call of more rows
	// runs directly (default DefaultMaxRows).
	MaxRows int
}

// Batcher coalesces concurrent MatMul calls against one weight. It is safe
// for concurrent use; the zero value is not usable, use New.
type Batcher struct {
	maxRows int

	mu     sync.Mutex
	groups map[key]*group // weights with a multiply running; idle ones are deleted

	calls, runs, batched, rows atomic.Uint64
}

// key names what may be multiplied together: one backend (its kernels
// fix the bits) and one weight buffer of one shape.
type key struct {
	tr   tensor.Transformer
	w    *tensor.HostBuffer
	n, k int
}

// group is the state of one key while a multiply on it runs.
type group struct {
	queue []*call // waiting for the running multiply to end
}

// call is one queued MatMul.
type call struct {
	t      int
	x, out []float32
	taken  bool       // its x was copied into a batch: guarded by Batcher.mu
	done   chan error // receives errRetry, the batch's result, once
}

// errRetry tells a caller that its batch failed: it runs its rows alone.
var errRetry = errors.New("batcher: batch failed, retry alone")

// New returns a Batcher.
func New(cfg Config) *Batcher {
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	return &Batcher{maxRows: cfg.MaxRows, groups: map[key]*group{}}
}

// Stats are a Batcher's counters.
type Stats struct {
	Calls   uint64 // MatMul calls that could be batched
	Runs    uint64 // multiplies run for them, alone or batched
	Batched uint64 // calls served by a multiply of more than one call
	Rows    uint64 // rows of those multiplies
}

// Stats returns the counters so far. It is safe for concurrent use.
func (b *Batcher) Stats() Stats {
	return Stats{Calls: b.calls.Load(), Runs: b.runs.Load(), Batched: b.batched.Load(), Rows: b.rows.Load()}
}

// MatMul computes out[t,n] = x[t,k] · wᵀ with tr, as tr.MatMul(ctx, t, n,
// k, x, w, out) does and with its bits, batched with concurrent calls on
// the same tr and w when the package documentation allows. Its arguments
// are as tr.MatMul's (the caller checked them).
func (b *Batcher) MatMul(ctx context.Context, tr tensor.Transformer, t, n, k int, x, w, out tensor.Buffer) error {
	kk, xs, os, ok := b.batchable(tr, t, n, k, x, w, out)
	if !ok {
		return tr.MatMul(ctx, t, n, k, x, w, out)
	}
	b.calls.Add(1)
	b.mu.Lock()
	g := b.groups[kk]
	if g == nil {
		// Nothing runs on this weight: run alone, now, as unbatched.
		b.groups[kk] = &group{}
		b.mu.Unlock()
		b.runs.Add(1)
		b.rows.Add(uint64(t))
		defer b.next(kk)
		return tr.MatMul(ctx, t, n, k, x, w, out)
	}
	c := &call{t: t, x: xs, out: os, done: make(chan error, 1)}
	g.queue = append(g.queue, c)
	b.mu.Unlock()

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

// next starts a batch of kk's queued calls, or forgets kk when none wait.
func (b *Batcher) next(kk key) {
	b.mu.Lock()
	batch := b.take(kk)
	b.mu.Unlock()
	if batch != nil {
		go b.drain(kk, batch)
	}
}

// take removes up to maxRows rows of calls from kk's queue, in order,
// copying their rows of x into the batch; with none queued it deletes
// kk's group and returns nil. b.mu is held.
func (b *Batcher) take(kk key) *batch {
	g := b.groups[kk]
	if len(g.queue) == 0 {
		delete(b.groups, kk)
		return nil
	}
	rows, i := 0, 0
	for ; i < len(g.queue) && (i == 0 || rows+g.queue[i].t <= b.maxRows); i++ {
		rows += g.queue[i].t
	}
	bt := &batch{calls: g.queue[:i:i], rows: rows, x: make([]float32, 0, rows*kk.k)}
	g.queue = append([]*call(nil), g.queue[i:]...)
	for _, c := range bt.calls {
		c.taken = true
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

// drain runs batches of kk's queue until it is empty.
func (b *Batcher) drain(kk key, bt *batch) {
	for bt != nil {
		b.run(kk, bt)
		b.mu.Lock()
		bt = b.take(kk)
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
	out := make([]float32, bt.rows*kk.n)
	// No caller's context: a job that leaves must not fail the others'
	// rows, and the multiply is at most maxRows rows long.
	err := multiply(context.Background(), kk, bt.rows, bt.x, out)
	if err != nil {
		for _, c := range bt.calls {
			c.done <- errRetry
		}
		return
	}
	off := 0
	for _, c := range bt.calls {
		copy(c.out, out[off:off+c.t*kk.n])
		off += c.t * kk.n
		c.done <- nil
	}
}

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
