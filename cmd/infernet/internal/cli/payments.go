package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/store"
)

// NewCmdEarnings returns `infernet earnings`: what this node was paid.
func NewCmdEarnings(stdio IO) *cobra.Command { return newCmdPayments(stdio, "earnings", false) }

// NewCmdSpending returns `infernet spending`: what this node paid.
func NewCmdSpending(stdio IO) *cobra.Command { return newCmdPayments(stdio, "spending", true) }

func newCmdPayments(stdio IO, use string, outgoing bool) *cobra.Command {
	var o listOptions
	short := "List what this node earned running jobs, per job replica (Lightning)"
	if outgoing {
		short = "List what this node spent on jobs, per job replica (Lightning)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, free, err := o.payments(cmd.Context(), stdio)
			if err != nil {
				return err
			}
			if free && len(all) == 0 {
				// An empty table and "settled 0 msat" said nothing of why.
				fmt.Fprintf(stdio.Err, "%s: the node runs in free mode (no lnd): it pays and is paid nothing (docs/payments.md)\n", programName)
			}
			var ps []store.Payment
			for _, p := range all {
				if p.Outgoing == outgoing {
					ps = append(ps, p)
				}
			}
			if o.JSON {
				views := make([]paymentView, len(ps))
				for i, p := range ps {
					views[i] = viewPayment(p)
				}
				return printJSON(stdio, views)
			}
			tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tREPLICA\tPEER\tKIND\tSTATE\tAMOUNT\tFEE\tWHEN\tNOTE")
			var settled, held, staked, taken int64
			for _, p := range ps {
				open := p.State == store.PayLocked || p.State == store.PayReleasing || p.State == store.PayPaying
				switch {
				case p.Bond && p.State == store.PaySettled:
					taken += p.AmountMsat
				case p.Bond && open:
					staked += p.AmountMsat
				case p.State == store.PaySettled:
					settled += p.AmountMsat
				case open:
					held += p.AmountMsat
				}
				kind, note := paymentKind(p), oneLine(p.Error)
				if p.Bond && p.State == store.PayCanceled && neverStaked(&p) {
					note = "not staked: " + note
				} else if p.Bond && p.State == store.PayCanceled {
					note = "stake returned" // lnd's reason for a cancelled hold is no error here
				} else if p.Bond && p.State == store.PaySettled {
					note = "stake taken: the provider was caught lying"
				} else if p.State == store.PayCanceled && p.Outgoing && strings.Contains(p.Error, cancelledHold) {
					// lnd's words for a hold invoice its payee cancelled,
					// which is how a price comes back unspent.
					note = "price returned: its result was not taken (refused, not needed, or the job ended)"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d msat\t%d msat\t%s\t%s\n", p.Job, p.Replica, shortID(p.Peer), kind, p.State,
					p.AmountMsat, p.FeeMsat, p.Updated.Format(time.DateTime), note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "prices: settled %d msat, held in escrow %d msat\n", settled, held)
			if staked > 0 || taken > 0 {
				// The client holds its providers' stakes (earnings); a
				// provider pays its own (spending).
				fmt.Fprintf(stdio.Out, "collateral: at stake %d msat, taken %d msat\n", staked, taken)
			}
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}

// cancelledHold is in lnd's reason for a payment to a hold invoice its
// payee cancelled.
const cancelledHold = "INCORRECT_PAYMENT_DETAILS"

// paymentKind names what a payment is for: a replica's price (escrow or
// fair exchange), a whole job's to an aggregator, or collateral.
func paymentKind(p store.Payment) string {
	switch {
	case p.Bond:
		return "collateral"
	case p.Fair:
		return "price (fair)"
	case p.Aggregate:
		return "job via aggregator"
	}
	return "price"
}

// payments lists the node's payments: through its API, or with no node
// running for --datadir (and no --api), from its database, as of its last
// stop, said on stderr. A node that was killed left its API's address
// behind, where nobody answers: that is no node running too, and just
// when its operator wants to know what it earned. free is whether the
// running node is in free mode (no lnd).
func (o *listOptions) payments(ctx context.Context, stdio IO) (ps []store.Payment, free bool, err error) {
	c, err := dialNode(stdio.Err, o.DataDir, o.API)
	if err == nil {
		if ps, err = c.Payments(ctx); err == nil {
			info, ierr := c.Node(ctx)
			return ps, ierr == nil && !info.Paid, nil
		}
	}
	if !errors.Is(err, api.ErrNoNode) || o.API != "" {
		return nil, false, err
	}
	ps, lerr := api.LocalPayments(o.DataDir)
	if lerr != nil {
		return nil, false, fmt.Errorf("%w; and its database: %w", err, lerr)
	}
	fmt.Fprintf(stdio.Err, "%s: no node runs for %s: its records as of its last stop\n", programName, o.DataDir)
	return ps, false, nil
}

// paymentView is a payment as --json prints it: its hash and preimage in
// hex, as lncli prints them, rather than arrays of numbers.
type paymentView struct {
	store.Payment
	Hash     string `json:"hash"`
	Preimage string `json:"preimage,omitempty"`
}

func viewPayment(p store.Payment) paymentView {
	v := paymentView{Payment: p, Hash: hex.EncodeToString(p.Hash[:])}
	if p.Preimage != ([32]byte{}) {
		v.Preimage = hex.EncodeToString(p.Preimage[:])
	}
	return v
}

// neverStaked reports whether a stake p, cancelled, never was at stake. On
// the provider, its payment failed on its way (no route, too little
// balance, a macaroon that cannot pay); a stake the client returned ends
// in lnd's word for a cancelled hold invoice. On the client, whose
// returns carry no note, the replica ended before the provider paid it.
func neverStaked(p *store.Payment) bool {
	if !p.Outgoing {
		return p.Error != ""
	}
	return p.Error != "" && !strings.Contains(p.Error, cancelledHold)
}
