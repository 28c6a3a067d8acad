package payments

import (
	"context"
	"time"
)

// Lightning is what a node asks of its Lightning node: hold invoices for
// escrow, plain invoices for fair exchange, payments and their outcome, and
// balances. *Client implements it over lnd's gRPC API; paymentstest.Network
// has a fake for the paths a regtest network cannot reach. Every method
// returns an error wrapping ErrUnavailable when the Lightning node cannot
// be reached (the call may be retried), ErrUnknown when it has no such
// invoice or payment.
type Lightning interface {
	// Ready checks that the node answers and can pay (an active channel).
	Ready(ctx context.Context) error
	// ChannelBalance returns what the node can spend in its channels
	// (Local; payments locked in flight are not counted) and what its
	// peers can (Remote).
	ChannelBalance(ctx context.Context) (Balance, error)

	// AddHoldInvoice issues an invoice for amtMsat whose payment hash the
	// payer chose; a payment to it stays locked (InvoiceAccepted) until
	// Settle or Cancel. expiry bounds how long it may be paid.
	AddHoldInvoice(ctx context.Context, hash [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error)
	// AddInvoice issues an ordinary invoice whose preimage the payee chose:
	// paying it settles it at once and reveals the preimage to the payer.
	AddInvoice(ctx context.Context, preimage [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error)
	// WaitAccepted blocks until the invoice of hash is paid and locked (or
	// settled) and returns the amount paid; ErrCanceled if it was
	// cancelled.
	WaitAccepted(ctx context.Context, hash [32]byte) (int64, error)
	// InvoiceState returns the state of this node's invoice of hash.
	InvoiceState(ctx context.Context, hash [32]byte) (InvoiceState, error)
	// Settle takes a locked payment with its preimage; the invoice is the
	// one whose hash the preimage has (ErrUnknown if none).
	Settle(ctx context.Context, preimage [32]byte) error
	// Cancel cancels the invoice of hash; a locked payment returns to the
	// payer. A settled invoice cannot be cancelled.
	Cancel(ctx context.Context, hash [32]byte) error

	// CheckInvoice decodes a payment request and checks it against the
	// terms (see Client.CheckInvoice); it returns the invoice's amount, or
	// an error wrapping ErrMismatch.
	CheckInvoice(ctx context.Context, payReq string, hash [32]byte, maxMsat int64) (int64, error)
	// Pay pays payReq and returns once the payment is locked in flight or
	// has ended (see Client.Pay and Payment). It returns a nil Payment when
	// the call itself failed and nothing was sent.
	Pay(ctx context.Context, payReq string, feeLimitMsat int64, timeout time.Duration) (*Payment, error)
	// Track follows a payment this node made before, by hash (after a
	// restart, or once the node is reachable again).
	Track(ctx context.Context, hash [32]byte) (*Payment, error)

	// Close releases the connection to the node.
	Close() error
}

// InvoiceState is where an invoice stands, as lnd names it.
type InvoiceState int

const (
	// InvoiceOpen: issued, not paid.
	InvoiceOpen InvoiceState = iota
	// InvoiceAccepted: a hold invoice's payment is locked, waiting for
	// Settle or Cancel.
	InvoiceAccepted
	// InvoiceSettled: the payee has the money.
	InvoiceSettled
	// InvoiceCanceled: cancelled, or expired; a locked payment went back.
	InvoiceCanceled
)

func (s InvoiceState) String() string {
	switch s {
	case InvoiceOpen:
		return "open"
	case InvoiceAccepted:
		return "accepted"
	case InvoiceSettled:
		return "settled"
	case InvoiceCanceled:
		return "canceled"
	}
	return "unknown"
}

// *Client is the Lightning of a node with lnd.
var _ Lightning = (*Client)(nil)
