// Package payments settles infernet jobs over Lightning through lnd's gRPC
// API: hold invoices for escrow (the client picks the preimage, the provider
// issues an invoice for its hash, the client's payment stays locked until
// the client reveals the preimage after verification, or is cancelled), and
// the balances that show what moved. A node without lnd configured runs in
// free mode and never touches this package.
package payments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lightningnetwork/lnd/lnrpc"
	"github.com/lightningnetwork/lnd/lnrpc/invoicesrpc"
	"github.com/lightningnetwork/lnd/lnrpc/routerrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Config locates an lnd, with lncli's flag names.
type Config struct {
	// RPCServer is host:port of lnd's gRPC listener (--lnd.rpcserver).
	RPCServer string
	// TLSCertPath is lnd's tls.cert (--lnd.tlscertpath).
	TLSCertPath string
	// MacaroonPath is a macaroon with invoice and payment rights, usually
	// admin.macaroon (--lnd.macaroonpath).
	MacaroonPath string
}

// Enabled reports whether lnd is configured; without it a node runs free.
func (c Config) Enabled() bool { return c.RPCServer != "" }

var (
	// ErrUnavailable: lnd cannot be reached or refused the connection.
	ErrUnavailable = errors.New("lnd unavailable")
	// ErrCanceled: the invoice was cancelled, or the payment failed and the
	// payer's funds are back.
	ErrCanceled = errors.New("payment canceled")
	// ErrPayeeCanceled is in the chain of a payment's ErrCanceled when the
	// payee cancelled its (hold) invoice, not a failure on the way.
	ErrPayeeCanceled = errors.New("the payee canceled the invoice")
	// ErrMismatch: an invoice does not carry the hash or amount agreed, or
	// asks for more than a payer accepts (see CheckInvoice).
	ErrMismatch = errors.New("invoice does not match the terms")
	// ErrUnknown: lnd has no record of the payment or invoice.
	ErrUnknown = errors.New("unknown to lnd")
)

// rpcError wraps an error of a call to lnd with what it means to a caller:
// ErrUnavailable when lnd could not be reached (the call may be retried),
// ErrUnknown when lnd has no such payment or invoice.
func rpcError(op string, err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
	case codes.NotFound:
		return fmt.Errorf("%w: %s: %v", ErrUnknown, op, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
	}
	// lnd reports some lookups of unknown hashes as plain errors.
	if m := err.Error(); strings.Contains(m, "unable to locate invoice") || strings.Contains(m, "there are no existing invoices") {
		return fmt.Errorf("%w: %s: %v", ErrUnknown, op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Client is a connection to one lnd. It is safe for concurrent use.
type Client struct {
	conn   *grpc.ClientConn
	ln     lnrpc.LightningClient
	inv    invoicesrpc.InvoicesClient
	router routerrpc.RouterClient
	// Pubkey is the node's Lightning identity.
	Pubkey string
}

// macaroonCred sends the macaroon with every call, as lncli does.
type macaroonCred string

func (m macaroonCred) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"macaroon": string(m)}, nil
}
func (macaroonCred) RequireTransportSecurity() bool { return true }

// Dial connects to lnd and checks that it answers and is synced enough to
// be used (GetInfo).
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	var missing []string
	if cfg.TLSCertPath == "" {
		missing = append(missing, "its tls.cert (--lnd.tlscertpath)")
	}
	if cfg.MacaroonPath == "" {
		missing = append(missing, "a macaroon (--lnd.macaroonpath, admin.macaroon, or one with invoice and offchain rights: a client pays prices and a provider stakes collateral)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: lnd at %s needs %s", ErrUnavailable, cfg.RPCServer, strings.Join(missing, " and "))
	}
	tlsCreds, err := credentials.NewClientTLSFromFile(cfg.TLSCertPath, "")
	if err != nil {
		return nil, fmt.Errorf("%w: tls cert: %v", ErrUnavailable, err)
	}
	mac, err := os.ReadFile(cfg.MacaroonPath)
	if err != nil {
		return nil, fmt.Errorf("%w: macaroon: %v", ErrUnavailable, err)
	}
	conn, err := grpc.NewClient(cfg.RPCServer,
		grpc.WithTransportCredentials(tlsCreds),
		// Reconnect within seconds once an lnd that went away is back
		// (grpc's default backoff grows to two minutes).
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second,
		}, MinConnectTimeout: 5 * time.Second}),
		grpc.WithPerRPCCredentials(macaroonCred(hex.EncodeToString(mac))),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(50<<20)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c := &Client{conn: conn, ln: lnrpc.NewLightningClient(conn), inv: invoicesrpc.NewInvoicesClient(conn), router: routerrpc.NewRouterClient(conn)}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := c.ln.GetInfo(ictx, &lnrpc.GetInfoRequest{})
	if denied(err) {
		err = fmt.Errorf("%v: the macaroon %s cannot read lnd's info (info:read): use admin.macaroon", err, cfg.MacaroonPath)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, cfg.RPCServer, err)
	}
	if err := c.rights(ictx, cfg.MacaroonPath); err != nil {
		conn.Close()
		return nil, err
	}
	c.Pubkey = info.IdentityPubkey
	return c, nil
}

