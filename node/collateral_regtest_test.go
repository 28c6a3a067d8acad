//go:build regtest

package node

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
)

// bonds sums a node's collateral records: taken (settled) and returned
// (cancelled), in count and msat.
func bonds(t *testing.T, n *Node) (taken, returned int, takenMsat int64) {
	t.Helper()
	ps, err := n.Payments(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		switch {
		case !p.Bond:
		case p.State == store.PaySettled:
			taken++
			takenMsat += p.AmountMsat
		case p.State == store.PayCanceled:
			returned++
		default:
			t.Errorf("collateral of job %s replica %d still %s after its job", p.Job, p.Replica, p.State)
		}
	}
	return taken, returned, takenMsat
}

// steadyBalance is the sum of the nodes' balances once it stops moving
// (1 s unchanged, at most 20 s): a stake returned or taken moves a
// balance a moment after its job ends, and one locked is not counted.
func steadyBalance(t *testing.T, cfgs ...payments.Config) int64 {
	t.Helper()
	sum := func() (s int64) {
		for _, c := range cfgs {
			s += localBalance(t, c)
		}
		return s
	}
	last, since := sum(), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && time.Since(since) < time.Second; {
		time.Sleep(100 * time.Millisecond)
		if now := sum(); now != last {
			last, since = now, time.Now()
		}
	}
	return last
}

// TestLightningCollateralSlashed: a paid job at the defaults asks each
// provider for jobs.CollateralTimes its price. A provider that lies is caught
// by the client's audit (two newcomers disagree): its stake is taken and
// it is not paid; the honest provider is paid and its stake comes back.
// Every sat is accounted for in the providers' real lnd balances.
func TestLightningCollateralSlashed(t *testing.T) {
	net, env := paidNetwork(t, 2, map[int]*faults.Faults{1: {Lie: 1}})
	honest, liar := env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)
	h0, l0, c0 := localBalance(t, honest), localBalance(t, liar), localBalance(t, env.Lnd(regtest.Client))
	s, _ := catJob(t, net.client, 0)
	s.Price = price
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified || job.Verification != jobs.VerifiedByAudit {
		t.Fatalf("job: %+v, %v; want verified by the client's audit", job, err)
	}
	if len(job.Liars) != 1 || job.Liars[0] != net.providers[1].ID().String() {
		t.Fatalf("liars %v, want the lying provider", job.Liars)
	}
	allFinal(t, 30*time.Second, append([]*Node{net.client}, net.providers...)...) // stakes end a moment after the job
	const collateral = jobs.CollateralTimes * price
	if job.Announce.Collateral != collateral {
		t.Fatalf("the job asked %d msat of collateral, want the default %d", job.Announce.Collateral, collateral)
	}
	taken, returned, takenMsat := bonds(t, net.client)
	if taken != 1 || returned != 1 || takenMsat != collateral {
		t.Fatalf("client: %d stakes taken (%d msat), %d returned; want 1 (%d msat) and 1", taken, takenMsat, returned, collateral)
	}
	if lt, _, _ := bonds(t, net.providers[1]); lt != 1 {
		t.Errorf("the liar's own records show %d stakes taken, want 1", lt)
	}
	if ht, hr, _ := bonds(t, net.providers[0]); ht != 0 || hr != 1 {
		t.Errorf("the honest provider's records: %d taken, %d returned; want 0 and 1", ht, hr)
	}
	waitBalances(t, h0+price, honest)
	waitBalances(t, l0-collateral, liar)
	dh, dl, dc := localBalance(t, honest)-h0, localBalance(t, liar)-l0, localBalance(t, env.Lnd(regtest.Client))-c0
	t.Logf("collateral %d msat: honest provider %+d msat, liar %+d, client %+d", collateral, dh, dl, dc)
	if dh != price || dl != -collateral || dc != collateral-price {
		t.Fatalf("balances moved %+d (honest), %+d (liar), %+d (client); want %+d, %+d, %+d", dh, dl, dc, price, -collateral, collateral-price)
	}
	// The honest provider's stake on an accepted result counts toward its
	// standing on the client.
	if p, ok := net.client.peers.Peer(net.providers[0].ID()); !ok || p.Staked != 1 {
		t.Errorf("the client counts %d stakes returned to the honest provider, want 1", p.Staked)
	}
	// The liar posts no more collateral to a client that took some.
	if p := net.providers[1].peers.Slashes(net.client.ID()); p != 1 {
		t.Errorf("the liar's book counts %d slashes by the client, want 1", p)
	}
}

