//go:build regtest

package node

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments/regtest"
)

// TestLightningHostileTheft: after a paid job, a peer without lnd assigns
// the same job, on the same terms but in its own name, to the providers
// that ran it. It must be asked to pay like anyone else, never handed the
// output the victim paid for, and no provider's balance moves for it.
func TestLightningHostileTheft(t *testing.T) {
	net, env := paidNetwork(t, 2, nil)
	ctx := context.Background()
	p1, p2 := localBalance(t, env.Lnd(regtest.Provider1)), localBalance(t, env.Lnd(regtest.Provider2))
	s, _ := catJob(t, net.client, 0)
	s.Price = price
	job, err := net.client.Submit(ctx, s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("victim's job: %v, %v", job, err)
	}
	secret, err := net.client.Blob(job.Output, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	thief := joinNode(t, net)
	for _, rep := range job.Replicas {
		p, err := peer.Decode(rep.Provider)
		if err != nil {
			t.Fatal(err)
		}
		ann := job.Announce
		ann.Client = []byte(thief.ID())
		u, err := sendAssign(ctx, thief.host, p, &wire.Assign{V: wire.Version, Announce: ann, Replica: rep.Index, Price: price})
		if err != nil {
			t.Fatalf("thief's assign of replica %d: %v", rep.Index, err)
		}
		if u.Result != nil && bytes.Equal(u.Result.OutputData, secret) {
			t.Fatalf("replica %d: the thief got the paid-for output %q without paying", rep.Index, secret)
		}
		if u.Kind != wire.UpdateRejected || !strings.Contains(u.Reason, jobs.ErrPaymentRequired.Error()) {
			t.Errorf("replica %d: update %d %q; want a refusal asking for payment", rep.Index, u.Kind, u.Reason)
		}
	}
	// Each provider is paid once, by the victim, whatever the thief did.
	waitBalances(t, p1+p2+2*price, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2))
	if d1, d2 := localBalance(t, env.Lnd(regtest.Provider1))-p1, localBalance(t, env.Lnd(regtest.Provider2))-p2; d1 != price || d2 != price {
		t.Errorf("provider balances grew by %d and %d msat, want %d each (the victim's payment alone)", d1, d2, price)
	}
}
