package node

// Hostile peers, round 2: trust must be earned. Each test replays an attack
// a red team ran with real node processes, here with real nodes on
// loopback whose Faults make them the attacker, under default settings,
// and counts what the issue counts: wrong outputs accepted as verified and
// honest providers banned (both must be 0), then checks that an honest job
// still verifies.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/faults"
	iclient "github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// hostileNetwork starts honest providers then attackers (each with its own
// Faults from attack), and a client; tweak adjusts every config after.
func hostileNetwork(t *testing.T, honest, attackers int, attack func() *faults.Faults, tweak func(*Config)) (*testNet, map[peer.ID]bool) {
	t.Helper()
	i := 0
	net := startNetwork(t, honest+attackers, func(c *Config) {
		if c.Provide {
			if i >= honest {
				c.Faults = attack()
			}
			i++
		}
		if tweak != nil {
			tweak(c)
		}
	})
	bad := map[peer.ID]bool{}
	for _, p := range net.providers[honest:] {
		bad[p.ID()] = true
	}
	return net, bad
}

// tally counts what jobs came to.
type tally struct {
	right, wrongVerified, wrongUnverified, failed int
	how                                           map[string]int
}

// runJobs submits n cat jobs (whose right answer is their input) with
// edit applied to each spec, and counts the outcomes.
func runJobs(t *testing.T, c *Node, n, offset int, edit func(*jobs.Spec)) tally {
	t.Helper()
	got := tally{how: map[string]int{}}
	for i := range n {
		s, want := catJob(t, c, offset+i)
		if edit != nil {
			edit(&s)
		}
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State == store.JobFailed {
			got.failed++
			t.Logf("job %d: %v", i, err)
			continue
		}
		out, err := c.Blob(job.Output, 1<<20)
		switch {
		case err == nil && bytes.Equal(out, want):
			got.right++
		case job.State == store.JobVerified:
			got.wrongVerified++
			t.Errorf("job %d: a wrong output accepted as verified by %s", i, job.Verification)
		default:
			got.wrongUnverified++
		}
		got.how[fmt.Sprint(job.State, "/", job.Verification)]++
	}
	return got
}

// judged counts, among the client's peers, the honest ones banned and the
// attackers banned.
func judged(c *Node, bad map[peer.ID]bool) (honestBanned, attackersBanned int) {
	for _, p := range c.Peers() {
		id, err := peer.Decode(p.ID)
		if err != nil || !p.Banned {
			continue
		}
		if bad[id] {
			attackersBanned++
		} else {
			honestBanned++
		}
	}
	return honestBanned, attackersBanned
}

// stillVerifies submits one more honest job and expects it verified right.
func stillVerifies(t *testing.T, c *Node) {
	t.Helper()
	s, want := catJob(t, c, 9999)
	job, err := c.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("an honest job afterwards: %+v, %v", job, err)
	}
	if out, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(out, want) {
		t.Fatal("an honest job afterwards got a wrong output")
	}
}

// TestHostileColluders: 8 identities of one attacker whose lies agree (the
// honest output with its last byte flipped) against 3 honest providers, on
// a fresh network: the colluders outnumber the honest, and nobody has a
// record. Before, 35 of 40 jobs accepted the lie with default settings and
// 40 of 40 with 3 replicas or adaptive replication, and every honest
// provider was banned. Now newcomers decide nothing on their own: the
// client runs such jobs itself, convicts whoever signed a wrong result and
// proves those who did not, until the honest are established.
func TestHostileColluders(t *testing.T) {
	for _, tc := range []struct {
		name string
		jobs int
		edit func(*jobs.Spec)
	}{
		{"default", 40, nil},
		{"replicas 3", 20, func(s *jobs.Spec) { s.Replicas = 3 }},
		{"adaptive", 20, func(s *jobs.Spec) { s.Adaptive = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net, bad := hostileNetwork(t, 3, 8, func() *faults.Faults { return &faults.Faults{Lie: 1, Collude: true} }, nil)
			c := net.client
			got := runJobs(t, c, tc.jobs, 0, tc.edit)
			honestBanned, caught := judged(c, bad)
			t.Logf("%s: %d jobs: %d right, %d wrong accepted as verified, %d wrong unverified, %d failed (%v); %d audits; honest banned %d, colluders banned %d of 8",
				tc.name, tc.jobs, got.right, got.wrongVerified, got.wrongUnverified, got.failed, got.how, c.Stats().Audits, honestBanned, caught)
			if got.wrongVerified != 0 || honestBanned != 0 {
				t.Fatalf("%d wrong outputs verified, %d honest providers banned; want 0 and 0", got.wrongVerified, honestBanned)
			}
			if got.right < tc.jobs/2 {
				t.Fatalf("only %d of %d jobs got the right output", got.right, tc.jobs)
			}
			if caught == 0 {
				t.Fatal("no colluder was banned")
			}
			stillVerifies(t, c)
		})
	}
}