// TestLightningCollateralBetrayal: one attacker's two identities, on two
// networks of their own beside an honest operator, answer honestly for
// their first 10 runs and then sign the same wrong output on every job
// whose replicas they both hold (Faults.Ring): only the client's random
// audits can catch those lies, and grouping cannot tell two networks of
// one attacker from two operators. 40 paid jobs at the defaults. Whatever
// the draws, the money adds up to the sat in the attacker's real lnd
// balances: it gained exactly what the client paid its identities, less
// the stakes taken, and only convicted identities lost a stake. What lying
// earned it (its accepted lies paid, less the stakes taken) is logged: its
// sign is the audits' draw (at a 5 % share and a stake of jobs.CollateralTimes
// the price, a lie loses 1.6 times the price on average, but a run of 40
// jobs holds only a few lies: docs/verification.md).
func TestLightningCollateralBetrayal(t *testing.T) {
	env := regtestEnv(t)
	ring := &faults.Ring{}
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if !c.Provide {
			c.Lnd = env.Lnd(regtest.Client)
			return
		}
		c.Price = price
		switch i {
		case 0:
			c.Lnd = env.Lnd(regtest.Aggregator) // the honest operator
		case 1:
			c.Lnd, c.Faults = env.Lnd(regtest.Provider1), &faults.Faults{Lie: 1, Collude: true, HonestFor: 10, Ring: ring}
		case 2:
			c.Lnd, c.Faults = env.Lnd(regtest.Provider2), &faults.Faults{Lie: 1, Collude: true, HonestFor: 10, Ring: ring}
		}
		i++
	})
	bad := map[string]bool{net.providers[1].ID().String(): true, net.providers[2].ID().String(): true}
	a1, a2 := env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)
	before := steadyBalance(t, a1, a2)
	c := net.client
	const jobs = 40
	right, wrongVerified, other := 0, 0, 0
	for k := range jobs {
		s, want := catJob(t, c, k)
		s.Price = price
		job, err := c.Submit(context.Background(), s, nil)
		var out []byte
		if err == nil && job.State == store.JobVerified {
			out, err = c.Blob(job.Output, 1<<20)
		}
		switch {
		case err != nil || job.State != store.JobVerified:
			other++ // failed, or unverified (nobody paid)
		case bytes.Equal(out, want):
			right++
		default:
			wrongVerified++ // both of its replicas were the attacker's, and paid
		}
	}
	allFinal(t, 30*time.Second, append([]*Node{c}, net.providers...)...)
	// What the client's records say went to the attacker, and came from it.
	ps, err := c.Payments(0)
	if err != nil {
		t.Fatal(err)
	}
	var paid, taken int64
	stakesTaken := map[string]int{}
	for _, p := range ps {
		switch {
		case p.Bond && p.State == store.PaySettled:
			if !bad[p.Peer] {
				t.Errorf("the stake of an honest provider was taken (job %s)", p.Job)
			}
			taken += p.AmountMsat
			stakesTaken[p.Peer]++
		case !p.Bond && p.Outgoing && p.State == store.PaySettled && bad[p.Peer]:
			paid += p.AmountMsat
		}
	}
	delta := steadyBalance(t, a1, a2) - before
	banned := 0
	for _, p := range c.Peers() {
		if p.Banned && bad[p.ID] {
			banned++
			if stakesTaken[p.ID] == 0 {
				t.Errorf("attacker identity %s banned and its stake never taken", p.ID)
			}
		} else if p.Banned {
			t.Errorf("honest provider %s banned", p.ID)
		}
	}
	netFromLies := int64(2*wrongVerified)*price - taken
	t.Logf("%d jobs: %d right, %d wrong verified, %d other; %d audits; attacker: paid %d msat, stakes taken %d (%d msat), identities banned %d, lnd balances %+d msat; its net from lying %+d msat (%d accepted lies at %d msat)",
		jobs, right, wrongVerified, other, c.Stats().Audits, paid, len(stakesTaken), taken, banned, delta, netFromLies, wrongVerified, 2*price)
	if delta != paid-taken {
		t.Fatalf("the attacker's balances moved %+d msat; the client's records say %d paid less %d taken = %+d", delta, paid, taken, paid-taken)
	}
}
