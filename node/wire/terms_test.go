package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/blob"
)

// fullAnnounce is an announce with every field set, Terms and the rest.
func fullAnnounce() *JobAnnounce {
	return &JobAnnounce{V: Version, Job: JobID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Client: []byte("client-peer-id"),
		Terms: Terms{Module: blob.Sum([]byte("module")), ModuleSize: 1234, Input: blob.Sum([]byte("input")), InputSize: 5678,
			Memory: 256 << 20, TimeoutMS: 60000, Fuel: 1e9, Mode: ModeTolerance, MaxOutput: 64 << 20,
			Rtol: 1e-3, Atol: 1e-5, Format: 2, Proofs: true, Args: []string{"--flag", "value"}, Shard: 3, Shards: 8,
			Data:      []DataBlob{{Name: "weights.bin", Digest: blob.Sum([]byte("w")), Size: 99}, {Name: "vocab", Digest: blob.Sum([]byte("v")), Size: 7}},
			Precision: "tf32"},
		Require: "gpus > 0", Replicas: 3, Price: 1500, Deadline: 1700000000000, Time: 1699999999000,
		SameBackend: true, Settle: SettleFair, Stream: true}
}

// goldenAnnounce is fullAnnounce's CBOR as JobAnnounce encoded it before
// its terms were an embedded Terms, every field its own.
const goldenAnnounce = "b81d010102500102030405060708090a0b0c0d0e0f10034e636c69656e742d706565722d6964045820120970d812836f" +
	"19888625587a4606a5ad23cef31c8684e601771552548fc6b9051904d2065820c96c6d5be8d08a12e7b5cdc1b207fa6b" +
	"2430974c86803d8891675e76fd992c200719162e081a100000000919ea600a1a3b9aca000b010c6867707573203e2030" +
	"0d030e1905dc0f1b0000018bcfe56800101b0000018bcfe56418111a0400000012fb3f50624dd2f1a9fc13fb3ee4f8b5" +
	"88e368f1140215f5160117f5181882662d2d666c61676576616c7565181903181a08181b82a3016b776569676874732e" +
	"62696e02582050e721e49c013f00c62cf59f2163542a9d8df02464efeb615d31051b0fddc326031863a30165766f6361" +
	"620258204c94485e0c21ae6c41ce1dfe7b6bfaceea5ab68e40a2476f50208e526f5060800307181cf5181d6474663332"

// goldenAnnounceJSON is fullAnnounce's JSON as it was written before its
// fields had JSON names, under their Go names: job records in a node's
// store and an older node's API have announces so.
const goldenAnnounceJSON = `{"V":1,"Job":"0102030405060708090a0b0c0d0e0f10","Client":"Y2xpZW50LXBlZXItaWQ=","Module":"120970d812836f19888625587a4606a5ad23cef31c8684e601771552548fc6b9","ModuleSize":1234,"Input":"c96c6d5be8d08a12e7b5cdc1b207fa6b2430974c86803d8891675e76fd992c20","InputSize":5678,"Memory":268435456,"TimeoutMS":60000,"Fuel":1000000000,"Mode":1,"Require":"gpus \u003e 0","Replicas":3,"Price":1500,"Deadline":1700000000000,"Time":1699999999000,"MaxOutput":67108864,"Rtol":0.001,"Atol":0.00001,"Format":2,"SameBackend":true,"Settle":1,"Proofs":true,"Args":["--flag","value"],"Shard":3,"Shards":8,"Data":[{"name":"weights.bin","digest":"50e721e49c013f00c62cf59f2163542a9d8df02464efeb615d31051b0fddc326","size":99},{"name":"vocab","digest":"4c94485e0c21ae6c41ce1dfe7b6bfaceea5ab68e40a2476f50208e526f506080","size":7}],"Stream":true,"Precision":"tf32"}`

// announceJSON is fullAnnounce's JSON: snake_case names, as every other
// record of the local API has.
const announceJSON = `{"v":1,"job":"0102030405060708090a0b0c0d0e0f10","client":"Y2xpZW50LXBlZXItaWQ=","module":"120970d812836f19888625587a4606a5ad23cef31c8684e601771552548fc6b9","module_size":1234,"input":"c96c6d5be8d08a12e7b5cdc1b207fa6b2430974c86803d8891675e76fd992c20","input_size":5678,"memory":268435456,"timeout_ms":60000,"fuel":1000000000,"mode":1,"max_output":67108864,"rtol":0.001,"atol":0.00001,"format":2,"proofs":true,"args":["--flag","value"],"shard":3,"shards":8,"data":[{"name":"weights.bin","digest":"50e721e49c013f00c62cf59f2163542a9d8df02464efeb615d31051b0fddc326","size":99},{"name":"vocab","digest":"4c94485e0c21ae6c41ce1dfe7b6bfaceea5ab68e40a2476f50208e526f506080","size":7}],"precision":"tf32","require":"gpus \u003e 0","replicas":3,"price":1500,"deadline":1700000000000,"time":1699999999000,"same_backend":true,"settle":1,"stream":true}`

