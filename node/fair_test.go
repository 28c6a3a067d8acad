package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// TestFairRefusals: a fair-exchange job is refused up front, with a reason,
// by a client without lnd and by providers that cannot sell by fair
// exchange; no job is recorded. (Fair jobs that run are in
// fair_regtest_test.go, on a real Lightning network.)
func TestFairRefusals(t *testing.T) {
	net := startNetwork(t, 1, nil)
	s, _ := catJob(t, net.client, 0)
	s.Price, s.Settle = 1000, wire.SettleFair
	if job, err := net.client.Submit(context.Background(), s, nil); !errors.Is(err, jobs.ErrCannotPay) || job != nil {
		t.Fatalf("fair job without lnd: %v, %v", job, err)
	}
	if jobs, err := net.client.Jobs(0); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs recorded: %v, %v", jobs, err)
	}

	now := wire.Millis(time.Now())
	ann := &wire.JobAnnounce{V: wire.Version, Job: wire.NewJobID(), Client: []byte(net.client.ID()),
		Terms: wire.Terms{Module: s.Module, ModuleSize: s.ModuleSize, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 100}, Replicas: 1,
		Price: 1000, Deadline: now + 60_000, Time: now, Settle: wire.SettleFair}
	b := net.providers[0].provider.Bid(ann)
	if b.Accept || !strings.Contains(b.Reason, "no fair exchange here") {
		t.Fatalf("a provider without lnd or keys bid %+v", b)
	}
}