// ErrRights: lnd's macaroon lacks a right a node needs.
var ErrRights = errors.New("lnd macaroon lacks rights")

// rights checks that the macaroon at path lets a node create hold
// invoices (a provider's price, a client's collateral) and pay (a client's
// price, a provider's stake). lnd checks a call's macaroon before its
// request, so requests that are not valid (no hash, no invoice) answer
// "permission denied" without the right and a refusal of the request with
// it, and create nothing.
func (c *Client) rights(ctx context.Context, path string) error {
	var missing []string
	if _, err := c.inv.AddHoldInvoice(ctx, &invoicesrpc.AddHoldInvoiceRequest{}); denied(err) {
		missing = append(missing, "create invoices (invoices:write)")
	}
	st, err := c.router.SendPaymentV2(ctx, &routerrpc.SendPaymentRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if denied(err) {
		missing = append(missing, "pay (offchain:write)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the macaroon %s cannot %s: use admin.macaroon, or bake one with invoices:write, offchain:write and info:read", ErrRights, path, strings.Join(missing, " or "))
	}
	return nil
}

// denied reports whether err is lnd's refusal of a call its macaroon does
// not allow.
func denied(err error) bool {
	return err != nil && (status.Code(err) == codes.PermissionDenied || strings.Contains(err.Error(), "permission denied"))
}

// Ready checks that lnd answers (ErrUnavailable if not) and can pay: it
// has an active channel. An lnd that is reconnecting gets 5 seconds.
func (c *Client) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.ln.GetInfo(ctx, &lnrpc.GetInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return rpcError("get info", err)
	}
	if info.NumActiveChannels == 0 {
		return fmt.Errorf("%w: lnd %s has no active channel", ErrUnavailable, info.Alias)
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Hash returns the payment hash of a preimage.
func Hash(preimage [32]byte) [32]byte { return sha256.Sum256(preimage[:]) }

// HoldCltv is the final CLTV delta of hold invoices, in blocks: the longest
// a payer's funds stay locked if the payee vanishes, since lnd cancels a held
// payment 12 blocks before its HTLC expires (about 4.7 hours on mainnet;
// lnd's default for invoices is 80 blocks).
const HoldCltv = 40

// AddHoldInvoice issues an invoice for amtMsat whose payment hash the payer
// chose; payments to it stay locked until Settle or Cancel, or until lnd
// cancels them near the HTLC's expiry (see HoldCltv). expiry bounds how long
// the invoice may be paid.
func (c *Client) AddHoldInvoice(ctx context.Context, hash [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error) {
	resp, err := c.inv.AddHoldInvoice(ctx, &invoicesrpc.AddHoldInvoiceRequest{
		Memo: memo, Hash: hash[:], ValueMsat: amtMsat, Expiry: int64(expiry.Seconds()), CltvExpiry: HoldCltv,
	})
	if err != nil {
		return "", rpcError("add hold invoice", err)
	}
	return resp.PaymentRequest, nil
}

// AddInvoice issues an ordinary invoice for amtMsat whose preimage the payee
// chose: paying it reveals the preimage to the payer. In a fair exchange the
// preimage is the key that decrypts the output the payer is buying.
func (c *Client) AddInvoice(ctx context.Context, preimage [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error) {
	resp, err := c.ln.AddInvoice(ctx, &lnrpc.Invoice{
		Memo: memo, RPreimage: preimage[:], ValueMsat: amtMsat, Expiry: int64(expiry.Seconds()),
	})
	if err != nil {
		return "", rpcError("add invoice", err)
	}
	return resp.PaymentRequest, nil
}

// WaitAccepted blocks until the invoice of hash is paid and locked
// (ACCEPTED), returning the amount held; ErrCanceled if it was cancelled.
func (c *Client) WaitAccepted(ctx context.Context, hash [32]byte) (int64, error) {
	st, err := c.inv.SubscribeSingleInvoice(ctx, &invoicesrpc.SubscribeSingleInvoiceRequest{RHash: hash[:]})
	if err != nil {
		return 0, rpcError("subscribe invoice", err)
	}
	for {
		inv, err := st.Recv()
		if err != nil {
			return 0, rpcError(fmt.Sprintf("invoice %x", hash[:4]), err)
		}
		switch inv.State {
		case lnrpc.Invoice_ACCEPTED, lnrpc.Invoice_SETTLED:
			return inv.AmtPaidMsat, nil
		case lnrpc.Invoice_CANCELED:
			return 0, ErrCanceled
		}
	}
}

// InvoiceState returns the state of the invoice of hash (for recovery).
func (c *Client) InvoiceState(ctx context.Context, hash [32]byte) (InvoiceState, error) {
	inv, err := c.inv.LookupInvoiceV2(ctx, &invoicesrpc.LookupInvoiceMsg{
		InvoiceRef: &invoicesrpc.LookupInvoiceMsg_PaymentHash{PaymentHash: hash[:]},
	})
	if err != nil {
		return 0, rpcError("lookup invoice", err)
	}
	switch inv.State {
	case lnrpc.Invoice_OPEN:
		return InvoiceOpen, nil
	case lnrpc.Invoice_ACCEPTED:
		return InvoiceAccepted, nil
	case lnrpc.Invoice_SETTLED:
		return InvoiceSettled, nil
	case lnrpc.Invoice_CANCELED:
		return InvoiceCanceled, nil
	}
	return 0, fmt.Errorf("lookup invoice: unknown state %v", inv.State)
}

// Settle releases a held payment with its preimage.
func (c *Client) Settle(ctx context.Context, preimage [32]byte) error {
	if _, err := c.inv.SettleInvoice(ctx, &invoicesrpc.SettleInvoiceMsg{Preimage: preimage[:]}); err != nil {
		return rpcError("settle invoice", err)
	}
	return nil
}

// Cancel cancels the invoice of hash; a held payment returns to the payer.
func (c *Client) Cancel(ctx context.Context, hash [32]byte) error {
	if _, err := c.inv.CancelInvoice(ctx, &invoicesrpc.CancelInvoiceMsg{PaymentHash: hash[:]}); err != nil {
		return rpcError("cancel invoice", err)
	}
	return nil
}

// MaxInvoiceCltv is the most blocks an invoice may ask a payment to stay
// locked for: its final CLTV delta, and, through each of its route hints
// or blinded paths, that delta plus the deltas of the hops the invoice
// names. A hold invoice's payee can keep a payment locked that long without
// settling or cancelling it. It is twice lnd's default final CLTV delta
// (bitcoin.timelockdelta, 80 blocks, what its plain invoices carry, as a
// fair exchange's invoice does), 160 blocks, about 27 hours on mainnet;
// this package's hold invoices ask for HoldCltv (40). lnd itself allows
// final deltas up to 65535 blocks and a payment's whole route up to 2016.
const MaxInvoiceCltv = 160

// MinInvoiceValidity is how long an invoice must stay payable, from the
// moment it is checked, to be accepted: enough to pay it right away with
// room for a clock difference between payer and payee. Honest providers'
// invoices outlive the job's deadline by at least a minute (a fair
// exchange's invoice; a hold invoice's by 10 minutes).
const MinInvoiceValidity = 30 * time.Second

// CheckInvoice decodes a payment request and checks that it pays hash and
// at most maxMsat, that it locks a payment for at most MaxInvoiceCltv
// blocks, and that it stays payable for at least MinInvoiceValidity. It
// returns the invoice's amount; an error wrapping ErrMismatch when it does
// not pass (ErrUnavailable when lnd cannot be reached).
func (c *Client) CheckInvoice(ctx context.Context, payReq string, hash [32]byte, maxMsat int64) (int64, error) {
	pr, err := c.ln.DecodePayReq(ctx, &lnrpc.PayReqString{PayReq: payReq})
	if err != nil {
		if err := rpcError("decode invoice", err); errors.Is(err, ErrUnavailable) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	return CheckPayReq(pr, hash, maxMsat, time.Now())
}

// CheckPayReq is CheckInvoice's checks of a decoded invoice at time now,
// for every implementation of Lightning to check invoices alike.
func CheckPayReq(pr *lnrpc.PayReq, hash [32]byte, maxMsat int64, now time.Time) (int64, error) {
	if pr.PaymentHash != hex.EncodeToString(hash[:]) {
		return 0, fmt.Errorf("%w: hash %s", ErrMismatch, pr.PaymentHash)
	}
	if pr.NumMsat > maxMsat || pr.NumMsat <= 0 {
		return 0, fmt.Errorf("%w: %d msat, agreed %d", ErrMismatch, pr.NumMsat, maxMsat)
	}
	if pr.CltvExpiry > MaxInvoiceCltv || pr.CltvExpiry < 0 {
		return 0, fmt.Errorf("%w: final CLTV delta of %d blocks, at most %d accepted", ErrMismatch, pr.CltvExpiry, MaxInvoiceCltv)
	}
	for _, rh := range pr.RouteHints {
		blocks := pr.CltvExpiry
		for _, h := range rh.HopHints {
			blocks += int64(h.CltvExpiryDelta)
		}
		if blocks > MaxInvoiceCltv {
			return 0, fmt.Errorf("%w: CLTV delta of %d blocks through a route hint (final %d), at most %d accepted", ErrMismatch, blocks, pr.CltvExpiry, MaxInvoiceCltv)
		}
	}
	for _, bp := range pr.BlindedPaths {
		if bp.TotalCltvDelta > MaxInvoiceCltv {
			return 0, fmt.Errorf("%w: CLTV delta of %d blocks through a blinded path, at most %d accepted", ErrMismatch, bp.TotalCltvDelta, MaxInvoiceCltv)
		}
	}
	// Seconds left, in int64 arithmetic: an expiry field of centuries
	// would overflow a time.Duration.
	left := pr.Timestamp + pr.Expiry - now.Unix()
	switch {
	case pr.Expiry <= 0 || left <= 0:
		return 0, fmt.Errorf("%w: invoice expired at %s", ErrMismatch, time.Unix(pr.Timestamp+max(pr.Expiry, 0), 0).UTC().Format(time.RFC3339))
	case left < int64(MinInvoiceValidity/time.Second):
		return 0, fmt.Errorf("%w: invoice payable for %ds more, at least %s needed", ErrMismatch, left, MinInvoiceValidity)
	}
	return pr.NumMsat, nil
}

// Payment is an outgoing payment in flight.
type Payment struct {
	// Done is closed when the payment has ended or can no longer be
	// followed; Err then says how: nil when settled (Preimage and FeeMsat
	// are valid), an error wrapping ErrCanceled when it failed and the funds
	// are back, ErrUnavailable when lnd went away and the outcome is not
	// known yet (Track it again later), ErrUnknown when lnd never had it.
	Done     <-chan struct{}
	Err      error
	Preimage [32]byte
	FeeMsat  int64
}

// Pay pays payReq in one part, spending at most feeLimitMsat in fees, and
// returns once the payment is locked in flight (for a hold invoice: until
// the payee settles or cancels) or has ended. timeout bounds the route
// search.
//
// One part, because a hold invoice paid in several holds the parts that
// arrived until the payee's MPP timeout (2 minutes) when the rest finds no
// route; a replica's price is small enough for one channel, and a price no
// channel can carry fails at once (FAILURE_REASON_NO_ROUTE).
func (c *Client) Pay(ctx context.Context, payReq string, feeLimitMsat int64, timeout time.Duration) (*Payment, error) {
	st, err := c.router.SendPaymentV2(ctx, &routerrpc.SendPaymentRequest{
		PaymentRequest: payReq, FeeLimitMsat: feeLimitMsat, TimeoutSeconds: int32(max(timeout.Seconds(), 1)),
		MaxParts: 1,
	})
	if err != nil {
		return nil, rpcError("send payment", err)
	}
	return c.follow(st)
}

// Track follows a payment made before (by hash), e.g. after a restart.
func (c *Client) Track(ctx context.Context, hash [32]byte) (*Payment, error) {
	st, err := c.router.TrackPaymentV2(ctx, &routerrpc.TrackPaymentRequest{PaymentHash: hash[:]})
	if err != nil {
		return nil, rpcError("track payment", err)
	}
	return c.follow(st)
}

// paymentStream is what SendPaymentV2 and TrackPaymentV2 return.
type paymentStream interface {
	Recv() (*lnrpc.Payment, error)
}

// follow reads payment updates: it returns at the first in-flight HTLC or
// the end, and delivers the end on Done.
func (c *Client) follow(st paymentStream) (*Payment, error) {
	done := make(chan struct{})
	p := &Payment{Done: done}
	locked := make(chan error, 1)
	go func() {
		defer close(done)
		signalled := false
		signal := func(err error) {
			if !signalled {
				signalled = true
				locked <- err
			}
		}
		for {
			u, err := st.Recv()
			if err != nil {
				p.Err = rpcError("payment updates", err)
				signal(p.Err)
				return
			}
			switch u.Status {
			case lnrpc.Payment_IN_FLIGHT:
				if len(u.Htlcs) > 0 {
					signal(nil)
				}
			case lnrpc.Payment_SUCCEEDED:
				b, _ := hex.DecodeString(u.PaymentPreimage)
				copy(p.Preimage[:], b)
				p.FeeMsat = u.FeeMsat
				signal(nil)
				return
			case lnrpc.Payment_FAILED:
				p.Err = fmt.Errorf("%w: %s", ErrCanceled, u.FailureReason)
				if u.FailureReason == lnrpc.PaymentFailureReason_FAILURE_REASON_INCORRECT_PAYMENT_DETAILS {
					// What a payer hears of a cancelled hold invoice.
					p.Err = fmt.Errorf("%w (%w): %s", ErrCanceled, ErrPayeeCanceled, u.FailureReason)
				}
				signal(p.Err)
				return
			}
		}
	}()
	return p, <-locked
}

// Balance is a node's Lightning funds in millisatoshi.
type Balance struct {
	// Local is what this node can spend in its channels, Remote what its
	// peers can.
	Local, Remote int64
}

// ChannelBalance returns the node's channel balances.
func (c *Client) ChannelBalance(ctx context.Context) (Balance, error) {
	b, err := c.ln.ChannelBalance(ctx, &lnrpc.ChannelBalanceRequest{})
	if err != nil {
		return Balance{}, rpcError("channel balance", err)
	}
	return Balance{Local: int64(b.LocalBalance.GetMsat()), Remote: int64(b.RemoteBalance.GetMsat())}, nil
}
