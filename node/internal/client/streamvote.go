package client

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// streamVote holds the output that replicas of a streamed job send while
// they run and releases, in order, the longest prefix that the vote would
// accept if the job ended now: bytes that a group of at least two streams
// share, with an established provider among them and more established
// providers than the streams that say otherwise or may yet (the rule of
// anchored, per byte: an established replica assigned and not yet that
// far may still contradict it, so one that is slow, or has streamed
// nothing yet, holds the release back rather than be outrun by
// colluders). Streams are counted by operator (Book.SameOperator), as the
// vote counts them: one operator's many keys, each streaming the same bytes
// (and each refusing its replica after, so that the next key is drawn),
// are one voice. A liar's stream is thus shown only as far as it agrees
// with honest ones; two replicas that disagree stop the release where they
// part until a third one decides.
type streamVote struct {
	established  func(peer.ID) bool
	sameOperator func(a, b peer.ID) bool
	out          func([]byte) // jobs.Spec.Output
	max          int64        // the job's output limit

	mu       sync.Mutex
	streams  map[attempt]*stream
	released []byte
	// mine is the output of the client's own run of the job (an audit
	// started with the job: own), the job's answer by definition.
	mine []byte
}

// attempt is one provider's run of one replica.
type attempt struct {
	replica uint8
	p       peer.ID
}

// stream is what one attempt sent so far; diverged once it contradicts the
// released prefix. Its first checked bytes are known to agree with the
// released ones, so each byte is compared once however the two grow.
type stream struct {
	b        []byte
	diverged bool
	checked  int
	dead     bool // its attempt ended without a result: no voice any more
}

// recheck compares what is new in s, or newly released, with released.
func (s *stream) recheck(released []byte) {
	n := min(len(s.b), len(released))
	if s.diverged || n <= s.checked {
		return
	}
	s.diverged = !bytes.Equal(s.b[s.checked:n], released[s.checked:n])
	s.checked = n
}

func newStreamVote(established func(peer.ID) bool, sameOperator func(a, b peer.ID) bool, out func([]byte), max int64) *streamVote {
	return &streamVote{established: established, sameOperator: sameOperator, out: out, max: max, streams: map[attempt]*stream{}}
}

// join counts replica r run by p in the vote from its assign on, before
// it streams anything (see decided): an honest provider still fetching a
// model's weights is no less a voice than colluders streaming already.
func (v *streamVote) join(r uint8, p peer.ID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.streams[attempt{r, p}] == nil {
		v.streams[attempt{r, p}] = &stream{}
	}
}

// add appends data to the stream of replica r run by p and releases what
// is newly agreed. A stream over the output limit is the provider's fault.
func (v *streamVote) add(r uint8, p peer.ID, data []byte) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.streams[attempt{r, p}]
	if s == nil {
		s = &stream{}
		v.streams[attempt{r, p}] = s
	}
	if int64(len(s.b)+len(data)) > v.max {
		return fmt.Errorf("streamed output over the job's limit of %d bytes", v.max)
	}
	s.b = append(s.b, data...)
	s.recheck(v.released)
	v.advance()
	return nil
}

// own appends data to the client's own run of the job, which is released
// as it comes, as far as it continues what was released: in exact mode an
// honest replica writes the same bytes, and where every replica disagrees
// the client's run is the verified answer. It implements io.Writer's
// contract for the audit's stdout (it never fails: past the job's output
// limit it releases no more, and the audit's own result says why).
func (v *streamVote) own(data []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if int64(len(v.mine)+len(data)) > v.max {
		return len(data), nil
	}
	v.mine = append(v.mine, data...)
	if len(v.mine) <= len(v.released) || !bytes.HasPrefix(v.mine, v.released) {
		return len(data), nil
	}
	fresh := bytes.Clone(v.mine[len(v.released):])
	v.released = append(v.released, fresh...)
	for _, s := range v.streams {
		s.recheck(v.released)
	}
	v.out(fresh)
	return len(data), nil
}

// advance releases the longest prefix some stream's group decides.
func (v *streamVote) advance() {
	best := v.released
	for _, ref := range v.streams {
		if !ref.diverged && !ref.dead && len(ref.b) > len(best) {
			if n := v.decided(ref); n > len(best) {
				best = ref.b[:n]
			}
		}
	}
	if len(best) == len(v.released) {
		return
	}
	fresh := best[len(v.released):]
	v.released = append(v.released, fresh...)
	for _, s := range v.streams {
		s.recheck(v.released)
	}
	v.out(fresh)
}

