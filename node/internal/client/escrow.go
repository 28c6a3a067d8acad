package client

import (
	"context"
	"fmt"
	"maps"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// paid reports whether this job pays its providers.
func (j *jobRun) paid() bool { return j.c.n.Ledger.Paid() && j.ann.Price > 0 }

// canPay checks, before a paid job starts, that lnd answers and holds
// enough in its channels for every replica at the offered price.
func (c *Client) canPay(ctx context.Context, ann *wire.JobAnnounce) error {
	need := int64(ann.Price) * int64(ann.Replicas)
	return c.n.Ledger.CanPay(ctx, need, fmt.Sprintf("%d replicas at %d msat", ann.Replicas, ann.Price))
}

// newPayment chooses the preimage of a replica's payment and records it
// before anything is sent. The payment is claimed until the job settles it.
func (j *jobRun) newPayment(r uint8, p peer.ID, price uint64) (*store.Payment, error) {
	return j.c.n.Ledger.NewPayment(&store.Payment{Job: j.ann.Job, Replica: r, Peer: p.String(), AmountMsat: int64(price)})
}

// escrowRef is a paid replica's payment, kept until the verdict.
type escrowRef struct {
	pay      *store.Payment
	inflight *payments.Payment
}

// settleAll releases the payments of the results in winners and cancels
// every other payment of the job, and takes the collateral of the
// providers convicted in it and returns everyone else's, waiting for all
// of them. Payments kept
// after this (a replica still running at the verdict) are cancelled as
// they come.
func (j *jobRun) settleAll(winners map[*wire.Result]bool) {
	n := j.c.n
	j.mu.Lock()
	refs, bonds := j.escrows, j.bonds
	j.escrows, j.bonds, j.settled = nil, nil, true
	convicted := maps.Clone(j.convicted)
	j.mu.Unlock()
	withhold := n.Faults.Withholds()
	done := make(chan struct{}, len(refs)+len(bonds))
	for res, ref := range refs {
		go func() {
			defer func() { done <- struct{}{} }()
			j.settleOne(ref, res != nil && winners[res] && !withhold)
		}()
	}
	won := map[string]bool{}
	for res, ok := range winners {
		if ok && res != nil {
			won[peer.ID(res.Provider).String()] = true
		}
	}
	for _, bond := range bonds {
		go func() {
			defer func() { done <- struct{}{} }()
			slash := convicted[bond.Peer]
			j.endBond(bond, slash)
			if id, err := peer.Decode(bond.Peer); err == nil && !slash && won[bond.Peer] && bond.State == store.PayCanceled {
				n.Peers.Staked(id) // money at risk on a result that was accepted
			}
		}()
	}
	for range len(refs) + len(bonds) {
		<-done
	}
}

// settleOne settles one escrowed payment and gives it up to the sweep.
func (j *jobRun) settleOne(ref escrowRef, release bool) {
	n := j.c.n
	defer n.Ledger.Drop(ref.pay)
	ctx, cancel := context.WithTimeout(n.Life, settle.PaymentWait)
	defer cancel()
	n.Ledger.SettleOut(ctx, ref.pay, ref.inflight, release)
}

// keepEscrow remembers a payment until the verdict; res is nil for a
// replica that was lost (its payment is cancelled at the end).
func (j *jobRun) keepEscrow(res *wire.Result, pay *store.Payment, inflight *payments.Payment) {
	j.mu.Lock()
	if j.settled {
		j.mu.Unlock()
		j.settleOne(escrowRef{pay, inflight}, false)
		return
	}
	defer j.mu.Unlock()
	if j.escrows == nil {
		j.escrows = map[*wire.Result]escrowRef{}
	}
	key := res
	if key == nil {
		key = &wire.Result{} // a unique key that no verdict names
	}
	j.escrows[key] = escrowRef{pay, inflight}
}
