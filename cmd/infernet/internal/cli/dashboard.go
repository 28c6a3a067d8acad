package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// NewCmdDashboard returns `infernet dashboard`.
func NewCmdDashboard(stdio IO) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Print a login link to the local node's web dashboard",
		Long: `Print a one-time login link to the dashboard of the local node (infernet
node): its status, peers with their reputation and why, jobs with live
per-shard and per-replica progress, runs for others, earnings and spending
over time, and training runs round by round. The link works once, within
two minutes, on this machine only (the API listens on loopback); opening it
starts a browser session of 12 hours.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dialNode(stdio.Err, o.DataDir, o.API)
			if err != nil {
				return err
			}
			url, exp, err := c.DashboardURL(cmd.Context())
			if err != nil {
				return err
			}
			if o.JSON {
				return printJSON(stdio, struct {
					URL     string    `json:"url"`
					Expires time.Time `json:"expires"`
				}{url, exp})
			}
			fmt.Fprintln(stdio.Out, url)
			fmt.Fprintf(stdio.Err, "open it within %v: it works once\n", time.Until(exp).Round(time.Second))
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}