// TestHostileColludersClaimingSlots: 2 colluding identities claiming 16
// free slots each (the honest claim 2). Before, a newcomer ranked first
// and ties went to the most free slots claimed: 40 of 40 jobs were wrong.
func TestHostileColludersClaimingSlots(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net, bad := hostileNetwork(t, 3, 2, func() *faults.Faults { return &faults.Faults{Lie: 1, Collude: true} }, func(c *Config) {
		if c.Faults != nil {
			c.Slots = 16
		}
	})
	c := net.client
	got := runJobs(t, c, 40, 0, nil)
	honestBanned, caught := judged(c, bad)
	t.Logf("40 jobs: %d right, %d wrong verified, %d wrong unverified, %d failed (%v); honest banned %d, colluders banned %d of 2",
		got.right, got.wrongVerified, got.wrongUnverified, got.failed, got.how, honestBanned, caught)
	if got.wrongVerified != 0 || honestBanned != 0 || got.right != 40 {
		t.Fatalf("want 40 right, 0 wrong verified, 0 honest banned")
	}
	stillVerifies(t, c)
}

// TestHostileColludersWithoutAudit: the same 8 colluders, with a client
// that never runs jobs itself (Config.NoAudit). Nothing newcomers agree on
// is verified: results come back unverified, never wrong and verified.
func TestHostileColludersWithoutAudit(t *testing.T) {
	net, bad := hostileNetwork(t, 3, 8, func() *faults.Faults { return &faults.Faults{Lie: 1, Collude: true} }, func(c *Config) {
		c.NoAudit = !c.Provide
	})
	c := net.client
	got := runJobs(t, c, 20, 0, nil)
	honestBanned, caught := judged(c, bad)
	t.Logf("no audit, 20 jobs: %d right, %d wrong verified, %d wrong unverified, %d failed (%v); honest banned %d, colluders banned %d",
		got.right, got.wrongVerified, got.wrongUnverified, got.failed, got.how, honestBanned, caught)
	if got.wrongVerified != 0 || honestBanned != 0 || got.how["verified/"+jobs.VerifiedByReplicas] != 0 {
		t.Fatal("newcomers verified a result, or an honest provider was banned")
	}
}

// TestHostileEstablishedThenLying: an identity honest for its first 25
// runs, then lying on every input, among 3 honest providers. Before, it
// was trusted and had 7 wrong results accepted, and was never banned.
// Now established providers outvote it (and audits catch it while all are
// newcomers): nothing wrong is accepted and it ends banned.
func TestHostileEstablishedThenLying(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net, bad := hostileNetwork(t, 3, 1, func() *faults.Faults { return &faults.Faults{Lie: 1, HonestFor: 25} }, nil)
	c := net.client
	// Replicas are drawn at random: jobs go on, 20 at a time, until the
	// liar has spent its record and been caught (at least 60, at most 200).
	var all tally
	jobs, honestBanned, caught := 0, 0, 0
	for jobs < 60 || (caught == 0 && jobs < 200) {
		got := runJobs(t, c, 20, jobs, nil)
		all.right, all.wrongVerified, all.failed = all.right+got.right, all.wrongVerified+got.wrongVerified, all.failed+got.failed
		jobs += 20
		honestBanned, caught = judged(c, bad)
	}
	t.Logf("%d jobs: %d right, %d wrong verified, %d failed; %d audits; honest banned %d, liar banned %d",
		jobs, all.right, all.wrongVerified, all.failed, c.Stats().Audits, honestBanned, caught)
	if all.wrongVerified != 0 || honestBanned != 0 || all.right != jobs {
		t.Fatalf("want %d right, 0 wrong verified, 0 honest banned", jobs)
	}
	if caught != 1 {
		t.Fatal("the liar was not banned")
	}
	stillVerifies(t, c)
}

