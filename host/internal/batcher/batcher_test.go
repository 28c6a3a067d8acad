package batcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/reference"
)

// gate wraps a rowwise backend; while armed, every MatMul waits for a
// release before it runs, so a test can hold a multiply running while
// other calls queue behind it.
type gate struct {
	tensor.RowwiseMatMul
	armed   atomic.Bool
	entered chan struct{} // receives once per gated call, as it starts waiting
	release chan struct{}
	calls   atomic.Int64 // MatMul calls, gated or not
	rows    []int        // t of each call, in order (under mu)
	mu      sync.Mutex
}

func newGate(tr tensor.RowwiseMatMul) *gate {
	g := &gate{RowwiseMatMul: tr, entered: make(chan struct{}, 64), release: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *gate) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	g.calls.Add(1)
	g.mu.Lock()
	g.rows = append(g.rows, t)
	g.mu.Unlock()
	if g.armed.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.RowwiseMatMul.MatMul(ctx, t, n, k, x, w, out)
}

// open disarms the gate and lets every waiting call through.
func (g *gate) open() {
	g.armed.Store(false)
	close(g.release)
}

// waitQueue waits until kk's queue of b holds n calls.
func waitQueue(t *testing.T, b *Batcher, w *tensor.HostBuffer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := 0
		for kk, g := range b.groups {
			if kk.w == w {
				got = len(g.queue)
			}
		}
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// weights returns random n×k weights of type dt with sane scales (no
// NaN or infinite f16 fields).
func weights(r *rand.Rand, dt abi.DType, n, k int) *tensor.HostBuffer {
	if dt == abi.F32 {
		w := make([]float32, n*k)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		return &tensor.HostBuffer{F32: w}
	}
	raw := make([]byte, dt.Bytes(n*k))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	put := func(off int) { binary.LittleEndian.PutUint16(raw[off:], 0x2C00|uint16(r.Uint32()&0x83FF)) } // ±[1/16, 1/8)
	switch dt {
	case abi.F16:
		for i := 0; i < len(raw); i += 2 {
			put(i)
		}
	case abi.BF16:
		for i := 0; i < len(raw); i += 2 {
			binary.LittleEndian.PutUint16(raw[i:], 0x3E00|uint16(r.Uint32()&0x807F))
		}
	default:
		bb := dt.BlockBytes()
		for b := 0; b < len(raw); b += bb {
			switch dt {
			case abi.Q8_0, abi.Q4_0, abi.Q5_0:
				put(b)
			case abi.Q4_1, abi.Q5_1, abi.Q4_K, abi.Q5_K:
				put(b)
				put(b + 2)
			case abi.Q6_K:
				put(b + 208)
			}
		}
	}
	return &tensor.HostBuffer{Raw: raw, RawType: dt, RawLen: n * k}
}

// floats returns n values of r, with a NaN and an infinity among them
// when n allows, so canonical NaNs are checked too.
func floats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// sameBits reports the first index where a and b differ in bits, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// backends are the rowwise backends batched: the reference (exact mode)
// and cpu (tolerance mode: integer kernels for Q4_0, Q4_K, Q6_K).
func backends() map[string]tensor.RowwiseMatMul {
	return map[string]tensor.RowwiseMatMul{
		"reference": reference.New(reference.Config{Threads: 2}),
		"cpu":       cpu.New(cpu.Config{Threads: 2}),
	}
}

// batchBits runs callers calls of rows[i] rows each through b, all but
// the first queued behind it (the first runs alone, held by a gate, so
// the rest run as one multiply), and checks each call's output against a
// call of tr alone, bit for bit. It returns the first mismatch.
func batchBits(t *testing.T, tr tensor.RowwiseMatMul, w *tensor.HostBuffer, n, k int, rows []int, seed uint64) error {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	b := New(Config{})
	g := newGate(tr)
	xs, outs := make([][]float32, len(rows)), make([][]float32, len(rows))
	for i, rr := range rows {
		xs[i], outs[i] = floats(r, rr*k), make([]float32, rr*n)
	}
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Go(func() {
			m := b.Join()
			defer m.Leave()
			errs[i] = m.MatMul(context.Background(), g, rows[i], n, k,
				&tensor.HostBuffer{F32: xs[i]}, w, &tensor.HostBuffer{F32: outs[i]})
		})
	}
	call(0)
	<-g.entered // the first runs alone and holds the weight
	for i := 1; i < len(rows); i++ {
		call(i)
	}
	waitQueue(t, b, w, len(rows)-1)
	g.open()
	wg.Wait()
	if s := b.Stats(); len(rows) > 2 && s.Batched != uint64(len(rows)-1) {
		return fmt.Errorf("%d calls batched, want %d (%+v)", s.Batched, len(rows)-1, s)
	}
	for i, rr := range rows {
		if errs[i] != nil {
			return fmt.Errorf("call %d: %w", i, errs[i])
		}
		want := make([]float32, rr*n)
		if err := tr.MatMul(context.Background(), rr, n, k, &tensor.HostBuffer{F32: xs[i]}, w, &tensor.HostBuffer{F32: want}); err != nil {
			return err
		}
		if j := sameBits(outs[i], want); j >= 0 {
			return fmt.Errorf("call %d of %d rows (callers %v): element %d is %v batched, %v alone", i, rr, rows, j, outs[i][j], want[j])
		}
	}
	return nil
}

