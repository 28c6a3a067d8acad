package peers

import (
	"context"
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/challenge"
)

// gpuVerdictFor is how long a challenge's outcome, pass or fail, is kept.
const gpuVerdictFor = 24 * time.Hour

// gpuCheck is one peer's GPU challenge: under way until done is closed,
// then its outcome.
type gpuCheck struct {
	done chan struct{}
	at   time.Time // when it ended; set before done is closed
	err  error     // nil: passed; set before done is closed
	rep  challenge.Report
}

// GPUChallenge returns the outcome of p's GPU challenge: kept from the
// last 24 hours, or run now (once, however many replicas ask at a time).
// Refusals and transport errors are not kept.
func (b *Book) GPUChallenge(ctx context.Context, p peer.ID, run func(context.Context) (challenge.Report, error)) error {
	b.mu.Lock()
	if b.gpu == nil {
		b.gpu = map[peer.ID]*gpuCheck{}
	}
	c := b.gpu[p]
	if c != nil {
		select {
		case <-c.done:
			if time.Since(c.at) > gpuVerdictFor {
				c = nil
			}
		default:
		}
	}
	mine := c == nil
	if mine {
		c = &gpuCheck{done: make(chan struct{})}
		b.gpu[p] = c
	}
	b.mu.Unlock()
	if mine {
		c.rep, c.err = run(ctx)
		c.at = time.Now()
		close(c.done)
		if c.err != nil && !errors.Is(c.err, challenge.ErrFailed) {
			b.mu.Lock()
			if b.gpu[p] == c {
				delete(b.gpu, p)
			}
			b.mu.Unlock()
		}
		return c.err
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GPUVerdict waits for p's GPU challenge, the one under way or the last
// kept, and returns its report, when it ended and its outcome; ok is false
// when p was never challenged (or its challenge was not kept).
func (b *Book) GPUVerdict(p peer.ID) (rep challenge.Report, at time.Time, err error, ok bool) {
	b.mu.Lock()
	c := b.gpu[p]
	b.mu.Unlock()
	if c == nil {
		return challenge.Report{}, time.Time{}, nil, false
	}
	<-c.done
	return c.rep, c.at, c.err, true
}
