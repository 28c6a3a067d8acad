package provider

import (
	"bytes"
	"io"
	"sync"
	"time"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/wire"
)

// streamFlush is how long a streamed job's output waits to be sent with
// what follows it: a language model writes a line per token, a few ms
// apart, and one frame per line would cost more than the tokens.
const streamFlush = 5 * time.Millisecond

// maxStreamChunk caps the output one UpdateOutput carries.
const maxStreamChunk = wire.MaxInline / 2

// outputStream is the stdout of a streamed job (JobAnnounce.Stream): it
// writes to the spool and sends the same bytes to the client as
// UpdateOutputs, from a goroutine of its own so that a slow client never
// stalls the job (what is not sent yet waits in memory, at most the job's
// output limit).
type outputStream struct {
	spool io.Writer
	c     *peers.Conn

	mu      sync.Mutex
	pending []byte
	closed  bool
	failed  bool // a send failed: the client is gone, the job goes on
	kick    chan struct{}
	done    chan struct{}
}

func newOutputStream(c *peers.Conn, spool io.Writer) *outputStream {
	s := &outputStream{spool: spool, c: c, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.send()
	return s
}

// Write implements io.Writer.
func (s *outputStream) Write(p []byte) (int, error) {
	n, err := s.spool.Write(p)
	s.mu.Lock()
	if !s.failed {
		s.pending = append(s.pending, p[:n]...)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return n, err
}

// close sends what is left and returns once it is sent: the result must
// come after the output on the stream.
func (s *outputStream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	<-s.done
}

func (s *outputStream) send() {
	defer close(s.done)
	for {
		<-s.kick
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			time.Sleep(streamFlush) // let the next lines join this frame
		}
		s.mu.Lock()
		out, closed := s.pending, s.closed
		s.pending = nil
		s.mu.Unlock()
		for len(out) > 0 {
			chunk := out[:min(len(out), maxStreamChunk)]
			out = out[len(chunk):]
			if err := s.c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateOutput, Output: chunk}); err != nil {
				s.mu.Lock()
				s.failed, s.pending = true, nil
				s.mu.Unlock()
				break
			}
		}
		if closed {
			return
		}
	}
}

// lineLiar is the fault Faults.LieAfterLines: after n honest lines of
// output (n > 0), each line's text changes (lines of them; 0: all the
// rest), as a language model's provider that streams a made-up completion
// after an honest start would. With hold (Faults.HoldLine), each line
// waits for hold(line) before it is written.
type lineLiar struct {
	w              io.Writer
	n, lines, line int
	hold           func(line int)
	partial        []byte
}

func (l *lineLiar) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.partial[:i+1]
		if l.n > 0 && l.line >= l.n && (l.lines == 0 || l.line < l.n+l.lines) {
			line = bytes.Replace(line, []byte(`"text":"`), []byte(`"text":"~`), 1)
		}
		if l.hold != nil {
			l.hold(l.line)
		}
		l.line++
		if _, err := l.w.Write(line); err != nil {
			return 0, err
		}
		l.partial = l.partial[i+1:]
	}
}

// flush writes a last line without its newline.
func (l *lineLiar) flush() error {
	if len(l.partial) == 0 {
		return nil
	}
	_, err := l.w.Write(l.partial)
	l.partial = nil
	return err
}