// TestBitsEqualUnbatched: on both CPU backends and every weight type, with
// odd shapes, 1 to 8 callers of 1 to 3 rows each batched together give
// each caller the bits of its call alone.
func TestBitsEqualUnbatched(t *testing.T) {
	for _, tc := range []struct {
		dt   abi.DType
		n, k int
	}{
		{abi.F32, 37, 50}, // k not a multiple of the 16 lanes
		{abi.F16, 19, 77},
		{abi.BF16, 23, 33},
		{abi.Q8_0, 41, 96},
		{abi.Q4_0, 29, 160},
		{abi.Q4_K, 13, 512},
		{abi.Q5_K, 11, 256},
		{abi.Q6_K, 17, 256},
	} {
		r := rand.New(rand.NewPCG(uint64(tc.dt), 2))
		w := weights(r, tc.dt, tc.n, tc.k)
		for name, tr := range backends() {
			for callers := 1; callers <= 8; callers++ {
				rows := make([]int, callers)
				for i := range rows {
					rows[i] = 1 + (i*7+callers)%3
				}
				t.Run(fmt.Sprintf("%v/%dx%d/%s/callers=%d", tc.dt, tc.n, tc.k, name, callers), func(t *testing.T) {
					if err := batchBits(t, tr, w, tc.n, tc.k, rows, uint64(callers)); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// rowMixer is a backend whose rows depend on how many are multiplied
// together (as a blocked GEMM's may), falsely declared rowwise.
type rowMixer struct{ tensor.RowwiseMatMul }

func (m rowMixer) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	if err := m.RowwiseMatMul.MatMul(ctx, t, n, k, x, w, out); err != nil {
		return err
	}
	o := out.(*tensor.HostBuffer).F32
	for i := range o {
		o[i] += float32(t) * 1e-3
	}
	return nil
}

// TestBitsCheckCatchesRowMixing: the check of TestBitsEqualUnbatched
// fails for a backend whose rows depend on the batch.
func TestBitsCheckCatchesRowMixing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	w := weights(r, abi.Q8_0, 9, 64)
	mixer := &rowMixer{reference.New(reference.Config{Threads: 1})}
	if err := batchBits(t, mixer, w, 9, 64, []int{1, 1, 1}, 1); err == nil {
		t.Fatal("a backend whose rows depend on the batch passed the check")
	}
}

// counter is a rowwise backend that records the buffers of its calls.
type counter struct {
	tensor.RowwiseMatMul
	mu   sync.Mutex
	seen []tensor.Buffer // x of each call
}

func (c *counter) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	c.mu.Lock()
	c.seen = append(c.seen, x)
	c.mu.Unlock()
	return c.RowwiseMatMul.MatMul(ctx, t, n, k, x, w, out)
}

// notRowwise hides a backend's RowwiseMatMul.
type notRowwise struct{ tensor.Transformer }

// TestDirect: a lone caller's call reaches the backend as it was made
// (its own buffers, no copy), and calls that may not be batched (more
// than MaxRows rows, a backend that is not rowwise) run directly too.
func TestDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := weights(r, abi.Q8_0, 8, 32)
	for _, tc := range []struct {
		name    string
		rows    int
		rowwise bool
		batched bool // counted as a call that could be batched
	}{
		{"alone", 1, true, true},
		{"rows past MaxRows", 5, true, false},
		{"not rowwise", 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{RowwiseMatMul: reference.New(reference.Config{Threads: 1})}
			var tr tensor.Transformer = c
			if !tc.rowwise {
				tr = notRowwise{c}
			}
			b := New(Config{MaxRows: 4})
			x := &tensor.HostBuffer{F32: floats(r, tc.rows*32)}
			m := b.Join()
			if err := m.MatMul(context.Background(), tr, tc.rows, 8, 32, x, w, &tensor.HostBuffer{F32: make([]float32, tc.rows*8)}); err != nil {
				t.Fatal(err)
			}
			m.Leave()
			if len(c.seen) != 1 || c.seen[0] != x {
				t.Errorf("backend saw %v, want the caller's x %p once", c.seen, x)
			}
			if got := b.Stats().Calls; got != map[bool]uint64{true: 1}[tc.batched] {
				t.Errorf("%d calls counted", got)
			}
			if len(b.groups) != 0 {
				t.Errorf("%d groups left", len(b.groups))
			}
		})
	}
}

// poison is a rowwise backend that fails, or panics, when x holds the
// value bad: one caller's rows that break the kernel.
type poison struct {
	tensor.RowwiseMatMul
	panics bool
}

const bad = 12345

func (p poison) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	for _, v := range x.(*tensor.HostBuffer).F32 {
		if v == bad {
			if p.panics {
				panic("poisoned row")
			}
			return errors.New("poisoned row")
		}
	}
	return p.RowwiseMatMul.MatMul(ctx, t, n, k, x, w, out)
}

