package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/faults"
	iclient "github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
	"github.com/infernet/infernet/proofs/testkeys"
)

// gemmKeys are test-only CommittedGEMM keys (proofs/testkeys: groth16.Setup,
// cached on disk and in memory).
type gemmKeys struct{}

var testGemmKeys gemmKeys

func (gemmKeys) keys(n int) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	ccs, err := gemmproof.ConstraintSystem(n)
	if err != nil {
		return nil, nil, err
	}
	return testkeys.Setup(ccs)
}

// ProvingKey implements gemmproof.Keys.
func (k gemmKeys) ProvingKey(n int) (groth16.ProvingKey, error) {
	pk, _, err := k.keys(n)
	return pk, err
}

// VerifyingKey fits Config.GemmVerifyingKey.
func (k gemmKeys) VerifyingKey(n int) (groth16.VerifyingKey, error) {
	_, vk, err := k.keys(n)
	return vk, err
}

// proofNetwork starts providers with the test proving keys (tweak may
// change each, by index) and a client with the verifying keys, which
// vouches for them.
func proofNetwork(t *testing.T, providers int, tweak func(i int, c *Config)) *testNet {
	t.Helper()
	for _, n := range wire.ProofTemplates() {
		if _, _, err := testGemmKeys.keys(n); err != nil { // now, so that no job waits on the disk
			t.Fatalf("test keys of template %d: %v", n, err)
		}
	}
	i := 0
	return startNetwork(t, providers, func(c *Config) {
		if !c.Provide {
			c.GemmVerifyingKey = testGemmKeys.VerifyingKey
			return
		}
		c.GemmProvingKeys = testGemmKeys
		if tweak != nil {
			tweak(i, c)
		}
		i++
	}).vouch() // proof-mode jobs are not audited: the client runs nothing in proof mode
}

// gemmJob stores the guest and ops (the guest's input lines) in n.
func gemmJob(t *testing.T, n *Node, ops string) jobs.Spec {
	t.Helper()
	s := spec(t, n, readTestdata(t, "../host/testdata/gemmproof.wasm"), []byte(ops))
	s.Proofs = true
	return s
}

// guestOp is one line of the guest's output.
type guestOp struct {
	errno   abi.Errno
	m, n, k int
	flags   int32
	a, b    []int8
	c       []int32
}

// parseGuest reads the guest's output, with each op's shape from its input.
func parseGuest(t *testing.T, input string, out []byte) []guestOp {
	t.Helper()
	in, lines := strings.Split(strings.TrimSpace(input), "\n"), strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(in) {
		t.Fatalf("guest printed %d ops for %d: %q", len(lines), len(in), out)
	}
	ops := make([]guestOp, len(in))
	for i, line := range lines {
		o := &ops[i]
		var form string
		if _, err := fmt.Sscan(in[i], &form, &o.m, &o.n, &o.k, &o.flags); err != nil {
			t.Fatal(err)
		}
		f := strings.Split(line, " | ")
		var idx int
		if _, err := fmt.Sscan(f[0], &idx, &o.errno); err != nil || len(f) != 4 || idx != i {
			t.Fatalf("bad guest line %q", line)
		}
		o.a, o.b, o.c = ints[int8](t, f[1]), ints[int8](t, f[2]), ints[int32](t, f[3])
	}
	return ops
}

func ints[T int8 | int32](t *testing.T, s string) []T {
	t.Helper()
	var out []T
	for _, w := range strings.Fields(s) {
		var v int32
		if _, err := fmt.Sscan(w, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, T(v))
	}
	return out
}

