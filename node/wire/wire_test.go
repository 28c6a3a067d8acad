package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/fxamacker/cbor/v2"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/proofs/gemmproof"
)

func testKey(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return k, id
}

func announce(client peer.ID) *JobAnnounce {
	return &JobAnnounce{V: Version, Job: NewJobID(), Client: []byte(client), Terms: Terms{Module: blob.Sum([]byte("m")),
		ModuleSize: 1, Input: blob.Sum(nil), Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 1 << 20},
		Replicas: 2,
		Deadline: Millis(time.Now().Add(time.Minute)), Time: Millis(time.Now())}
}

func TestRoundTripDeterministic(t *testing.T) {
	_, id := testKey(t)
	a := announce(id)
	a.Proofs = true
	b1, err := Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back JobAnnounce
	if err := Unmarshal(b1, MaxGossipMessage, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := Marshal(&back)
	if !bytes.Equal(b1, b2) {
		t.Fatal("re-encoding changed the bytes")
	}
	if back.Job != a.Job || back.Module != a.Module || peer.ID(back.Client) != id || !back.Proofs {
		t.Fatalf("decoded %+v", back)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	_, id := testKey(t)
	good, _ := Marshal(announce(id))
	v2 := announce(id)
	v2.V = 2
	newer, _ := Marshal(v2)
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"too large", make([]byte, MaxGossipMessage+1), ErrTooLarge},
		{"garbage", []byte("not cbor"), ErrMalformed},
		{"trailing bytes", append(append([]byte{}, good...), 0), ErrMalformed},
		{"wrong type", []byte{0x63, 'a', 'b', 'c'}, ErrMalformed},
		{"duplicate key", []byte{0xa2, 0x01, 0x01, 0x01, 0x01}, ErrMalformed},
		{"indefinite length", []byte{0xbf, 0x01, 0x01, 0xff}, ErrMalformed},
		{"newer version", newer, ErrVersion},
		{"no version", []byte{0xa0}, ErrVersion},
	}
	for _, tt := range tests {
		var m JobAnnounce
		if err := Unmarshal(tt.b, MaxGossipMessage, &m); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	bid := &Bid{V: Version, Job: NewJobID(), Accept: true, Price: 7}
	for range 3 {
		if err := WriteFrame(&buf, bid); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&buf)
	for range 3 {
		var got Bid
		if err := ReadFrame(r, MaxControlFrame, &got); err != nil || got != *bid {
			t.Fatalf("frame %+v, %v", got, err)
		}
	}
	var m Bid
	if err := ReadFrame(r, MaxControlFrame, &m); err.Error() != "EOF" {
		t.Fatalf("at end: %v", err)
	}
	// A length prefix over the limit is refused before anything is read.
	huge := bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}))
	if err := ReadFrame(huge, MaxControlFrame, &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge frame: %v", err)
	}
	short := bufio.NewReader(bytes.NewReader([]byte{0x10, 0xa0}))
	if err := ReadFrame(short, MaxControlFrame, &m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated frame: %v", err)
	}
}