// TestFailureIsTheCallersOwn: when a batched multiply fails (an error or
// a panic) because of one caller's rows, that caller alone gets the
// error or the panic; the others get their results.
func TestFailureIsTheCallersOwn(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 5))
			ref := reference.New(reference.Config{Threads: 1})
			w := weights(r, abi.Q8_0, 8, 32)
			g := newGate(poison{ref, panics})
			b := New(Config{})
			const callers = 4
			xs, outs := make([][]float32, callers), make([][]float32, callers)
			errs, panicked := make([]error, callers), make([]any, callers)
			var wg sync.WaitGroup
			call := func(i int) {
				xs[i], outs[i] = floats(r, 32), make([]float32, 8)
				if i == 2 {
					xs[i][5] = bad
				}
				wg.Go(func() {
					defer func() { panicked[i] = recover() }()
					m := b.Join()
					defer m.Leave()
					errs[i] = m.MatMul(context.Background(), g, 1, 8, 32, &tensor.HostBuffer{F32: xs[i]}, w, &tensor.HostBuffer{F32: outs[i]})
				})
			}
			call(0)
			<-g.entered
			for i := 1; i < callers; i++ {
				call(i)
			}
			waitQueue(t, b, w, callers-1)
			g.open()
			wg.Wait()
			for i := range callers {
				failed := errs[i] != nil || panicked[i] != nil
				if failed != (i == 2) {
					t.Errorf("caller %d: error %v, panic %v", i, errs[i], panicked[i])
				}
				if i == 2 && panics != (panicked[i] != nil) {
					t.Errorf("caller 2: panic %v, want one: %v", panicked[i], panics)
				}
				if i == 2 {
					continue
				}
				want := make([]float32, 8)
				if err := ref.MatMul(context.Background(), 1, 8, 32, &tensor.HostBuffer{F32: xs[i]}, w, &tensor.HostBuffer{F32: want}); err != nil {
					t.Fatal(err)
				}
				if j := sameBits(outs[i], want); j >= 0 {
					t.Errorf("caller %d: element %d is %v, want %v", i, j, outs[i][j], want[j])
				}
			}
		})
	}
}

