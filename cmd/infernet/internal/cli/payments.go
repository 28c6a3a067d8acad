package cli

import (
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
			c, err := api.Dial(o.DataDir, o.API)
			if err != nil {
				return err
			}
			all, err := c.Payments(cmd.Context())
			if err != nil {
				return err
			}
			var ps []store.Payment
			for _, p := range all {
				if p.Outgoing == outgoing {
					ps = append(ps, p)
				}
			}
			if o.JSON {
				return printJSON(stdio, ps)
			}
			tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tREPLICA\tPEER\tSTATE\tAMOUNT\tFEE\tWHEN\tNOTE")
			var settled, held int64
			for _, p := range ps {
				switch p.State {
				case store.PaySettled:
					settled += p.AmountMsat
				case store.PayLocked, store.PayReleasing, store.PayPaying:
					held += p.AmountMsat
				}
				note := oneLine(p.Error)
				switch {
				case p.Fair:
					note = strings.TrimSpace("fair exchange " + note)
				case p.Aggregate:
					note = strings.TrimSpace("whole job via an aggregator " + note)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d msat\t%d msat\t%s\t%s\n", p.Job, p.Replica, shortID(p.Peer), p.State,
					p.AmountMsat, p.FeeMsat, p.Updated.Format(time.DateTime), note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "settled %d msat, held in escrow %d msat\n", settled, held)
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}
