//go:build regtest

package payments

import (
	"context"

	"github.com/lightningnetwork/lnd/lnrpc/invoicesrpc"
)

// AddHoldInvoiceRequest issues a hold invoice exactly as req asks, as a
// hostile provider may (tests only).
func (c *Client) AddHoldInvoiceRequest(ctx context.Context, req *invoicesrpc.AddHoldInvoiceRequest) (string, error) {
	resp, err := c.inv.AddHoldInvoice(ctx, req)
	if err != nil {
		return "", rpcError("add hold invoice", err)
	}
	return resp.PaymentRequest, nil
}