// TestCancelIsolated: a queued caller whose context ends leaves at once,
// while the multiply ahead of it still runs, its output untouched; a
// caller whose context ends while its rows are in a multiply gets its
// context's error when that multiply ends; neither fails nor stalls the
// others, whose contexts never end.
func TestCancelIsolated(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	ref := reference.New(reference.Config{Threads: 1})
	w := weights(r, abi.Q8_0, 8, 32)
	g := newGate(ref)
	b := New(Config{})
	mm := func(ctx context.Context, x, out []float32) error {
		m := b.Join()
		defer m.Leave()
		return m.MatMul(ctx, g, 1, 8, 32, &tensor.HostBuffer{F32: x}, w, &tensor.HostBuffer{F32: out})
	}
	const callers = 5 // 0 runs alone; 1 leaves while queued; 2 while in the batch
	xs, outs, errs := make([][]float32, callers), make([][]float32, callers), make([]error, callers)
	ctxs, cancels := make([]context.Context, callers), make([]context.CancelFunc, callers)
	for i := range callers {
		xs[i], outs[i] = floats(r, 32), make([]float32, 8)
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
	}
	var wg sync.WaitGroup
	done := make([]chan struct{}, callers)
	call := func(i int) {
		done[i] = make(chan struct{})
		wg.Go(func() { errs[i] = mm(ctxs[i], xs[i], outs[i]); close(done[i]) })
	}
	call(0)
	<-g.entered
	for i := 1; i < callers; i++ {
		call(i)
	}
	waitQueue(t, b, w, callers-1)

	cancels[1]() // caller 1 leaves the queue while caller 0 still holds the weight
	select {
	case <-done[1]:
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled queued caller did not leave")
	}
	waitQueue(t, b, w, callers-2)
	g.release <- struct{}{} // caller 0 ends; 2..4 start as one batch, held by the gate
	<-g.entered
	cancels[2]()
	g.open()
	wg.Wait()

	for i, want := range []error{nil, context.Canceled, context.Canceled, nil, nil} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("caller %d: %v, want %v", i, errs[i], want)
		}
	}
	if j := sameBits(outs[1], make([]float32, 8)); j >= 0 {
		t.Errorf("the caller that left had its output written: %v", outs[1])
	}
	for _, i := range []int{0, 3, 4} {
		want := make([]float32, 8)
		if err := ref.MatMul(context.Background(), 1, 8, 32, &tensor.HostBuffer{F32: xs[i]}, w, &tensor.HostBuffer{F32: want}); err != nil {
			t.Fatal(err)
		}
		if j := sameBits(outs[i], want); j >= 0 {
			t.Errorf("caller %d: element %d is %v, want %v", i, j, outs[i][j], want[j])
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if want := []int{1, 3}; fmt.Sprint(g.rows) != fmt.Sprint(want) {
		t.Errorf("multiplies of %v rows, want %v", g.rows, want)
	}
}

// TestConcurrent: many callers on two weights, at random, with random row
// counts, some cancelled: no deadlock, every completed call has the bits
// of its call alone, and no group is left (run it with -race).
func TestConcurrent(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 2})
	tr := slow{ref} // long enough that calls meet
	r := rand.New(rand.NewPCG(7, 7))
	ws := []*tensor.HostBuffer{weights(r, abi.Q8_0, 24, 64), weights(r, abi.F16, 24, 64)}
	b := New(Config{MaxRows: 6})
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 8))
			m := b.Join()
			defer m.Leave()
			for range 50 {
				w, rows := ws[r.IntN(2)], 1+r.IntN(4)
				x, out := floats(r, rows*64), make([]float32, rows*24)
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(8) == 0 {
					cancel()
				}
				err := m.MatMul(ctx, tr, rows, 24, 64, &tensor.HostBuffer{F32: x}, w, &tensor.HostBuffer{F32: out})
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					continue
				}
				want := make([]float32, rows*24)
				if err := ref.MatMul(context.Background(), rows, 24, 64, &tensor.HostBuffer{F32: x}, w, &tensor.HostBuffer{F32: want}); err != nil {
					t.Error(err)
				}
				if j := sameBits(out, want); j >= 0 {
					t.Errorf("element %d is %v, want %v", j, out[j], want[j])
				}
			}
		})
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.groups) != 0 {
		t.Errorf("%d groups left", len(b.groups))
	}
	if s := b.Stats(); s.Batched == 0 {
		t.Errorf("no call was batched: %+v", s)
	}
	t.Logf("%+v", b.Stats())
}