// decided returns the longest prefix of ref that the streams decide for
// it (at most len(v.released) if none).
func (v *streamVote) decided(ref *stream) int {
	type other struct {
		p           peer.ID
		lcp         int // bytes in common with ref
		established bool
	}
	var others []other
	for a, s := range v.streams {
		if s.dead && s != ref {
			continue
		}
		o := other{p: a.p, established: v.established(a.p)}
		switch {
		case s == ref:
			o.lcp = len(ref.b)
		case s.diverged:
			o.lcp = 0
		case len(s.b) <= len(v.released): // agrees, and says nothing further yet
			o.lcp = len(s.b)
		default:
			o.lcp = len(v.released) + commonPrefix(s.b[len(v.released):], ref.b[len(v.released):])
		}
		others = append(others, o)
	}
	// A longer prefix has fewer streams for it and more against: try each
	// candidate length.
	best := len(v.released)
	for _, cand := range others {
		n := cand.lcp
		if n <= best {
			continue
		}
		var support, estFor, estAgainst []peer.ID
		for _, o := range others {
			switch {
			case o.lcp >= n:
				support = append(support, o.p)
				if o.established {
					estFor = append(estFor, o.p)
				}
			case o.established:
				// Against, or not that far yet: it may still be.
				estAgainst = append(estAgainst, o.p)
			}
		}
		if ops := v.operators(estFor); v.operators(support) >= 2 && ops > 0 && ops > v.operators(estAgainst) {
			best = n
		}
	}
	return best
}

// operators is how many operators the peers ids are.
func (v *streamVote) operators(ids []peer.ID) int {
	return operatorsAmong(v.sameOperator, ids)
}

// commonPrefix is the length of the common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// kill takes the stream of replica r run by p out of the vote: its
// attempt ended without a result (lost, reneged, connection dropped).
func (v *streamVote) kill(r uint8, p peer.ID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.streams[attempt{r, p}]; s != nil {
		s.dead = true
	}
}

// shownThenDied reports whether the attempt of a stream whose bytes were
// released ended without a result: its provider backed out after what it
// streamed was shown, which only a verdict can judge.
func (v *streamVote) shownThenDied() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.streams {
		if s.dead && s.checked > 0 && !s.diverged {
			return true
		}
	}
	return false
}

// contradicting returns the providers whose streams out, the verified
// output, contradicts, but for those judged already (judged: by their
// results).
func (v *streamVote) contradicting(out []byte, judged func(peer.ID) bool) []peer.ID {
	v.mu.Lock()
	defer v.mu.Unlock()
	var ps []peer.ID
	for a, s := range v.streams {
		if len(s.b) > 0 && !bytes.HasPrefix(out, s.b) && !judged(a.p) && !slices.Contains(ps, a.p) {
			ps = append(ps, a.p)
		}
	}
	return ps
}

// matches reports whether the stream of replica r run by p is exactly
// the output res signs for: a provider may not stream one thing and vote
// for another.
func (v *streamVote) matches(r uint8, p peer.ID, res *wire.Result) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b []byte
	if s := v.streams[attempt{r, p}]; s != nil {
		b = s.b
	}
	return int64(len(b)) == res.OutputSize && blob.Sum(b) == res.Output
}

// finish releases the rest of the verified output, which must continue
// what was released.
func (v *streamVote) finish(out []byte) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !bytes.HasPrefix(out, v.released) {
		return jobs.ErrStreamContradicted
	}
	if fresh := out[len(v.released):]; len(fresh) > 0 {
		v.released = append(v.released, fresh...)
		v.out(fresh)
	}
	return nil
}

// queueOutput returns queue, which hands copies of its bytes to a
// goroutine of its own that calls out with them in order, and drain, which
// waits until all were passed. A slow consumer of a streamed job's output
// (an HTTP client reading an API's stream) thus never holds up the vote,
// the replicas' streams, or the providers writing them, whose stalled
// writes would look like broken streams.
func queueOutput(out func([]byte)) (queue func([]byte), drain func()) {
	var (
		mu      sync.Mutex
		pending [][]byte
		closed  bool
	)
	wake, done := make(chan struct{}, 1), make(chan struct{})
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(done)
		for {
			mu.Lock()
			batch, end := pending, closed
			pending = nil
			mu.Unlock()
			for _, b := range batch {
				out(b)
			}
			switch {
			case len(batch) > 0:
			case end:
				return
			default:
				<-wake
			}
		}
	}()
	queue = func(b []byte) {
		mu.Lock()
		pending = append(pending, bytes.Clone(b))
		mu.Unlock()
		signal()
	}
	drain = func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		signal()
		<-done
	}
	return queue, drain
}