// TestHostileFakeGPU: a provider whose advert claims an H200 wins jobs
// that require a GPU and runs them on its CPU. Before, 5 of 5 such jobs
// were accepted in tolerance mode. Now the backend its result reports is
// held to the advert it was chosen by: it is convicted on its first result
// and the job fails for want of a real GPU, never accepted. Since the GPU
// challenge, it is convicted before its first job instead (see
// TestGPUChallengeFakeGPU for exact mode, where only the challenge helps).
func TestHostileFakeGPU(t *testing.T) {
	t.Parallel() // waits far more than it computes
	h200 := wire.GPU{Name: "NVIDIA H200", MemoryBytes: 141 << 30, SMs: 132, ComputeMajor: 9}
	net, bad := hostileNetwork(t, 2, 1, func() *faults.Faults { return &faults.Faults{ClaimGPUs: []wire.GPU{h200}} }, func(c *Config) {
		if c.Faults != nil {
			c.Backend = "cpu" // what it has; its advert says an H200 and cuda
		}
		c.GPUChallenge = testGPUChallenge // the default would take the CPU seconds
	})
	c := net.client
	accepted := 0
	for i := range 5 {
		s, _ := catJob(t, c, i)
		s.Mode, s.Replicas, s.Require = wire.ModeTolerance, 1, "gpus >= 1 && vram >= 64"
		s.Deadline = 20 * time.Second
		job, err := c.Submit(context.Background(), s, nil)
		if err == nil {
			accepted++
			t.Errorf("job %d accepted from the fake GPU: %+v", i, job)
		} else if !errors.Is(err, jobs.ErrNoProviders) && !errors.Is(err, iclient.ErrLie) {
			t.Logf("job %d: %v", i, err)
		}
	}
	honestBanned, caught := judged(c, bad)
	t.Logf("5 GPU jobs: %d accepted; fake GPU banned %d, honest banned %d", accepted, caught, honestBanned)
	if caught != 1 || honestBanned != 0 {
		t.Fatal("the fake GPU is not banned, or an honest provider is")
	}
	stillVerifies(t, c)
}

// TestHostileStall: a provider that accepts, reports running, heartbeats
// and never answers. Before, each job failed at its full deadline and the
// staller lost nothing. Now a replica not answered within its run's time
// limit and a grace is reassigned and counted as lost.
func TestHostileStall(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net, bad := hostileNetwork(t, 3, 1, func() *faults.Faults { return &faults.Faults{Stall: true} }, nil)
	c := net.client
	var staller peer.ID
	for id := range bad {
		staller = id
	}
	// An established provider that starts stalling: vouched for, it is as
	// likely a draw as anyone (a newcomer is drawn a sixth as often).
	c.peers.Vouch(staller)
	// Jobs of 3 replicas on 4 providers, until the staller has held two.
	stalled := 0
	for i := 0; i < 20 && stalled < 2; i++ {
		s, want := catJob(t, c, i)
		s.TimeoutMS, s.Replicas = (2 * time.Second).Milliseconds(), 3
		var lostAt, assignedAt time.Time
		job, err := c.Submit(context.Background(), s, func(e jobs.Event) {
			if e.Provider != staller.String() {
				return
			}
			switch e.Kind {
			case jobs.EventAssigned:
				assignedAt = e.Time
			case jobs.EventLost:
				lostAt = e.Time
			}
		})
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %+v, %v", i, job, err)
		}
		if out, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(out, want) {
			t.Fatalf("job %d: wrong output", i)
		}
		if !assignedAt.IsZero() {
			stalled++
			t.Logf("job %d: the staller held a replica %v before it was reassigned (run time limit %v)", i, lostAt.Sub(assignedAt).Round(10*time.Millisecond), s.Timeout())
			if lostAt.IsZero() {
				t.Fatalf("job %d: the staller's replica was never counted lost", i)
			}
		}
	}
	if stalled == 0 {
		t.Fatal("the staller was never drawn in 20 jobs")
	}
	for _, p := range c.Peers() {
		if p.ID == staller.String() {
			t.Logf("the staller: %s", p.Why)
			if p.Rep.Lost == 0 {
				t.Fatalf("the staller held %d replicas and lost none", stalled)
			}
		}
	}
	stillVerifies(t, c)
}