// slow is a rowwise backend whose MatMul takes 200 µs more.
type slow struct{ tensor.RowwiseMatMul }

func (s slow) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	time.Sleep(200 * time.Microsecond)
	return s.RowwiseMatMul.MatMul(ctx, t, n, k, x, w, out)
}

// matmul is one member's call of 1 row against w [8, 32] on tr, in a
// goroutine; its result arrives on the channel.
func matmul(m *Member, tr tensor.Transformer, w *tensor.HostBuffer) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- m.MatMul(context.Background(), tr, 1, 8, 32, &tensor.HostBuffer{F32: make([]float32, 32)}, w, &tensor.HostBuffer{F32: make([]float32, 8)})
	}()
	return done
}

// pending reports whether a call has not returned.
func pending(done <-chan error) bool {
	select {
	case err := <-done:
		panic(fmt.Sprintf("the call returned (%v)", err))
	default:
		return true
	}
}

// gathered waits until n calls gather at w.
func gathered(t *testing.T, b *Batcher, w *tensor.HostBuffer, n int) {
	t.Helper()
	waitQueue(t, b, w, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	for kk, g := range b.groups {
		if kk.w == w && (g.busy || !b.gathering[g]) {
			t.Fatalf("the calls at w do not gather: busy %v", g.busy)
		}
	}
}

// joined returns n members expected at each of ws ([8, 32]), as if each
// had called them all before.
func joined(b *Batcher, tr tensor.Transformer, n int, ws ...*tensor.HostBuffer) []*Member {
	ms := make([]*Member, n)
	for i := range ms {
		ms[i] = b.Join()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range ws {
		kk := key{tr: tr, w: w, n: 8, k: 32}
		g := &group{key: kk, members: map[*Member]bool{}}
		b.groups[kk] = g
		for _, m := range ms {
			g.members[m], m.at[kk] = true, true
		}
	}
	return ms
}

// TestGather: members expected at a weight wait for each other there and
// run as one multiply; a lone member never waits; a member that leaves,
// or that is late past MaxWait, is no longer waited for; and two gathers
// at different weights never wait for each other.
func TestGather(t *testing.T) {
	const forever = time.Hour // no test may reach it: it would time out
	ref := reference.New(reference.Config{Threads: 1})
	r := rand.New(rand.NewPCG(9, 9))
	w1, w2 := weights(r, abi.Q8_0, 8, 32), weights(r, abi.Q8_0, 8, 32)
	joined := func(b *Batcher, tr tensor.Transformer, n int) []*Member { return joined(b, tr, n, w1, w2) }
	t.Run("lone member", func(t *testing.T) {
		c := &counter{RowwiseMatMul: ref}
		b := New(Config{MaxWait: forever})
		m := joined(b, c, 1)[0]
		for range 10 {
			if err := <-matmul(m, c, w1); err != nil {
				t.Fatal(err)
			}
		}
		if s := b.Stats(); s.Runs != 10 || s.Batched != 0 {
			t.Errorf("%+v, want 10 runs alone", s)
		}
	})
	t.Run("members meet", func(t *testing.T) {
		g := newGate(ref)
		g.open()
		b := New(Config{MaxWait: forever})
		ms := joined(b, g, 3)
		first := matmul(ms[0], g, w1)
		gathered(t, b, w1, 1)
		second := matmul(ms[1], g, w1)
		gathered(t, b, w1, 2)
		pending(first)
		pending(second)
		third := matmul(ms[2], g, w1)
		for _, done := range []<-chan error{first, second, third} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if last := g.rows[len(g.rows)-1]; last != 3 {
			t.Errorf("the last multiply had %d rows, want the 3 members'", last)
		}
	})
	t.Run("leave", func(t *testing.T) {
		b := New(Config{MaxWait: forever})
		ms := joined(b, ref, 2)
		first := matmul(ms[0], ref, w1)
		gathered(t, b, w1, 1)
		ms[1].Leave()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("late", func(t *testing.T) {
		b := New(Config{MaxWait: 10 * time.Millisecond})
		ms := joined(b, ref, 2)
		if err := <-matmul(ms[0], ref, w1); err != nil { // waits for ms[1], in vain
			t.Fatal(err)
		}
		if s := b.Stats(); s.Expired != 1 {
			t.Errorf("%d gathers expired, want 1", s.Expired)
		}
		b.mu.Lock()
		expected := b.groups[key{tr: ref, w: w2, n: 8, k: 32}].members[ms[1]]
		b.mu.Unlock()
		if expected {
			t.Error("the late member is still expected at the other weight")
		}
		if err := <-matmul(ms[0], ref, w2); err != nil { // no wait: ms[1] was dropped
			t.Fatal(err)
		}
		if s := b.Stats(); s.Expired != 1 {
			t.Errorf("%d gathers expired, want 1", s.Expired)
		}
	})
	t.Run("crossed gathers", func(t *testing.T) {
		b := New(Config{MaxWait: forever})
		ms := joined(b, ref, 3)
		first := matmul(ms[0], ref, w1) // waits for ms[1] and ms[2]
		gathered(t, b, w1, 1)
		second := matmul(ms[1], ref, w2) // waits for ms[2], not for ms[0], who waits too
		gathered(t, b, w2, 1)
		pending(first)
		// ms[2] joins ms[0]: nobody is outside, both gathers go.
		third := matmul(ms[2], ref, w1)
		for _, done := range []<-chan error{first, second, third} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// BenchmarkLone measures what the batcher adds to a lone job's decode
// matmul (768×768 q8_0, one row, the cpu backend), against the backend's
// own call, side by side.
func BenchmarkLone(b *testing.B) {
	tr := cpu.New(cpu.Config{Threads: 2})
	r := rand.New(rand.NewPCG(10, 10))
	w := weights(r, abi.Q8_0, 768, 768)
	x, out := &tensor.HostBuffer{F32: floats(r, 768)}, &tensor.HostBuffer{F32: make([]float32, 768)}
	m := New(Config{}).Join()
	defer m.Leave()
	for _, tc := range []struct {
		name string
		mm   func(context.Context, tensor.Transformer, int, int, int, tensor.Buffer, tensor.Buffer, tensor.Buffer) error
	}{
		{"direct", func(ctx context.Context, tr tensor.Transformer, t, n, k int, x, w, out tensor.Buffer) error {
			return tr.MatMul(ctx, t, n, k, x, w, out)
		}},
		{"batcher", m.MatMul},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if err := tc.mm(context.Background(), tr, 1, 768, 768, x, w, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// gatherOrReturn waits until a lone call at w gathers there (true) or
// returns without error (false).
func gatherOrReturn(t *testing.T, b *Batcher, w *tensor.HostBuffer, done <-chan error) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return false
		default:
		}
		b.mu.Lock()
		gathers := false
		for kk, g := range b.groups {
			gathers = gathers || kk.w == w && b.gathering[g] && len(g.queue) == 1
		}
		b.mu.Unlock()
		if gathers {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatal("the call neither gathers nor returns")
		}
		time.Sleep(time.Millisecond)
	}
}

// expireAt runs the gather under way at w as its MaxWait timer would.
func expireAt(b *Batcher, w *tensor.HostBuffer) {
	b.mu.Lock()
	var gs []*group
	for kk, g := range b.groups {
		if kk.w == w && b.gathering[g] {
			gs = append(gs, g)
		}
	}
	b.mu.Unlock()
	for _, g := range gs {
		b.mu.Lock()
		round := g.round
		b.mu.Unlock()
		b.expire(g, round)
	}
}

// expected reports whether m is expected at any weight.
func expected(b *Batcher, m *Member) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.groups {
		if g.members[m] {
			return true
		}
	}
	return len(m.at) > 0
}

// TestStaller: a member that keeps the others waiting at every step, by
// stalling past MaxWait or by coming just before it, costs them Strikes
// gathers, not one per step; it is still served meanwhile, and expected
// again after BackoffCalls calls, for half as long as its next strike's
// backoff. Gathers expire and time passes by the test's hand: counts only.
func TestStaller(t *testing.T) {
	const (
		forever = time.Hour // no timer fires
		rounds  = 20
	)
	ref := reference.New(reference.Config{Threads: 1})
	r := rand.New(rand.NewPCG(11, 11))
	w1, w2, w3 := weights(r, abi.Q8_0, 8, 32), weights(r, abi.Q8_0, 8, 32), weights(r, abi.Q8_0, 8, 32)
	ok := func(done <-chan error) {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	t.Run("stalls", func(t *testing.T) {
		b := New(Config{MaxWait: forever})
		ms := joined(b, ref, 2, w1, w2)
		a, s := ms[0], ms[1]
		// round: a step of a and s together (s calls first, and gathers
		// for a unless it is no longer expected), then a step of a while
		// s stalls: a waits for s wherever s is expected, until the
		// gather expires.
		round := func() {
			for _, w := range []*tensor.HostBuffer{w1, w2} {
				sd := matmul(s, ref, w)
				if gatherOrReturn(t, b, w, sd) {
					ok(matmul(a, ref, w))
					ok(sd)
				} else {
					ok(matmul(a, ref, w))
				}
			}
			for _, w := range []*tensor.HostBuffer{w1, w2} {
				ad := matmul(a, ref, w)
				if gatherOrReturn(t, b, w, ad) {
					expireAt(b, w)
					ok(ad)
				}
			}
		}
		for range rounds {
			round()
		}
		if st := b.Stats(); st.Expired != Strikes || st.Struck != 1 {
			t.Errorf("%+v: want %d gathers expired and 1 member struck, whatever the rounds (%d)", st, Strikes, rounds)
		}
		if expected(b, s) || !expected(b, a) {
			t.Errorf("the staller expected %v, the other %v", expected(b, s), expected(b, a))
		}
		// s's backoff runs out after its calls: 2 a round since its last
		// strike, then these, at a weight a never calls.
		left := BackoffCalls - 2*(rounds-Strikes)
		if s.skip != left {
			t.Fatalf("%d calls of backoff left, want %d", s.skip, left)
		}
		for range left {
			ok(matmul(s, ref, w3))
		}
		if expected(b, s) {
			t.Fatal("expected before its backoff ran out")
		}
		ok(matmul(s, ref, w3))
		if !expected(b, s) {
			t.Fatal("not expected after its backoff ran out")
		}
		// It stalls once more: expected at w1 again, it is struck at
		// the next expiry, for twice as long.
		sd := matmul(s, ref, w1)
		if !gatherOrReturn(t, b, w1, sd) {
			t.Fatal("s did not gather for a")
		}
		ok(matmul(a, ref, w1))
		ok(sd)
		ad := matmul(a, ref, w1)
		if !gatherOrReturn(t, b, w1, ad) {
			t.Fatal("a did not gather for s")
		}
		expireAt(b, w1)
		ok(ad)
		if st := b.Stats(); st.Expired != Strikes+1 || st.Struck != 2 || s.skip != 2*BackoffCalls {
			t.Errorf("%+v, %d calls of backoff: want %d expired, 2 struck, %d calls", st, s.skip, Strikes+1, 2*BackoffCalls)
		}
	})
	t.Run("late", func(t *testing.T) {
		b := New(Config{MaxWait: forever})
		var clock atomic.Int64 // ns since the epoch
		b.now = func() time.Time { return time.Unix(0, clock.Load()) }
		ms := joined(b, ref, 2, w1, w2)
		a, s := ms[0], ms[1]
		// Every step, a waits for s at each weight, and s comes after
		// 0.6 MaxWait: no gather expires.
		for range rounds {
			for _, w := range []*tensor.HostBuffer{w1, w2} {
				ad := matmul(a, ref, w)
				if gatherOrReturn(t, b, w, ad) {
					clock.Add(int64(forever * 6 / 10))
					ok(matmul(s, ref, w))
					ok(ad)
				} else {
					ok(matmul(s, ref, w))
				}
			}
		}
		if st := b.Stats(); st.Late != Strikes || st.Expired != 0 || st.Struck != 1 {
			t.Errorf("%+v: want %d late gathers, none expired, 1 member struck, whatever the rounds (%d)", st, Strikes, rounds)
		}
		if expected(b, s) || a.strikes != 0 {
			t.Errorf("the late member is expected (%v), or the other struck (%d)", expected(b, s), a.strikes)
		}
	})
}
