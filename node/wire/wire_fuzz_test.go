package wire

import (
	"bufio"
	"bytes"
	"errors"
	"github.com/fxamacker/cbor/v2"
	"io"
	"testing"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// messages makes a new value of every message type, in the order of the
// fuzz targets' kind byte.
var messages = []func() Versioned{
	func() Versioned { return new(JobAnnounce) },
	func() Versioned { return new(CapabilityAdvert) },
	func() Versioned { return new(Bid) },
	func() Versioned { return new(Assign) },
	func() Versioned { return new(Update) },
	func() Versioned { return new(Result) },
	func() Versioned { return new(BlobRequest) },
	func() Versioned { return new(BlobResponse) },
	func() Versioned { return new(BidOpen) },
	func() Versioned { return new(Release) },
	func() Versioned { return new(Ack) },
	func() Versioned { return new(AggregateRequest) },
	func() Versioned { return new(AggregateUpdate) },
}

// mustProof encodes p as a result carries it.
func mustProof(p gemmproof.Proof) cbor.RawMessage {
	b, err := MarshalProof(p)
	if err != nil {
		panic(err)
	}
	return b
}

// seedMessages are valid messages of every type, in messages' order.
func seedMessages() []Versioned {
	job := JobID{1, 2, 3}
	d := blob.Sum([]byte("m"))
	res := &Result{V: Version, Job: job, Replica: 1, Output: d, OutputSize: 5, OutputData: []byte("hello"), ExitCode: 3,
		Proofs: []cbor.RawMessage{mustProof(gemmproof.Proof{Template: 16, M: 2, N: 3, K: 4, DigestC: [32]byte{7}, Groth16: []byte{1, 2, 3}})}}
	ann := JobAnnounce{V: Version, Job: job, Client: []byte("client"),
		Terms:    Terms{Module: d, ModuleSize: 1, Input: d, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 1 << 20},
		Replicas: 2, Deadline: 1e12, Time: 1e12}
	return []Versioned{
		&JobAnnounce{V: Version, Job: job, Client: []byte("client"),
			Terms: Terms{Module: d, ModuleSize: 1, Input: d, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 1 << 20, Proofs: true,
				Args: []string{"-x", ""}, Shard: 2, Shards: 3, Data: []DataBlob{{Name: "w", Digest: d, Size: 9}}},
			Replicas: 2, Deadline: 1e12, Time: 1e12, Require: `has("cuda")`},
		&CapabilityAdvert{V: Version, Peer: []byte("peer"), Seq: 9, Cores: 4, MemoryBytes: 1 << 30,
			GPUs: []GPU{{Name: "RTX", MemoryBytes: 1 << 30, ComputeMajor: 8}}, Backends: []string{"reference", "cuda"}, Features: []string{FeatureFair}},
		&Bid{V: Version, Job: job, Accept: true, Price: 7},
		&Assign{V: Version, Announce: ann, Replica: 1, Input: []byte("in"), Sources: [][]byte{[]byte("a"), nil}, PaymentHash: []byte{1}},
		&Update{V: Version, Kind: UpdateResult, Result: res},
		res,
		&BlobRequest{V: Version, Digest: d, Offset: 5, Length: 10},
		&BlobResponse{V: Version, Status: BlobOK, Size: 10, Length: 5},
		&BidOpen{V: Version, Announce: &ann, Bid: &Bid{V: Version, Job: job}},
		&Release{V: Version, Job: job, Replica: 2, Preimage: []byte{9}},
		&Ack{V: Version},
		&AggregateRequest{V: Version, Announce: ann, Shards: []ShardRef{{Input: d, Size: 3}, {}}, Parallel: 2, MaxFeePercent: 1.5},
		&AggregateUpdate{V: Version, Shard: 1, Event: "result", Detail: "x", Result: &AggregateResult{Verified: true, Output: d, OutputSize: 7,
			Shards: []AggregateShard{{Announce: ann, Results: []Result{*res}}}, FeePercent: 1}},
	}
}

// roundTrip checks that m, just decoded, encodes to bytes that decode to a
// value encoding to the same bytes.
func roundTrip(t *testing.T, kind int, m Versioned) {
	t.Helper()
	b1, err := Marshal(m)
	if err != nil {
		t.Fatalf("%T decoded but does not encode: %v", m, err)
	}
	back := messages[kind]()
	if err := Unmarshal(b1, len(b1), back); err != nil {
		t.Fatalf("%T re-encoded does not decode: %v\n%x", m, err, b1)
	}
	b2, err := Marshal(back)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("%T changed on a round trip: %v\n%x\n%x", m, err, b1, b2)
	}
}

// FuzzUnmarshal decodes arbitrary bytes as each message type: a clean
// error, or a value that survives a round trip (and whose Validate, where
// it has one, does not panic).
func FuzzUnmarshal(f *testing.F) {
	for i, m := range seedMessages() {
		b, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)/2])
	}
	f.Add(uint8(0), []byte{0xa0})
	f.Add(uint8(4), []byte{0xa2, 0x01, 0x01, 0x04, 0xf6})
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		k := int(kind) % len(messages)
		m := messages[k]()
		err := Unmarshal(b, MaxDataFrame, m)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%T: unexpected error %v", m, err)
			}
			return
		}
		roundTrip(t, k, m)
		if v, ok := m.(interface{ Validate() error }); ok {
			v.Validate()
		}
		if r, ok := m.(*Result); ok {
			r.CheckInline() // must not panic on any bytes
			r.SignedBytes()
		}
	})
}

// FuzzReadFrame reads frames of arbitrary bytes: each is a clean error
// (io.EOF at a frame boundary, else ErrMalformed, ErrVersion or
// ErrTooLarge) or a message that, written again, reads back the same.
func FuzzReadFrame(f *testing.F) {
	var all bytes.Buffer
	for i, m := range seedMessages() {
		var buf bytes.Buffer
		if err := WriteFrame(&buf, m); err != nil {
			f.Fatal(err)
		}
		all.Write(buf.Bytes())
		f.Add(uint8(i), buf.Bytes())
	}
	f.Add(uint8(6), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(uint8(6), []byte{0x80})
	f.Add(uint8(7), []byte{0x10, 0xa0})
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		k := int(kind) % len(messages)
		r := bufio.NewReader(bytes.NewReader(b))
		for range 16 {
			m := messages[k]()
			err := ReadFrame(r, MaxControlFrame, m)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%T: unexpected error %v", m, err)
				}
				return
			}
			var buf bytes.Buffer
			if err := WriteFrame(&buf, m); err != nil {
				t.Fatal(err)
			}
			back := messages[k]()
			if err := ReadFrame(bufio.NewReader(&buf), buf.Len(), back); err != nil {
				t.Fatalf("%T written again does not read back: %v", m, err)
			}
			b1, _ := Marshal(m)
			b2, err := Marshal(back)
			if err != nil || !bytes.Equal(b1, b2) {
				t.Fatalf("%T changed through a frame: %x, then %x", m, b1, b2)
			}
		}
	})
}