func TestValidate(t *testing.T) {
	_, id := testKey(t)
	if err := announce(id).Validate(); err != nil {
		t.Fatalf("good announce: %v", err)
	}
	sharded := announce(id)
	sharded.Shard, sharded.Shards, sharded.Args = 9, 10, []string{"--x", ""}
	sharded.Data = []DataBlob{{"weights.bin", blob.Sum([]byte("w")), 1}, {"vocab.txt", blob.Sum(nil), 7}}
	if err := sharded.Validate(); err != nil {
		t.Fatalf("good sharded announce: %v", err)
	}
	for name, mutate := range map[string]func(*JobAnnounce){
		"no replicas":            func(a *JobAnnounce) { a.Replicas = 0 },
		"many replicas":          func(a *JobAnnounce) { a.Replicas = MaxReplicas + 1 },
		"no timeout":             func(a *JobAnnounce) { a.TimeoutMS = 0 },
		"no module":              func(a *JobAnnounce) { a.Module = blob.Digest{} },
		"huge input":             func(a *JobAnnounce) { a.InputSize = MaxInputBytes + 1 },
		"bad mode":               func(a *JobAnnounce) { a.Mode = 9 },
		"bad client":             func(a *JobAnnounce) { a.Client = []byte("x") },
		"no memory":              func(a *JobAnnounce) { a.Memory = 0 },
		"memory under a page":    func(a *JobAnnounce) { a.Memory = 64<<10 - 1 },
		"bad settle":             func(a *JobAnnounce) { a.Settle = 2 },
		"free fair":              func(a *JobAnnounce) { a.Settle, a.Price = SettleFair, 0 },
		"numeric fair":           func(a *JobAnnounce) { a.Settle, a.Price, a.Mode, a.Format = SettleFair, 1, ModeTolerance, 1 },
		"shard past the count":   func(a *JobAnnounce) { a.Shard, a.Shards = 3, 3 },
		"shard of none":          func(a *JobAnnounce) { a.Shard = 1 },
		"too many shards":        func(a *JobAnnounce) { a.Shards = MaxShards + 1 },
		"too many args":          func(a *JobAnnounce) { a.Args = make([]string, MaxArgs+1) },
		"long args":              func(a *JobAnnounce) { a.Args = []string{strings.Repeat("x", MaxArgBytes)} },
		"NUL in an arg":          func(a *JobAnnounce) { a.Args = []string{"a\x00b"} },
		"data name with a slash": func(a *JobAnnounce) { a.Data = []DataBlob{{Name: "a/b", Digest: blob.Sum(nil), Size: 1}} },
		"data name dot-dot":      func(a *JobAnnounce) { a.Data = []DataBlob{{Name: "..", Digest: blob.Sum(nil), Size: 1}} },
		"empty data":             func(a *JobAnnounce) { a.Data = []DataBlob{{Name: "w", Digest: blob.Sum(nil)}} },
		"data twice":             func(a *JobAnnounce) { a.Data = []DataBlob{{"w", blob.Sum(nil), 1}, {"w", blob.Sum(nil), 1}} },
		"too much data":          func(a *JobAnnounce) { a.Data = []DataBlob{{"a", blob.Sum(nil), MaxDataBytes}, {"b", blob.Sum(nil), 1}} },
	} {
		a := announce(id)
		mutate(a)
		if err := a.Validate(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestResultProofsOnTheWire: a result's proofs survive a frame exactly, and
// what its provider signed is the same bytes on the far side.
func TestResultProofsOnTheWire(t *testing.T) {
	_, id := testKey(t)
	r := &Result{V: Version, Job: NewJobID(), Output: blob.Sum(nil)}
	var proofs []gemmproof.Proof
	for i := range 16 {
		proofs = append(proofs, gemmproof.Proof{Index: i, Template: 32, M: 20, N: 12, K: 16, Flags: 2,
			DigestA: [32]byte{byte(i)}, DigestB: [32]byte{1, byte(i)}, DigestC: [32]byte{2, byte(i)}, Groth16: bytes.Repeat([]byte{byte(i)}, 456)})
	}
	r.Proofs = rawProofs(t, proofs...)
	r.Provider, r.Sig = []byte(id), []byte("signature")
	signed, err := r.SignedBytes()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, &Update{V: Version, Kind: UpdateResult, Result: r}); err != nil {
		t.Fatal(err)
	}
	var u Update
	if err := ReadFrame(bufio.NewReader(&buf), MaxDataFrame, &u); err != nil {
		t.Fatal(err)
	}
	if b, err := u.Result.SignedBytes(); err != nil || !bytes.Equal(b, signed) || !bytes.Equal(u.Result.Sig, r.Sig) {
		t.Fatalf("the signed bytes changed on the wire (%v)", err)
	}
	if len(u.Result.Proofs) != 16 {
		t.Fatalf("%d proofs came", len(u.Result.Proofs))
	}
	for _, i := range []int{5, 15} {
		var p gemmproof.Proof
		if err := UnmarshalProof(u.Result.Proofs[i], &p); err != nil || p.DigestB != proofs[i].DigestB || !bytes.Equal(p.Groth16, proofs[i].Groth16) || p.Index != i {
			t.Fatalf("proof %d changed on the wire: %+v, %v", i, p, err)
		}
	}
}

// rawProofs encodes proofs as a result carries them.
func rawProofs(t testing.TB, proofs ...gemmproof.Proof) []cbor.RawMessage {
	t.Helper()
	var out []cbor.RawMessage
	for _, p := range proofs {
		b, err := MarshalProof(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// frameOf returns the frame of a Result whose inline output is n bytes, and
// the Result.
func frameOf(t testing.TB, n int) ([]byte, *Result) {
	t.Helper()
	r := &Result{V: Version, Job: NewJobID(), OutputData: bytes.Repeat([]byte{0xa5}, n), OutputSize: int64(n)}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), r
}

// TestFrameSizes reads frames around the growth steps of the body buffer,
// whole and one byte at a time, and the largest data frame.
func TestFrameSizes(t *testing.T) {
	for _, n := range []int{0, 1, frameChunk - 80, frameChunk, frameChunk + 1, 3*frameChunk + 7, 200_000, MaxInline} {
		b, want := frameOf(t, n)
		for _, tc := range []struct {
			name string
			r    io.Reader
		}{
			{"whole", bytes.NewReader(b)},
			{"byte by byte", iotest.OneByteReader(bytes.NewReader(b))},
		} {
			var got Result
			if err := ReadFrame(bufio.NewReader(tc.r), MaxDataFrame, &got); err != nil {
				t.Fatalf("%d bytes %s: %v", n, tc.name, err)
			}
			if got.Job != want.Job || !bytes.Equal(got.OutputData, want.OutputData) {
				t.Fatalf("%d bytes %s: read back another result", n, tc.name)
			}
		}
	}
}

// errStream stands for a stream's own failure (a reset or a deadline).
var errStream = errors.New("stream reset")

// TestFrameTruncated cuts a frame at every interesting point: a clean end
// is ErrMalformed, a failing stream is its own error, wrapped, and not
// ErrMalformed.
func TestFrameTruncated(t *testing.T) {
	b, _ := frameOf(t, 3*frameChunk)
	hdr := len(b) - 3*frameChunk - 16 // well inside the body's CBOR header
	for _, cut := range []int{1, hdr, len(b) - 3*frameChunk, frameChunk, frameChunk + 3, 2 * frameChunk, len(b) - 1} {
		var m Result
		err := ReadFrame(bufio.NewReader(bytes.NewReader(b[:cut])), MaxDataFrame, &m)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("cut at %d of %d: %v, want ErrMalformed", cut, len(b), err)
		}
		r := io.MultiReader(bytes.NewReader(b[:cut]), iotest.ErrReader(errStream))
		err = ReadFrame(bufio.NewReader(r), MaxDataFrame, &m)
		if !errors.Is(err, errStream) || errors.Is(err, ErrMalformed) {
			t.Errorf("stream failing at %d of %d: %v, want errStream only", cut, len(b), err)
		}
	}
}

// TestFrameDeclaredNotSent: a peer that declares a frame of MaxDataFrame
// bytes and sends one costs a few KiB, not the declared size.
func TestFrameDeclaredNotSent(t *testing.T) {
	hdr := binary.AppendUvarint(nil, MaxDataFrame)
	msg := append(hdr, 0xa0)
	const runs = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		r := bufio.NewReader(io.MultiReader(bytes.NewReader(msg), iotest.ErrReader(errStream)))
		var m Result
		if err := ReadFrame(r, MaxDataFrame, &m); !errors.Is(err, errStream) {
			t.Fatalf("ReadFrame: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("declared %d bytes, sent 1: %d bytes allocated per frame", MaxDataFrame, per)
	// The bufio.Reader (4 KiB), the first chunk (4 KiB) and small change.
	if per > 16<<10 {
		t.Fatalf("%d bytes allocated for a frame of 1 byte sent, want at most 16 KiB", per)
	}
}

// BenchmarkReadFrame reads a frame of a 1 MiB inline output: the cost of
// growing the buffer as bytes arrive, against the frame's size.
func BenchmarkReadFrame(b *testing.B) {
	frame, _ := frameOf(b, MaxInline)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for range b.N {
		var m Result
		if err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), MaxDataFrame, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStake: a fixed collateral is every provider's stake; the default's
// (CollateralTimes) is that many times the price paid, within the most
// asked and at least half of it; Validate refuses times without a most.
func TestStake(t *testing.T) {
	for _, tc := range []struct {
		collateral  uint64
		times       uint16
		price, want uint64
	}{
		{250_000, 0, 1, 250_000},               // fixed
		{500_000, 50, 5_000, 250_000},          // asks half the offer: half the stake
		{500_000, 50, 10_000, 500_000},         // the offer itself
		{500_000, 50, 20_000, 500_000},         // never over the most
		{500_000, 50, 1, 250_000},              // never under half of it
		{500_000, 50, 0, 250_000},              // a free provider too
		{500_000, 50, math.MaxUint64, 500_000}, // no overflow
		{0, 0, 5_000, 0},
	} {
		a := &JobAnnounce{Collateral: tc.collateral, CollateralTimes: tc.times}
		if got := a.Stake(tc.price); got != tc.want {
			t.Errorf("collateral %d, %d times, price %d: stake %d, want %d", tc.collateral, tc.times, tc.price, got, tc.want)
		}
	}
	_, client := testKey(t)
	a := announce(client)
	a.CollateralTimes = 50
	if err := a.Validate(); !errors.Is(err, ErrMalformed) {
		t.Errorf("times without a most: %v", err)
	}
	a.Collateral = 1000
	if err := a.Validate(); err != nil {
		t.Errorf("times with a most: %v", err)
	}
}

// TestResultStderr: a result's Stderr travels with it but is not signed,
// and a result without one encodes as results did before it, so that
// nodes on either side of the change verify each other's signatures.
func TestResultStderr(t *testing.T) {
	r := &Result{V: Version, Job: JobID{1}, Output: blob.Sum([]byte("x")), OutputSize: 1, Outcome: OutcomeExited, ExitCode: 2}
	plain, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	signed, _ := r.SignedBytes()
	r.Stderr = []byte("panic: boom\n")
	withStderr, _ := r.SignedBytes()
	if !bytes.Equal(signed, withStderr) {
		t.Error("Stderr changed the signed bytes")
	}
	b, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := Unmarshal(b, MaxControlFrame, &back); err != nil || string(back.Stderr) != "panic: boom\n" {
		t.Fatalf("round trip: %q, %v", back.Stderr, err)
	}
	// Without Stderr, the encoding has no field for it: that of the
	// results of nodes before it.
	var m map[int]any
	if err := UnmarshalProof(plain, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[19]; ok {
		t.Error("a result without stderr encodes its field")
	}
}

// TestAssignTerms: an assign's terms beyond its announce and replica give,
// with them, its TermsDigest; another announce under the same job id, or
// other terms, give another.
func TestAssignTerms(t *testing.T) {
	ann := *announce(peer.ID("client"))
	a := &Assign{V: Version, Announce: ann, Replica: 2, Input: []byte("inline"), PaymentHash: bytes.Repeat([]byte{7}, 32), Price: 5, Bond: "lnbc1", BondHash: bytes.Repeat([]byte{9}, 32)}
	if got := a.Terms().Digest(ann, 2); got != a.TermsDigest() {
		t.Fatalf("Digest %s, TermsDigest %s", got.Short(), a.TermsDigest().Short())
	}
	other := ann
	other.InputSize++
	if a.Terms().Digest(other, 2) == a.TermsDigest() || a.Terms().Digest(ann, 1) == a.TermsDigest() || (AssignTerms{}).Digest(ann, 2) == a.TermsDigest() {
		t.Error("another announce, replica or terms give the same digest")
	}
	if !(AssignTerms{}).IsZero() || a.Terms().IsZero() {
		t.Error("IsZero")
	}
}