// TestAnnounceEncodingUnchanged: embedding Terms did not change the wire
// bytes of an announce (so signatures, Assign.TermsDigest and peers of
// earlier versions still agree), and JSON names did not change what an
// announce written under the Go names reads as.
func TestAnnounceEncodingUnchanged(t *testing.T) {
	a := fullAnnounce()
	b, err := Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != goldenAnnounce {
		t.Fatalf("CBOR changed:\n got %s\nwant %s", got, goldenAnnounce)
	}
	golden, _ := hex.DecodeString(goldenAnnounce)
	var back JobAnnounce
	if err := Unmarshal(golden, MaxGossipMessage, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, a) {
		t.Fatalf("golden bytes decode as %+v, want %+v", back, *a)
	}
	j, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(j, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(announceJSON), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON changed:\n got %s\nwant %s", j, announceJSON)
	}
	for _, in := range []string{goldenAnnounceJSON, announceJSON} {
		var read JobAnnounce
		if err := json.Unmarshal([]byte(in), &read); err != nil || !reflect.DeepEqual(&read, a) {
			t.Errorf("%.40s… reads as %+v, %v; want %+v", in, read, err, *a)
		}
	}
	// Inside a record, as the store keeps it.
	var rec struct {
		Announce JobAnnounce `json:"announce"`
	}
	if err := json.Unmarshal([]byte(`{"announce":`+goldenAnnounceJSON+`}`), &rec); err != nil || !reflect.DeepEqual(&rec.Announce, a) {
		t.Errorf("a record's announce reads as %+v, %v", rec.Announce, err)
	}
}

// TestSeed: every replica of a job seeds its guest alike, and other jobs
// otherwise.
func TestSeed(t *testing.T) {
	a, b := fullAnnounce(), fullAnnounce()
	if a.Seed() != b.Seed() || a.Seed() != sha256.Sum256(a.Job[:]) {
		t.Fatal("one job, two seeds")
	}
	b.Job[0] ^= 1
	if a.Seed() == b.Seed() {
		t.Fatal("two jobs, one seed")
	}
}

// goNamesJSON is v's JSON as encoding/json wrote it before the wire types
// had JSON names: every field under its Go name, structs within too.
func goNamesJSON(t *testing.T, v any) []byte {
	t.Helper()
	var conv func(v reflect.Value) any
	conv = func(v reflect.Value) any {
		if _, ok := v.Interface().(json.Marshaler); ok || v.Kind() == reflect.Array {
			return v.Interface() // digests, ids: as they were
		}
		switch v.Kind() {
		case reflect.Struct:
			m := map[string]any{}
			for _, f := range reflect.VisibleFields(v.Type()) {
				if f.IsExported() && !f.Anonymous {
					m[f.Name] = conv(v.FieldByIndex(f.Index))
				}
			}
			return m
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				out := make([]any, v.Len())
				for i := range out {
					out[i] = conv(v.Index(i))
				}
				return out
			}
		}
		return v.Interface()
	}
	b, err := json.Marshal(conv(reflect.ValueOf(v).Elem()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOldJSONNames: a result and an advert (with its GPUs) written under
// the Go names, as a node's store keeps those of before, read as what
// they were, and are written under snake_case names now.
func TestOldJSONNames(t *testing.T) {
	res := &Result{V: Version, Job: JobID{1}, Replica: 2, Provider: []byte("p"), Output: blob.Sum([]byte("o")), OutputSize: 5,
		OutputData: []byte("hello"), Outcome: OutcomeExited, ExitCode: 3, Error: "e", Fuel: 9, RunMicros: 1234, Backend: "cpu",
		Sig: []byte("s"), Offer: []byte("o"), Invoice: "lnbc", Terms: blob.Sum([]byte("t")), Stderr: []byte("warn")}
	adv := &CapabilityAdvert{V: Version, Peer: []byte("p"), Seq: 4, Time: 5, Cores: 16, MemoryBytes: 1 << 34,
		GPUs:     []GPU{{Name: "H200", MemoryBytes: 141 << 30, SMs: 132, CUDACores: 16896, ComputeMajor: 9, ComputeMinor: 0}},
		Backends: []string{"reference", "cuda"}, Price: 7, Slots: 4, FreeSlots: 3, Software: "infernet/x", MaxMemory: 1 << 30,
		IntervalMS: 30000, Features: []string{"f"}, Precisions: []string{"tf32"}, Revisions: []uint16{1, 2}, HostABI: 7,
		MaxOutput: 1 << 26, MaxTimeoutMS: 600000}
	for _, tc := range []struct {
		v, back any
		names   []string
	}{
		{res, &Result{}, []string{`"output_size":5`, `"exit_code":3`, `"run_micros":1234`}},
		{adv, &CapabilityAdvert{}, []string{`"free_slots":3`, `"cuda_cores":16896`, `"max_timeout_ms":600000`, `"host_abi":7`}},
	} {
		old := goNamesJSON(t, tc.v)
		if err := json.Unmarshal(old, tc.back); err != nil || !reflect.DeepEqual(tc.back, tc.v) {
			t.Errorf("%s reads as %+v, %v; want %+v", old, tc.back, err, tc.v)
		}
		now, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range tc.names {
			if !strings.Contains(string(now), name) {
				t.Errorf("%s: no %s", now, name)
			}
		}
	}
}
