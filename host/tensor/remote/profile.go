package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/infernet/infernet/host/tensor"
)

var _ tensor.Profiler = (*Backend)(nil)

// Profile implements tensor.Profiler: the worker times each operation it
// runs, on its own thread and, where its backend can mark the device's
// queue (CUDA events: marker), on the device. The times come back when
// the profile stops or restarts; a worker started since the last start
// (after a lost device) has only its own.
func (b *Backend) Profile(ctx context.Context, on bool) ([]tensor.OpTime, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := b.child()
	if err != nil {
		return nil, err
	}
	blob := make([]byte, profileBytes)
	if _, err := c.call(opProfile, []uint64{flag(on)}, blob); err != nil {
		return nil, err
	}
	var out []tensor.OpTime
	for op := opcode(1); op < numOps; op++ {
		v := blob[int(op)*24:]
		calls := binary.LittleEndian.Uint64(v)
		if calls == 0 {
			continue
		}
		out = append(out, tensor.OpTime{Op: opName(op), Calls: calls,
			Host:   time.Duration(binary.LittleEndian.Uint64(v[8:])),
			Device: time.Duration(binary.LittleEndian.Uint64(v[16:]))})
	}
	return out, nil
}

// profileBytes is the size of opProfile's reply: per opcode, its calls,
// host and device nanoseconds.
const profileBytes = int(numOps) * 24

// opName is op's name in profiles.
func opName(op opcode) string {
	if specs[op].name != "" {
		return specs[op].name
	}
	return fmt.Sprintf("op%d", op)
}

// marker is a backend that marks its device's queue to time the work
// between two marks (cuda.Backend's events).
type marker interface {
	Mark() (uint64, error)
	Elapsed(from, to uint64) (time.Duration, error)
	Release(marks ...uint64)
}

// maxPendingMarks bounds the marks a worker's profile holds before it
// reads their times, which waits for the device.
const maxPendingMarks = 4096

// profile is a worker's profile while one is on. The marks cost the
// worker's thread two event records per op, counted in its time.
type profile struct {
	m       marker // nil: no device times
	failed  bool   // a mark's time could not be read (a lost device): no more device times
	ops     [numOps]struct{ calls, host, device uint64 }
	pending []pendingOp
}

// pendingOp is an operation whose marks the device may not have passed.
type pendingOp struct {
	op       opcode
	from, to uint64
}

func newProfile(be tensor.Backend) *profile {
	m, _ := be.(marker)
	return &profile{m: m}
}

// timing is one operation being timed.
type timing struct {
	start time.Time
	from  uint64
	ok    bool
}

// begin starts timing an operation.
func (p *profile) begin() timing {
	t := timing{start: time.Now()}
	if p.m != nil && !p.failed {
		var err error
		t.from, err = p.m.Mark()
		t.ok = err == nil
	}
	return t
}

// end finishes timing op.
func (p *profile) end(op opcode, t timing) {
	p.ops[op].calls++
	p.ops[op].host += uint64(time.Since(t.start))
	if !t.ok {
		return
	}
	to, err := p.m.Mark()
	if err != nil {
		p.m.Release(t.from)
		return
	}
	p.pending = append(p.pending, pendingOp{op, t.from, to})
	if len(p.pending) >= maxPendingMarks {
		p.settle()
	}
}

// settle adds the device times of the pending operations, waiting for the
// device to pass their marks, and releases the marks. After a failure (a
// lost device) the profile keeps no more device times.
func (p *profile) settle() {
	for _, q := range p.pending {
		if !p.failed {
			d, err := p.m.Elapsed(q.from, q.to)
			p.failed = err != nil
			if err == nil {
				p.ops[q.op].device += uint64(d)
			}
		}
		p.m.Release(q.from, q.to)
	}
	p.pending = p.pending[:0]
}

// encode is the profile as opProfile's reply.
func (p *profile) encode() []byte {
	out := make([]byte, profileBytes)
	for op, t := range p.ops {
		v := out[op*24:]
		binary.LittleEndian.PutUint64(v, t.calls)
		binary.LittleEndian.PutUint64(v[8:], t.host)
		binary.LittleEndian.PutUint64(v[16:], t.device)
	}
	return out
}

// profileOp answers opProfile: the times of the profile that was on (none:
// zeros), and a new one if on.
func (s *server) profileOp(on bool) error {
	reply := make([]byte, profileBytes)
	if s.prof != nil {
		s.prof.settle()
		reply = s.prof.encode()
	}
	s.prof = nil
	if on {
		s.prof = newProfile(s.be)
	}
	return s.reply(nil, 0, reply)
}
