package batch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// background is what a long run of the node's own (a sharded job, a
// training run) shares with those who wait for it or stop it. It belongs to
// the node, not to the caller that started it: the caller may go while it
// goes on.
type background struct {
	eventSink
	// cancelled is set by a cancel before it cancels the run's context.
	cancelled atomic.Bool
	cancel    context.CancelFunc
	done      chan struct{} // closed when run returns
	// err is why run ended without a final record (set before done).
	err error
}

// longRun is a long run: its background, and the function that drives it
// to its end.
type longRun interface {
	bg() *background
	run(ctx context.Context) error
}

// stop cancels the run, marked cancelled, and waits for it to return.
func (b *background) stop() {
	b.cancelled.Store(true)
	b.cancel()
	<-b.done
}

// wait waits for the run to return, or ctx; it detaches the caller's
// events either way.
func (b *background) wait(ctx context.Context, what string) error {
	defer b.detach()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s goes on in the node: %w", what, ctx.Err())
	case <-b.done:
	}
	return b.err
}

// runs are a node's runs of one kind under way, by id: each runs once
// however often it is started or resumed.
type runs[R longRun] struct {
	mu sync.Mutex
	m  map[wire.JobID]R // guarded by mu
}

// get returns the run of id and whether one is under way.
func (s *runs[R]) get(id wire.JobID) (R, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	return r, ok
}

// start runs the run that newRun makes in a goroutine of n's, unless a run
// of id is under way already (then it returns that one, its events
// unchanged). A node that is closing starts nothing: that is interrupted.
func (s *runs[R]) start(n *Config, id wire.JobID, events func(jobs.Event), interrupted error, newRun func() R) (R, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[id]; ok {
		return r, nil
	}
	if n.Life.Err() != nil {
		var none R
		return none, fmt.Errorf("%s: %w", id, interrupted)
	}
	ctx, cancel := context.WithCancel(n.Life)
	r := newRun()
	b := r.bg()
	b.events, b.cancel, b.done = events, cancel, make(chan struct{})
	if s.m == nil {
		s.m = map[wire.JobID]R{}
	}
	s.m[id] = r
	started := n.Group.Go(func() {
		defer cancel()
		b.err = r.run(ctx)
		s.mu.Lock()
		delete(s.m, id)
		s.mu.Unlock()
		close(b.done)
	})
	if !started { // the node began to close since Life was looked at
		cancel()
		delete(s.m, id)
		var none R
		return none, fmt.Errorf("%s: %w", id, interrupted)
	}
	return r, nil
}

// waitFor waits until the run of id, if one is under way, has returned, or
// ctx has ended.
func (s *runs[R]) waitFor(ctx context.Context, id wire.JobID) error {
	r, ok := s.get(id)
	if !ok {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.bg().done:
		return nil
	}
}

// eventSink delivers a run's events to whoever listens, one at a time,
// until detach.
type eventSink struct {
	mu     sync.Mutex
	events func(jobs.Event) // guarded by mu; nil once nobody listens
}

func (s *eventSink) emit(e jobs.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if s.events != nil {
		s.events(e)
	}
}

// detach stops event delivery: the caller that listened has returned.
func (s *eventSink) detach() {
	s.mu.Lock()
	s.events = nil
	s.mu.Unlock()
}
