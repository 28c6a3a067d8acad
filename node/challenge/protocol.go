package challenge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// Wire format, all integers big-endian:
//
//	client → provider: version (1 byte) ‖ nonce (32) ‖ N (uint32)
//	provider → client: 0 ‖ root (32), or 1 ‖ busy (1) ‖ reason length (1) ‖ reason
//	client → provider: k (uint16) ‖ k row indices (uint32 each)
//	provider → client: for each index, the row (4·N bytes) ‖ its path (32·Depth(N))
const (
	version   = 1
	statusOK  = 0
	statusNo  = 1
	maxReason = 255
)

// Timings are how long the provider's phases took, for logs and
// calibrating the deadline.
type Timings struct {
	Generate, Upload, Gemm, Download, Hash time.Duration
}

// Compute derives A and B from seed (Seed), computes C = A·B on b and
// returns the Merkle tree of C's rows and C itself (little-endian float32
// bytes).
func Compute(ctx context.Context, b tensor.Backend, seed [32]byte, n int) (*Tree, []byte, Timings, error) {
	var tm Timings
	t0 := time.Now()
	var ah, bh []byte
	var wg sync.WaitGroup
	wg.Go(func() { ah = Matrix(seed, MatrixA, n) })
	bh = Matrix(seed, MatrixB, n)
	wg.Wait()
	tm.Generate = time.Since(t0)

	bufs := make([]tensor.Buffer, 0, 3)
	defer func() {
		for _, x := range bufs {
			b.Free(x)
		}
	}()
	for range 3 {
		x, err := b.Alloc(abi.F32, n*n)
		if err != nil {
			return nil, nil, tm, fmt.Errorf("challenge: alloc: %w", err)
		}
		bufs = append(bufs, x)
	}
	t0 = time.Now()
	if err := b.Write(bufs[0], ah); err != nil {
		return nil, nil, tm, fmt.Errorf("challenge: write A: %w", err)
	}
	if err := b.Write(bufs[1], bh); err != nil {
		return nil, nil, tm, fmt.Errorf("challenge: write B: %w", err)
	}
	tm.Upload = time.Since(t0)
	t0 = time.Now()
	if err := b.Gemm(ctx, tensor.GemmParams{M: n, N: n, K: n}, bufs[0], bufs[1], bufs[2]); err != nil {
		return nil, nil, tm, fmt.Errorf("challenge: gemm: %w", err)
	}
	tm.Gemm = time.Since(t0)
	t0 = time.Now()
	c := ah // A's bytes are no longer needed: reuse them for C
	if err := b.Read(bufs[2], c); err != nil {
		return nil, nil, tm, fmt.Errorf("challenge: read C: %w", err)
	}
	tm.Download = time.Since(t0)
	t0 = time.Now()
	t := NewTree(c, n)
	tm.Hash = time.Since(t0)
	return t, c, tm, nil
}

// Config configures a provider's Server; zero fields take the defaults.
type Config struct {
	// MaxN is the largest challenge accepted; default MaxN.
	MaxN int
	// Every is how often one client may challenge; default 10 s.
	Every time.Duration
	// Group names a client's network (peers.Book.Group): one exchange at
	// a time per network, so that fresh identities of one network hold no
	// more than one place; nil: each identity alone.
	Group func(peer.ID) string
	// Timeout bounds one exchange; default DefaultTimeout.
	Timeout time.Duration
	// RowsWithin is how long a client has, once the root is sent, to ask
	// for its rows and read them; default RowsWithin.
	RowsWithin time.Duration
	// Logger receives a line per challenge; default slog.Default().
	Logger *slog.Logger

	// compute replaces Compute, for tests of cheating providers.
	compute func(ctx context.Context, b tensor.Backend, seed [32]byte, n int) (*Tree, []byte, Timings, error)
}

// Limits of a Server.
const (
	// RowsWithin is how long a provider gives a client, once it sent the
	// root, to ask for its rows and read them (plus a second a MiB of
	// rows): the client asks at once, so a round trip or two. A client
	// that never asks, or never reads, holds nothing longer.
	RowsWithin = 5 * time.Second
	// maxOpen bounds the exchanges under way at once, one per client
	// network: each keeps the Merkle tree of C's row hashes (64·N bytes),
	// not C, until its rows are asked.
	maxOpen = 64
	// maxRowsLarge is the most rows a provider makes again for N above
	// largeN: they cost it k·N² multiply-adds on one core (4 rows at
	// 16384 about a second), and clients ask 4 by default.
	maxRowsLarge, largeN = 4, 4096
)