// trueDigests returns the digests a verifier holding the matrices expects
// for op in template tmpl, after checking that the guest's C is the true
// product of its operands.
func trueDigests(t *testing.T, o guestOp, tmpl int) [3][32]byte {
	t.Helper()
	op, err := gemmproof.NewOp(tmpl, o.m, o.n, o.k, o.flags, o.a, o.b, o.c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tmpl { // padded, with transposes applied: C must be A·B
		for j := range tmpl {
			var s int32
			for l := range tmpl {
				s += op.A[i*tmpl+l] * op.B[l*tmpl+j]
			}
			if s != op.C[i*tmpl+j] {
				t.Fatalf("op %dx%dx%d: the guest's C is not the product at (%d,%d)", o.m, o.n, o.k, i, j)
			}
		}
	}
	a, b, c, err := op.Digests()
	if err != nil {
		t.Fatal(err)
	}
	return [3][32]byte{a, b, c}
}

// TestProofModeJob: a proof-mode job on two providers ends verified, and
// its record carries one proof per integer GEMM the guest performed (an op
// over the network's largest template gets ENOPROOF instead), each in the
// right template, verifying with its key, and committing to the digests
// computed from the true matrices; the record keeps them across a reload.
func TestProofModeJob(t *testing.T) {
	net := proofNetwork(t, 2, nil)
	const ops = "ptr 8 8 8 0\nhandle 20 12 16 2\nptr 40 2 2 0\nptr 3 5 7 1\n"
	want := []struct {
		errno abi.Errno
		tmpl  int
	}{{abi.OK, 16}, {abi.OK, 32}, {abi.ENOPROOF, 0}, {abi.OK, 16}}
	start := time.Now()
	job, err := net.client.Submit(context.Background(), gemmJob(t, net.client, ops), nil)
	if err != nil || job.State != store.JobVerified || job.Agree != 2 {
		t.Fatalf("job %+v, %v; want verified by 2", job, err)
	}
	t.Logf("proof-mode job verified in %v", time.Since(start))
	out, err := net.client.Blob(job.Output, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got := parseGuest(t, ops, out)
	var proven []int
	for i, w := range want {
		if got[i].errno != w.errno {
			t.Errorf("op %d: errno %v, want %v", i, got[i].errno, w.errno)
		}
		if w.errno == abi.OK {
			proven = append(proven, i)
		}
	}
	if len(job.Proofs) != len(proven) {
		t.Fatalf("%d proofs in the record, want %d", len(job.Proofs), len(proven))
	}
	for j, p := range job.Proofs {
		o, tmpl := got[proven[j]], want[proven[j]].tmpl
		if p.Index != j || p.Template != tmpl || p.M != o.m || p.N != o.n || p.K != o.k || p.Flags != o.flags {
			t.Errorf("proof %d: %d in template %d for %dx%dx%d/%d, want %d in %d for %dx%dx%d/%d", j,
				p.Index, p.Template, p.M, p.N, p.K, p.Flags, j, tmpl, o.m, o.n, o.k, o.flags)
		}
		if d := trueDigests(t, o, tmpl); [3][32]byte{p.DigestA, p.DigestB, p.DigestC} != d {
			t.Errorf("proof %d: digests differ from the true matrices'", j)
		}
		vk, _ := testGemmKeys.VerifyingKey(p.Template)
		if err := gemmproof.Verify(vk, p); err != nil {
			t.Errorf("proof %d: %v", j, err)
		}
	}
	for _, r := range job.Replicas {
		if r.State != store.ReplicaDone || r.Result == nil || len(r.Result.Proofs) != len(proven) || peers.VerifyResult(r.Result) != nil {
			t.Errorf("replica %d on %s: %s, %s; want done with %d signed proofs", r.Index, r.Provider, r.State, r.Error, len(proven))
		}
	}
	rec, err := net.client.Job(job.ID)
	if err != nil || len(rec.Proofs) != len(job.Proofs) || rec.Proofs[1].DigestC != job.Proofs[1].DigestC {
		t.Fatalf("stored record: %v, %d proofs", err, len(rec.Proofs))
	}
}

// TestProofModeTampered: of three providers, one spoils a proof in every
// result. Jobs run until it is drawn for a replica (replicas are drawn at
// random): its result is refused on arrival as a lie, its replica goes to
// the third provider, and the job ends verified with good proofs.
func TestProofModeTampered(t *testing.T) {
	net := proofNetwork(t, 3, func(i int, c *Config) {
		if i == 0 {
			c.Faults = &faults.Faults{TamperProofs: true}
		}
	})
	cheat := net.providers[0].ID().String()
	var job *store.Job
	for try := 0; ; try++ {
		var err error
		job, err = net.client.Submit(context.Background(), gemmJob(t, net.client, "ptr 8 8 8 0\nptr 3 5 7 1\n"), nil)
		if err != nil || job.State != store.JobVerified || job.Agree != 2 {
			t.Fatalf("job %+v, %v; want verified by 2", job, err)
		}
		if slices.ContainsFunc(job.Replicas, func(r store.Replica) bool { return r.Provider == cheat }) {
			break
		}
		if try == 8 {
			t.Fatal("the cheat was not drawn in 8 jobs")
		}
	}
	if len(job.Liars) != 1 || job.Liars[0] != cheat {
		t.Errorf("liars %v, want the cheat %s", job.Liars, cheat)
	}
	var caught bool
	done := map[uint8]string{}
	for _, r := range job.Replicas {
		switch {
		case r.Provider == cheat:
			caught = r.State == store.ReplicaLost && strings.Contains(r.Error, iclient.ErrBadProof.Error())
			t.Logf("the cheat's replica %d: %s (%s)", r.Index, r.State, r.Error)
		case r.State == store.ReplicaDone:
			done[r.Index] = r.Provider
		}
	}
	if !caught || len(done) != 2 {
		t.Fatalf("replicas %+v; want the cheat's lost to a bad proof and both replicas done by honest providers", job.Replicas)
	}
	for _, p := range net.client.Peers() {
		if p.ID == cheat && p.Rep.Lies != 1 {
			t.Errorf("the cheat has %d lies on record, want 1", p.Rep.Lies)
		}
	}
	if len(job.Proofs) != 2 {
		t.Fatalf("%d proofs, want 2", len(job.Proofs))
	}
	for j, p := range job.Proofs {
		vk, _ := testGemmKeys.VerifyingKey(p.Template)
		if err := gemmproof.Verify(vk, p); err != nil {
			t.Errorf("accepted proof %d: %v", j, err)
		}
	}
}

// TestProofModeRefusals: a client without verifying keys is refused before
// anything is recorded; a provider without proving keys declines with a
// reason; a provider handed a sandbox bids with that sandbox's keys.
func TestProofModeRefusals(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 1, nil)
	s, _ := catJob(t, net.client, 0)
	s.Proofs = true
	if job, err := net.client.Submit(context.Background(), s, nil); !errors.Is(err, jobs.ErrNoVerifyingKeys) || job != nil {
		t.Fatalf("proof-mode job without verifying keys: %v, %v", job, err)
	}
	if jobs, err := net.client.Jobs(0); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs recorded: %v, %v", jobs, err)
	}

	now := wire.Millis(time.Now())
	ann := &wire.JobAnnounce{V: wire.Version, Job: wire.NewJobID(), Client: []byte(net.client.ID()),
		Terms: wire.Terms{Module: s.Module, ModuleSize: s.ModuleSize, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 100, Proofs: true}, Replicas: 1,
		Deadline: now + 60_000, Time: now}
	if b := net.providers[0].provider.Bid(ann); b.Accept || !strings.Contains(b.Reason, "no proof mode here") {
		t.Fatalf("a provider without proving keys bid %+v", b)
	}

	ctx := context.Background()
	set, err := backends.Open(ctx, backends.Config{Fast: "reference"})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, ProvingKeys: testGemmKeys, CacheDir: compileCache})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	cfg := testConfig(t, true)
	cfg.Sandbox, cfg.Backends = sb, set // and no GemmProvingKeys of its own
	cfg.Bootstrap = []string{net.providers[0].Addrs()[0].String()}
	p, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if b := p.provider.Bid(ann); !b.Accept {
		t.Fatalf("a provider whose sandbox has proving keys declined: %s", b.Reason)
	}
	// Adverts say who can prove, and clients pick only those.
	if !p.provider.Advert().Offers(wire.FeatureProofs) || net.providers[0].provider.Advert().Offers(wire.FeatureProofs) {
		t.Fatalf("adverts: features %v and %v", p.provider.Advert().Features, net.providers[0].provider.Advert().Features)
	}
	for _, proofs := range []bool{false, true} {
		a := *ann
		a.Proofs, a.Require = proofs, ""
		want := map[bool]int{false: 2, true: 1}[proofs]
		var cands []peers.Candidate
		waitFor(t, 30*time.Second, "the client sees both adverts", func() bool {
			var err error
			if cands, err = net.client.client.Candidates(&a); err != nil {
				t.Fatal(err)
			}
			return len(cands) >= want
		})
		if len(cands) != want || (proofs && cands[0].ID != p.ID()) {
			t.Fatalf("proof mode %v: candidates %v, want %d", proofs, cands, want)
		}
	}
}
