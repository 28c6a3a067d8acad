package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// newFakeGraphs is newFake with Config.Graphs.
func newFakeGraphs(t *testing.T) *Backend {
	t.Helper()
	path := fake(t)
	b, err := New(Config{Driver: path, CUBLAS: path, Graphs: true})
	if err != nil {
		t.Fatalf("New on the fake driver: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// fakeGraphs runs the shared tests with Config.Graphs on the fake driver,
// which fails any call on the default stream while a capture is under way
// (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), as a driver does.
var fakeGraphs = target{open: newFakeGraphs, openNoStrided: newFakeGraphs, fake: true}

func TestFakeGraphs_TransformerMatchesReference(t *testing.T) {
	testTransformerMatchesReference(t, fakeGraphs)
}

func TestFakeGraphs_V2MatchesReference(t *testing.T) { testV2MatchesReference(t, fakeGraphs) }

func TestFakeGraphs_GemmF32MatchesNaive(t *testing.T) { testGemmF32MatchesNaive(t, fakeGraphs) }

// decodeStep is a decode step's kinds of work on tiny shapes: a staged
// write (the token's id), an embedding, a norm, a GEMV with its residual,
// a copy into a cache row, a memset and argmax, which reads the token
// back. It returns the token and the step's output row.
type decodeStep struct {
	table, g, w, cache tensor.Buffer
	rows, cols         int
}

func newDecodeStep(t *testing.T, b *Backend, r *rand.Rand) *decodeStep {
	t.Helper()
	const rows, cols = 16, 64
	s := &decodeStep{rows: rows, cols: cols}
	s.table = upload(t, b, abi.F32, rows*cols, f32bytes(randF32(r, rows*cols)))
	s.g = upload(t, b, abi.F32, cols, f32bytes(randF32(r, cols)))
	s.w = upload(t, b, abi.F32, rows*cols, f32bytes(randF32(r, rows*cols)))
	var err error
	if s.cache, err = b.Alloc(abi.F32, 8*rows); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *decodeStep) run(t *testing.T, b *Backend, id, pos int) (int, []byte) {
	t.Helper()
	ctx := context.Background()
	x, _ := b.Alloc(abi.F32, s.cols)
	h, _ := b.Alloc(abi.F32, s.cols)
	y, _ := b.Alloc(abi.F32, s.rows)
	defer func() { b.Free(x); b.Free(h); b.Free(y) }()
	if err := b.Embed(ctx, s.rows, s.cols, s.table, []int32{int32(id)}, x); err != nil {
		t.Fatal(err)
	}
	if err := b.RMSNorm(ctx, 1, s.cols, 1e-5, x, s.g, h); err != nil {
		t.Fatal(err)
	}
	if err := b.MatMul(ctx, 1, s.rows, s.cols, h, s.w, y); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyRows(ctx, pos, s.rows, y, s.cache); err != nil {
		t.Fatal(err)
	}
	tok, err := b.Argmax(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	return tok, download(t, b, y)
}

// TestGraphs: with Config.Graphs a decode step's work is captured and
// launched as one graph, instantiated once and updated with each later
// step's parameters, with the results of the same backend without graphs
// bit for bit (the fake runs the same kernels either way); nothing reaches
// the default stream while a capture is under way; and Close leaves no
// stream, graph or executable graph behind.
func TestGraphs(t *testing.T) {
	const steps = 4
	want := map[int][]byte{}
	wantTok := map[int]int{}
	{
		b := newFake(t)
		s := newDecodeStep(t, b, rand.New(rand.NewPCG(1, 2)))
		for i := range steps {
			wantTok[i], want[i] = s.run(t, b, 3*i+1, i)
		}
		b.Close()
	}
	b := newFakeGraphs(t)
	s := newDecodeStep(t, b, rand.New(rand.NewPCG(1, 2)))
	var before GraphStats
	for i := range steps {
		if i == 1 { // step 0 allocated the steps' buffers: count from here
			fakeLib.reset()
			before = b.GraphStats()
		}
		tok, got := s.run(t, b, 3*i+1, i)
		if tok != wantTok[i] || !bytes.Equal(got, want[i]) {
			t.Fatalf("step %d: token %d, want %d; output equal %v", i, tok, wantTok[i], bytes.Equal(got, want[i]))
		}
	}
	cs := fakeCalls(t)
	direct, captured := 0, 0
	for _, c := range cs {
		if c.rc != 0 {
			t.Errorf("%s %s -> %d", c.name, c.args, c.rc)
		}
		if c.name == "cuLaunchKernel" {
			if strings.Contains(c.args, "captured=1") {
				captured++
			} else {
				direct++
			}
		}
	}
	// Each step: its buffers' memsets (from the pool), the id's staged
	// copy, embed, rmsnorm, gemv, the cache copy, argmax's memsets and
	// argmax, then the token's read, which launches them; the download
	// after it has nothing to launch.
	st := b.GraphStats()
	counted := steps - 1
	launched, inst, upd := st.Launched-before.Launched, st.Instantiated-before.Instantiated, st.Updated-before.Updated
	t.Logf("%d steps after the first: %d graphs launched, %d instantiated, %d updated; %d kernels captured, %d launched directly",
		counted, launched, inst, upd, captured, direct)
	if direct != 0 {
		t.Errorf("%d kernels launched directly, want all captured", direct)
	}
	if n := len(callsNamed(cs, "cuGraphLaunch")); n != counted || launched != int64(counted) {
		t.Errorf("%d graph launches (%d counted), want one a step (%d)", n, launched, counted)
	}
	if inst != 1 || upd != int64(counted-1) || st.Off != nil {
		t.Errorf("%d instantiated, %d updated (%v), want 1 and %d", inst, upd, st.Off, counted-1)
	}
	if n := len(callsNamed(cs, "cuMemcpyDtoD_v2")) + len(callsNamed(cs, "cuMemsetD8_v2")); n != 0 {
		t.Errorf("%d synchronous copies or memsets, want them captured", n)
	}
	b.Close()
	for _, what := range []string{"streams", "graphs", "execs"} {
		if n := fakeLib.live(what); n != 0 {
			t.Errorf("after Close: %d %s live", n, what)
		}
	}
}

// TestGraphsOffOnFailure: a graph call that fails turns graphs off for the
// Backend, and the step it held still runs, launched directly, with the
// same results.
func TestGraphsOffOnFailure(t *testing.T) {
	for _, call := range []string{"cuStreamBeginCapture_v2", "cuGraphInstantiateWithFlags", "cuGraphLaunch"} {
		t.Run(call, func(t *testing.T) {
			ref := newFake(t)
			rs := newDecodeStep(t, ref, rand.New(rand.NewPCG(3, 4)))
			wantTok, want := rs.run(t, ref, 5, 0)
			b := newFakeGraphs(t)
			s := newDecodeStep(t, b, rand.New(rand.NewPCG(3, 4)))
			fakeLib.fail(call, 999) // not sticky: the device is fine
			tok, got := s.run(t, b, 5, 0)
			if tok != wantTok || !bytes.Equal(got, want) {
				t.Fatalf("token %d, want %d; output equal %v", tok, wantTok, bytes.Equal(got, want))
			}
			st := b.GraphStats()
			if st.Off == nil || !strings.Contains(st.Off.Error(), call) {
				t.Errorf("graphs %+v, want off naming %s", st, call)
			}
			fakeLib.reset()
			if tok, _ := s.run(t, b, 5, 1); tok != wantTok {
				t.Errorf("the next step: token %d, want %d", tok, wantTok)
			}
			if n := len(callsNamed(fakeCalls(t), "cuStreamBeginCapture_v2")); n != 0 {
				t.Errorf("%d captures after graphs went off", n)
			}
		})
	}
}

// TestGraphsShapes: steps of two shapes (a decode step, and a GEMV with a
// residual) keep an instantiated graph each, updated from then on rather
// than instantiated again.
func TestGraphsShapes(t *testing.T) {
	b := newFakeGraphs(t)
	r := rand.New(rand.NewPCG(5, 6))
	s := newDecodeStep(t, b, r)
	ctx := context.Background()
	res := upload(t, b, abi.F32, s.rows, f32bytes(randF32(r, s.rows)))
	var before GraphStats
	for i := range 4 {
		if i == 2 { // rounds 0 and 1 allocated the buffers and met both shapes
			before = b.GraphStats()
		}
		s.run(t, b, i, i)
		h := upload(t, b, abi.F32, s.cols, f32bytes(randF32(r, s.cols)))
		y, _ := b.Alloc(abi.F32, s.rows)
		if err := b.MatMulAdd(ctx, 1, s.rows, s.cols, h, s.w, res, y); err != nil {
			t.Fatal(err)
		}
		out := download(t, b, y)
		if v := binary.LittleEndian.Uint32(out); v == 0xCDCDCDCD {
			t.Fatalf("step %d: the second shape's output was never written", i)
		}
		b.Free(h)
		b.Free(y)
	}
	st := b.GraphStats()
	if inst, upd := st.Instantiated-before.Instantiated, st.Updated-before.Updated; inst != 0 || upd != 4 || st.Off != nil {
		t.Errorf("2 rounds of 2 shapes seen before: %d instantiated, %d updated (%v), want 0 and 4", inst, upd, st.Off)
	}
}

// TestGraphsLongChain: a chain of more than maxSpan operations without a
// read is launched in graphs of maxSpan, each waited for, with the same
// results.
func TestGraphsLongChain(t *testing.T) {
	ref := newFake(t)
	rs := newDecodeStep(t, ref, rand.New(rand.NewPCG(7, 8)))
	wantTok, want := rs.run(t, ref, 2, 0)
	defer func(n int) { maxSpan = n }(maxSpan)
	maxSpan = 4
	b := newFakeGraphs(t)
	s := newDecodeStep(t, b, rand.New(rand.NewPCG(7, 8)))
	s.run(t, b, 2, 0) // allocates the step's buffers
	fakeLib.reset()
	tok, got := s.run(t, b, 2, 0)
	if tok != wantTok || !bytes.Equal(got, want) {
		t.Fatalf("token %d, want %d; output equal %v", tok, wantTok, bytes.Equal(got, want))
	}
	cs := fakeCalls(t)
	launches, syncs := len(callsNamed(cs, "cuGraphLaunch")), len(callsNamed(cs, "cuCtxSynchronize"))
	// 11 operations: graphs of 4, 4 and 3, the first two each waited for.
	if launches != 3 || syncs != 2 {
		t.Errorf("%d graphs launched and %d waits, want 3 and 2", launches, syncs)
	}
}

// TestGraphsLongChainOfWrites: staged writes past maxSpan operations each
// reach their buffer. The write that fills a capture must not be staged
// before the capture's synchronisation empties the staging buffer, or the
// next writes, staged from its start again, overwrite its bytes before its
// captured copy runs.
func TestGraphsLongChainOfWrites(t *testing.T) {
	defer func(n int) { maxSpan = n }(maxSpan)
	maxSpan = 3
	b := newFakeGraphs(t)
	const n, m = 64, 12
	xs := make([]tensor.Buffer, m)
	for i := range xs {
		x, err := b.Alloc(abi.I8, n)
		if err != nil {
			t.Fatal(err)
		}
		xs[i] = x
	}
	if err := b.Read(xs[0], make([]byte, n)); err != nil { // the allocations' memsets run
		t.Fatal(err)
	}
	for i, x := range xs {
		if err := b.Write(x, bytes.Repeat([]byte{byte(i + 1)}, n)); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range xs {
		got := make([]byte, n)
		if err := b.Read(x, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i + 1)}, n)) {
			t.Errorf("buffer %d holds %d, want %d", i, got[0], i+1)
		}
	}
}
