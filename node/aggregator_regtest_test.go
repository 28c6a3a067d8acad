//go:build regtest

package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
)

// TestLightningAggregator: a client hands a 4-shard job of 2 replicas at
// price per replica to an aggregator charging 1.5%, over regtest
// Lightning. The client pays the aggregator exactly total + fee in one
// hold invoice, released once the result checks out; the aggregator pays
// each provider exactly price per shard-replica it ran, and keeps exactly
// its fee. With a spot check the client pays that shard's replicas too, on
// top. An invoice over the agreed amount is refused before anything runs.
// A lying aggregator is caught and paid nothing: the client's hold is
// cancelled, and the providers keep what the aggregator paid them.
func TestLightningAggregator(t *testing.T) {
	net, env := paidNetwork(t, 2, nil)
	ctx := context.Background()
	lnds := map[string]payments.Config{}
	for _, name := range []string{regtest.Client, regtest.Aggregator, regtest.Provider1, regtest.Provider2} {
		lnds[name] = env.Lnd(name)
	}
	balances := func() map[string]int64 {
		b := map[string]int64{}
		for name, cfg := range lnds {
			b[name] = localBalance(t, cfg)
		}
		return b
	}
	// expect waits until every node's balance moved by want[name] since
	// before, and reports those that did not.
	expect := func(before, want map[string]int64) {
		t.Helper()
		for name, cfg := range lnds {
			if got := waitBalances(t, before[name]+want[name], cfg) - before[name]; got != want[name] {
				t.Errorf("%s's balance moved by %d msat, want %d", name, got, want[name])
			}
		}
	}

	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in strings.Builder
	for i := range 80 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	input := []byte(in.String())
	want := runLocallyWith(t, module, input, "q")
	const shards, replicas = 4, 2
	spec := jobs.Spec{Terms: wire.Terms{Module: putBlob(t, net.client, module), ModuleSize: int64(len(module)),
		TimeoutMS: 10_000, Args: []string{"q"}}, Replicas: replicas,
		Price: price}
	inputs := shardInputs(t, net.client, input, shards)
	const total = shards * replicas * price
	const fee = total * 150 / 10000 // 1.5%

	agg := startAggregator(t, net, func(c *Config) { c.Lnd, c.AggregatorFee = env.Lnd(regtest.Aggregator), 1.5 })
	submit := func(agg *Node, spotChecks int) (*store.ShardedStatus, error) {
		return net.client.SubmitVia(ctx, agg.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs}, spotChecks, 2, nil)
	}

	t.Run("paid exactly", func(t *testing.T) {
		before := balances()
		sj, err := submit(agg, 0)
		if err != nil || sj.State != store.JobVerified {
			t.Fatalf("aggregated job: %+v, %v", sj, err)
		}
		if got, err := net.client.Blob(sj.Output, 1<<20); err != nil || string(got) != string(want) {
			t.Fatalf("merged output %q, %v; want %q", got, err, want)
		}
		if sj.PaidMsat != total+fee || sj.FeeMsat != fee {
			t.Errorf("job says %d msat paid, %d of it the fee; want %d and %d", sj.PaidMsat, sj.FeeMsat, total+fee, fee)
		}
		// Both providers ran every shard once: each is paid for 4 shard-replicas.
		expect(before, map[string]int64{regtest.Client: -(total + fee), regtest.Aggregator: fee,
			regtest.Provider1: shards * price, regtest.Provider2: shards * price})
		if n, msat, fees := settledPayments(t, agg, true); n != shards*replicas || msat != total || fees != 0 {
			t.Errorf("aggregator settled %d payments of %d msat (fees %d); want %d of %d in all, no fees", n, msat, fees, shards*replicas, total)
		}
		pays, err := agg.Payments(0)
		if err != nil {
			t.Fatal(err)
		}
		var incoming []store.Payment
		for _, p := range pays {
			if !p.Outgoing && !p.Bond { // the providers' stakes on the shards are the aggregator's as their client
				incoming = append(incoming, p)
			}
		}
		if len(incoming) != 1 || !incoming[0].Aggregate || !incoming[0].Delivered || incoming[0].State != store.PaySettled || incoming[0].AmountMsat != total+fee {
			t.Errorf("aggregator's incoming payments: %+v; want one settled aggregate payment of %d msat", incoming, total+fee)
		}
	})

	t.Run("spot check run by the client", func(t *testing.T) {
		before := balances()
		sj, err := submit(agg, 1)
		if err != nil || sj.State != store.JobVerified {
			t.Fatalf("aggregated job: %+v, %v", sj, err)
		}
		// The spot-checked shard ran once more in the client's own
		// sandbox: no provider ran it, and nobody more was paid.
		expect(before, map[string]int64{regtest.Client: -(total + fee), regtest.Aggregator: fee,
			regtest.Provider1: shards * price, regtest.Provider2: shards * price})
	})

	t.Run("overcharging aggregator refused", func(t *testing.T) {
		greedy := startAggregator(t, net, func(c *Config) {
			c.Lnd, c.AggregatorFee, c.Faults = env.Lnd(regtest.Aggregator), 1.5, &faults.Faults{Aggregate: "overcharge"}
		})
		before := balances()
		_, err := submit(greedy, 0)
		if !errors.Is(err, payments.ErrMismatch) {
			t.Fatalf("err = %v, want the invoice refused (payments.ErrMismatch)", err)
		}
		expect(before, map[string]int64{}) // nothing moved, nothing ran
		if jobs, _ := greedy.Jobs(0); len(jobs) != 0 {
			t.Errorf("the aggregator ran %d shard jobs unpaid", len(jobs))
		}
	})

	t.Run("lying aggregator paid nothing", func(t *testing.T) {
		liar := startAggregator(t, net, func(c *Config) {
			c.Lnd, c.AggregatorFee, c.Faults = env.Lnd(regtest.Aggregator), 1.5, &faults.Faults{Aggregate: "output"}
		})
		before := balances()
		_, err := submit(liar, 0)
		if !errors.Is(err, jobs.ErrAggregatorLied) {
			t.Fatalf("err = %v, want jobs.ErrAggregatorLied", err)
		}
		expect(before, map[string]int64{regtest.Client: 0, regtest.Aggregator: -total,
			regtest.Provider1: shards * price, regtest.Provider2: shards * price})
		pays, err := liar.Payments(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pays {
			if !p.Outgoing && p.State != store.PayCanceled {
				t.Errorf("liar's invoice to the client: %s, want cancelled", p.State)
			}
		}
	})
}