// Server answers challenges on a host with a backend. It computes one
// challenge at a time (each holds 3·N² float32 of device memory), keeps
// only the Merkle tree of C's rows until they are asked and read
// (RowsWithin), and makes the rows asked again, exactly, on the CPU: a
// client that never asks holds no C (two networks' stalls at MaxN had
// held the 2 GiB kept for C, and every other client was refused busy: a
// red team's attack). One exchange per client network, maxOpen in all,
// one challenge per client every Config.Every; others are refused as
// busy. NOTE: safe for concurrent use.
type Server struct {
	h   host.Host
	b   tensor.Backend
	cfg Config

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // running handlers
	sem    chan struct{}  // a token while a challenge computes
	// rows is a token while a large exchange's rows are made again (N
	// above largeN; every exchange's on one core), one at a time, so that
	// strangers asking rows cannot take the CPU an honest root needs (a
	// red team's four stalls made an honest root four times slower, late).
	rows chan struct{}

	mu   sync.Mutex
	last map[peer.ID]time.Time // when each client last challenged; guarded by mu
	open map[string]bool       // networks with an exchange under way; guarded by mu
}

// Serve registers the challenge handler on h, computing on b. The caller
// calls Close, which removes it.
func Serve(h host.Host, b tensor.Backend, cfg Config) *Server {
	if cfg.MaxN == 0 {
		cfg.MaxN = MaxN
	}
	if cfg.Every == 0 {
		cfg.Every = 10 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RowsWithin == 0 {
		cfg.RowsWithin = RowsWithin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.compute == nil {
		cfg.compute = Compute
	}
	if cfg.Group == nil {
		cfg.Group = func(p peer.ID) string { return p.String() }
	}
	s := &Server{h: h, b: b, cfg: cfg, sem: make(chan struct{}, 1), rows: make(chan struct{}, 1), last: map[peer.ID]time.Time{}, open: map[string]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	h.SetStreamHandler(protocol.ID(ID), s.handle)
	return s
}

// Close removes the handler, ends challenges under way and waits for them.
func (s *Server) Close() {
	s.h.RemoveStreamHandler(protocol.ID(ID))
	s.cancel()
	s.wg.Wait()
}

// admit reports why a challenge of size n from client p of network
// group is refused, or "" when it may run: then the caller computes it in
// the compute slot (sem) and calls done(group, n) when it ends. A refusal
// costs the client nothing of its rate. The rate is the client's own: a
// network's rate would let a stranger in it (every relayed client shares
// one) spend it for the honest.
func (s *Server) admit(p peer.ID, group string, n int) (reason string, busy bool) {
	if n < MinN || n > s.cfg.MaxN {
		return fmt.Sprintf("size %d outside [%d, %d]", n, MinN, s.cfg.MaxN), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if t, ok := s.last[p]; ok && now.Sub(t) < s.cfg.Every {
		return "rate limited", true
	}
	if s.open[group] || len(s.open) >= maxOpen {
		return "busy", true
	}
	select {
	case s.sem <- struct{}{}:
	default:
		return "busy", true
	}
	for id, t := range s.last { // keep the map small
		if now.Sub(t) >= s.cfg.Every {
			delete(s.last, id)
		}
	}
	s.last[p], s.open[group] = now, true
	return "", false
}

// done ends an exchange admit let run.
func (s *Server) done(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, group)
}

func (s *Server) handle(st network.Stream) {
	s.wg.Add(1)
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	_ = st.SetDeadline(time.Now().Add(s.cfg.Timeout))
	from := st.Conn().RemotePeer()
	log := s.cfg.Logger.With("peer", from)
	if err := s.serve(ctx, st, from, log); err != nil {
		log.Debug("challenge not answered", "err", err)
		st.Reset()
		return
	}
	st.Close()
}

func (s *Server) serve(ctx context.Context, st network.Stream, from peer.ID, log *slog.Logger) error {
	var req [1 + 32 + 4]byte
	if _, err := io.ReadFull(st, req[:]); err != nil {
		return fmt.Errorf("read challenge: %w", err)
	}
	if req[0] != version {
		return refuse(st, fmt.Sprintf("version %d unknown", req[0]), false)
	}
	var nonce [32]byte
	copy(nonce[:], req[1:33])
	n := int(binary.BigEndian.Uint32(req[33:]))
	group := s.cfg.Group(from)
	if reason, busy := s.admit(from, group, n); reason != "" {
		return refuse(st, reason, busy)
	}
	defer s.done(group)
	start := time.Now()
	seed := Seed(nonce, s.h.ID(), from)
	tree, _, tm, err := s.cfg.compute(ctx, s.b, seed, n)
	<-s.sem // the device is free, and C is let go: the tree is what is kept
	if err != nil {
		refuse(st, "compute failed", true)
		return err
	}
	root := tree.Root()
	if _, err := st.Write(append([]byte{statusOK}, root[:]...)); err != nil {
		return fmt.Errorf("write root: %w", err)
	}
	// Reads and writes alike, and the rows' making: a client that asks for
	// rows and never reads them had held C and its network's place to the
	// 30 s timeout.
	rowsBy := time.Now().Add(s.cfg.RowsWithin + time.Duration(MaxRows*4*n/(1<<20))*time.Second)
	_ = st.SetDeadline(rowsBy)
	took := time.Since(start)
	attrs := []any{"n", n, "backend", s.b.Name(), "took", took,
		"generate", tm.Generate, "upload", tm.Upload, "gemm", tm.Gemm, "download", tm.Download, "hash", tm.Hash}
	if took >= DefaultDeadline {
		// The client holds the root to its deadline, round trip included,
		// and takes a late one for a fake GPU: the operator must hear it
		// here, or an honest but slow GPU is banned with nothing said.
		log.Warn(fmt.Sprintf("GPU challenge answered later than clients' default deadline (%v): they ban a provider whose root is late", DefaultDeadline), attrs...)
	} else {
		log.Info("challenge answered", attrs...)
	}

	var kb [2]byte
	if _, err := io.ReadFull(st, kb[:]); err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	k := int(binary.BigEndian.Uint16(kb[:]))
	if most := MaxRows; k > most || n > largeN && k > maxRowsLarge {
		if n > largeN {
			most = maxRowsLarge
		}
		return fmt.Errorf("%d rows asked of N=%d, over %d", k, n, most)
	}
	idx := make([]byte, 4*k)
	if _, err := io.ReadFull(st, idx); err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	asked := make([]int, k)
	for j := range asked {
		if asked[j] = int(binary.BigEndian.Uint32(idx[4*j:])); asked[j] >= n {
			return fmt.Errorf("row %d out of range", asked[j])
		}
	}
	// Made again, exactly (as the client checks them): what binds them to
	// the device's work is their paths to the root it sent.
	rctx, cancel := context.WithDeadline(ctx, rowsBy)
	defer cancel()
	if n > largeN { // a small exchange's rows cost next to nothing
		select {
		case s.rows <- struct{}{}:
			defer func() { <-s.rows }()
		case <-rctx.Done():
			return fmt.Errorf("waiting to make rows: %w", rctx.Err())
		}
	}
	made, err := expectedRows(rctx, seed, n, asked, 1)
	if err != nil {
		return fmt.Errorf("making rows: %w", err)
	}
	for j, row := range made {
		for _, h := range tree.Path(asked[j]) {
			row = append(row, h[:]...)
		}
		if _, err := st.Write(row); err != nil {
			return fmt.Errorf("write row: %w", err)
		}
	}
	return nil
}

// refuse tells the client why not.
func refuse(st network.Stream, reason string, busy bool) error {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b := []byte{statusNo, 0, byte(len(reason))}
	if busy {
		b[1] = 1
	}
	_, err := st.Write(append(b, reason...))
	return err
}

// Report is what a challenge measured.
type Report struct {
	// N is the matrix size and Deadline the limit the root was held to.
	N        int
	Deadline time.Duration
	// Elapsed is from sending the challenge to receiving the root.
	Elapsed time.Duration
	// Rows are the rows opened (none when the root was late).
	Rows []int
	// Verify is how long the client took to recompute and check them.
	Verify time.Duration
}

// Run challenges p over h with params (zero fields are defaults). It
// returns an error wrapping ErrFailed when p failed (no root within the
// deadline, a wrong row or path), ErrRefused when p declined, and other
// errors for the transport; the report is filled as far as the exchange
// went. It waits for the root no longer than the deadline.
func Run(ctx context.Context, h host.Host, p peer.ID, params Params) (Report, error) {
	params = params.WithDefaults()
	n := params.N
	rep := Report{N: n, Deadline: params.Deadline}
	ctx, cancel := context.WithTimeout(ctx, params.Timeout)
	defer cancel()
	st, err := h.NewStream(ctx, p, protocol.ID(ID))
	if err != nil {
		return rep, fmt.Errorf("challenge: open stream: %w", err)
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	_ = st.SetDeadline(time.Now().Add(params.Timeout))

	var req [1 + 32 + 4]byte
	req[0] = version
	var nonce [32]byte
	rand.Read(nonce[:])
	copy(req[1:], nonce[:])
	binary.BigEndian.PutUint32(req[33:], uint32(n))
	start := time.Now()
	if _, err := st.Write(req[:]); err != nil {
		return rep, fmt.Errorf("challenge: send: %w", err)
	}
	// No root by the deadline is a late root: waiting longer for it,
	// up to Timeout, would let a slow provider hold the client up.
	_ = st.SetReadDeadline(start.Add(params.Deadline))
	late := func(err error) (Report, error) {
		rep.Elapsed = time.Since(start)
		st.Reset()
		return rep, fmt.Errorf("%w: %w: none after %v, deadline %v (%w)", ErrFailed, ErrLate, rep.Elapsed, params.Deadline, err)
	}
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		if time.Since(start) >= params.Deadline {
			return late(err)
		}
		return rep, fmt.Errorf("challenge: read answer: %w", err)
	}
	if status[0] != statusOK {
		_ = st.SetReadDeadline(time.Now().Add(params.Timeout))
		var hdr [2]byte
		if _, err := io.ReadFull(st, hdr[:]); err != nil {
			return rep, fmt.Errorf("challenge: read refusal: %w", err)
		}
		reason := make([]byte, hdr[1])
		if _, err := io.ReadFull(st, reason); err != nil {
			return rep, fmt.Errorf("challenge: read refusal: %w", err)
		}
		if hdr[0] == 1 {
			return rep, fmt.Errorf("%w: %w: %q", ErrRefused, ErrBusy, reason)
		}
		return rep, fmt.Errorf("%w: %q", ErrRefused, reason)
	}
	var root [32]byte
	if _, err := io.ReadFull(st, root[:]); err != nil {
		if time.Since(start) >= params.Deadline {
			return late(err)
		}
		return rep, fmt.Errorf("challenge: read root: %w", err)
	}
	rep.Elapsed = time.Since(start)
	_ = st.SetReadDeadline(time.Now().Add(params.Timeout))
	if rep.Elapsed > params.Deadline {
		st.Reset()
		return rep, fmt.Errorf("%w: %w: %v after the challenge, deadline %v", ErrFailed, ErrLate, rep.Elapsed, params.Deadline)
	}

	// Rows are drawn only now, so the root could not depend on them.
	rows := params.open
	if rows == nil {
		rows = mrand.Perm(n)[:params.Rows]
	}
	rep.Rows = rows
	ask := binary.BigEndian.AppendUint16(nil, uint16(len(rows)))
	for _, i := range rows {
		ask = binary.BigEndian.AppendUint32(ask, uint32(i))
	}
	if _, err := st.Write(ask); err != nil {
		return rep, fmt.Errorf("challenge: ask rows: %w", err)
	}
	// Recompute while the rows travel.
	t0 := time.Now()
	want := make(chan [][]byte, 1)
	go func() { want <- ExpectedRows(Seed(nonce, p, h.ID()), n, rows) }()
	depth := Depth(n)
	got := make([][]byte, len(rows))
	var bad error
	for j, i := range rows {
		got[j] = make([]byte, 4*n+32*depth)
		if _, err := io.ReadFull(st, got[j]); err != nil {
			<-want
			return rep, fmt.Errorf("challenge: read row %d: %w", i, err)
		}
		path := make([][32]byte, depth)
		for d := range path {
			copy(path[d][:], got[j][4*n+32*d:])
		}
		if got[j] = got[j][:4*n]; !VerifyPath(root, n, i, got[j], path) {
			bad = errors.Join(bad, fmt.Errorf("row %d: path does not lead to the root", i))
		}
	}
	for j, w := range <-want {
		if !bytes.Equal(w, got[j]) {
			bad = errors.Join(bad, fmt.Errorf("row %d: not the product", rows[j]))
		}
	}
	rep.Verify = time.Since(t0)
	if bad != nil {
		return rep, fmt.Errorf("%w: %w: %w", ErrFailed, ErrWrongRow, bad)
	}
	return rep, nil
}