// TestAuditConvicts: with --audit 1 every job is also run by the client,
// whatever the vote. Among providers the client vouches for (established,
// so their votes would count), one that lies is convicted by the first
// audited job it takes part in: banned at once, the job verified by audit
// with the right output.
func TestAuditConvicts(t *testing.T) {
	net, bad := hostileNetwork(t, 2, 1, func() *faults.Faults { return &faults.Faults{Lie: 1} }, nil)
	net.vouch()
	c := net.client
	for i := 0; ; i++ {
		s, want := catJob(t, c, i)
		s.Audit = 1
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified || job.Verification != jobs.VerifiedByAudit {
			t.Fatalf("job %d: %+v, %v; want verified by audit", i, job, err)
		}
		if out, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(out, want) {
			t.Fatalf("job %d: wrong output", i)
		}
		if len(job.Liars) > 0 {
			break
		}
		if i == 10 {
			t.Fatal("the liar was not drawn in 10 jobs")
		}
	}
	if honestBanned, caught := judged(c, bad); caught != 1 || honestBanned != 0 {
		t.Fatalf("liar banned %d, honest banned %d; want 1 and 0", caught, honestBanned)
	}
	if got := c.Stats().Audits; got == 0 {
		t.Fatal("no audit counted")
	}
}

// TestForgiveLiftsBan: an operator forgives a provider its client banned
// (`infernet peers forgive`: a ban made by mistake, a machine repaired).
// The provider lies until an audit convicts it, then runs honestly; while
// banned it is drawn for nothing, and once forgiven it runs replicas
// again, which verify.
func TestForgiveLiftsBan(t *testing.T) {
	var lying atomic.Bool
	lying.Store(true)
	net, bad := hostileNetwork(t, 2, 1, func() *faults.Faults {
		return &faults.Faults{Rewrite: func(_, out []byte) []byte {
			if lying.Load() {
				return append(slices.Clone(out), '!')
			}
			return out
		}}
	}, nil)
	net.vouch()
	c := net.client
	var liar peer.ID
	for id := range bad {
		liar = id
	}
	ran := func(job *store.Job) bool {
		return slices.ContainsFunc(job.Replicas, func(r store.Replica) bool { return r.Provider == liar.String() })
	}
	for i := 0; ; i++ {
		s, _ := catJob(t, c, i)
		s.Audit = 1
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %+v, %v", i, job, err)
		}
		if len(job.Liars) > 0 {
			break
		}
		if i == 10 {
			t.Fatal("the liar was not drawn in 10 jobs")
		}
	}
	if _, caught := judged(c, bad); caught != 1 {
		t.Fatal("the liar is not banned")
	}
	lying.Store(false)
	for i := range 4 {
		s, _ := catJob(t, c, 100+i)
		if job, err := c.Submit(context.Background(), s, nil); err != nil || ran(job) {
			t.Fatalf("job %d while banned: %+v, %v", i, job, err)
		}
	}
	if _, err := c.Forgive(net.client.ID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("forgiving a peer with no record: %v", err)
	}
	info, err := c.Forgive(liar)
	if err != nil || info.Banned || info.Rep.Lies != 0 || info.Reputation == 0 {
		t.Fatalf("forgiven: %+v, %v", info, err)
	}
	for i := 0; ; i++ {
		s, want := catJob(t, c, 200+i)
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d after forgiving: %+v, %v", i, job, err)
		}
		if out, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(out, want) {
			t.Fatalf("job %d after forgiving: wrong output", i)
		}
		if ran(job) {
			break
		}
		if i == 20 {
			t.Fatal("the forgiven provider ran nothing in 20 jobs")
		}
	}
}
