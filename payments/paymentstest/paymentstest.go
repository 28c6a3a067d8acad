// Package paymentstest is a FAKE Lightning network standing in for lnd in
// unit tests, for the paths of escrow and settlement that a real regtest
// network (payments/regtest, build tag regtest) cannot reach on demand: a
// node that stops between a hold and its settlement, an lnd that goes away
// in the middle of a settlement, a call that fails at a chosen moment.
// Everything else about payments is tested on regtest; do not use this
// package where a real lnd can do.
//
// A Network is one in-memory ledger shared by fake nodes, each of which
// implements payments.Lightning as lnd behaves through *payments.Client:
// hold invoices go open -> accepted when paid (the payer's funds locked) ->
// settled (with the preimage of their hash) or cancelled (the funds back);
// plain invoices settle when paid and reveal their preimage to the payer.
// Payment requests are not BOLT 11: they are readable strings only this
// package decodes.
package paymentstest

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lightningnetwork/lnd/lnrpc"

	"github.com/infernet/infernet/payments"
)

// Op names a call of payments.Lightning, for hooks (Node.SetHook).
type Op string

// The calls of payments.Lightning.
const (
	OpReady          Op = "Ready"
	OpChannelBalance Op = "ChannelBalance"
	OpAddHoldInvoice Op = "AddHoldInvoice"
	OpAddInvoice     Op = "AddInvoice"
	OpWaitAccepted   Op = "WaitAccepted"
	OpInvoiceState   Op = "InvoiceState"
	OpSettle         Op = "Settle"
	OpCancel         Op = "Cancel"
	OpCheckInvoice   Op = "CheckInvoice"
	OpPay            Op = "Pay"
	OpTrack          Op = "Track"
)

// plainCltv is the final CLTV delta of plain invoices, lnd's default.
const plainCltv = 80

// Network is a fake Lightning network: fake nodes and one ledger of their
// balances, invoices and payments. It is safe for concurrent use.
type Network struct {
	mu       sync.Mutex
	changed  chan struct{}    // closed and replaced at every change; guarded by mu
	nodes    map[string]*Node // guarded by mu
	invoices map[ref]*invoice // by payee; guarded by mu
	payments map[ref]*payment // by payer; guarded by mu
}

// ref names an invoice (by its payee) or a payment (by its payer).
type ref struct {
	node string
	hash [32]byte
}

type invoice struct {
	hash     [32]byte
	preimage [32]byte // a plain invoice's from the start, a hold invoice's once settled
	hold     bool
	amount   int64
	state    payments.InvoiceState
	created  time.Time
	expiry   time.Duration
	cltv     int64
	payer    string // once paid
}

type payStatus int

const (
	inFlight payStatus = iota
	succeeded
	failed
)

type payment struct {
	payee    string
	amount   int64
	status   payStatus
	preimage [32]byte
	reason   string // why it failed
}

// New returns an empty fake network.
func New() *Network {
	return &Network{changed: make(chan struct{}), nodes: map[string]*Node{},
		invoices: map[ref]*invoice{}, payments: map[ref]*payment{}}
}

// NewNode adds a fake node named name (unique in the network) whose
// channels hold localMsat it can spend and remoteMsat it can receive.
func (net *Network) NewNode(name string, localMsat, remoteMsat int64) *Node {
	net.mu.Lock()
	defer net.mu.Unlock()
	if net.nodes[name] != nil {
		panic("paymentstest: two nodes named " + name)
	}
	n := &Node{net: net, name: name, local: localMsat, remote: remoteMsat}
	net.nodes[name] = n
	return n
}

// Locked is what payments locked in flight hold, network-wide.
func (net *Network) Locked() int64 {
	net.mu.Lock()
	defer net.mu.Unlock()
	var sum int64
	for _, p := range net.payments {
		if p.status == inFlight {
			sum += p.amount
		}
	}
	return sum
}

// changedLocked wakes everyone waiting on a change; mu is held.
func (net *Network) changedLocked() {
	close(net.changed)
	net.changed = make(chan struct{})
}

// Node is a fake lnd in a Network; it implements payments.Lightning.
type Node struct {
	net  *Network
	name string

	// Guarded by net.mu.
	local, remote int64
	gone          bool
	hook          func(context.Context, Op) error
	// routeFails, when set, is the failure reason of every payment this
	// node makes, reported a moment after Pay returned it in flight.
	routeFails string
}

// SetRouteFails makes every later payment of the node fail on its way
// with reason (FAILURE_REASON_NO_ROUTE, say) a moment after Pay returns it
// in flight, never reaching its payee: as lnd reports a payment locked at
// its first HTLC, whose route then fails. "" turns it off.
func (n *Node) SetRouteFails(reason string) {
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	n.routeFails = reason
}

var _ payments.Lightning = (*Node)(nil)

// Name is the node's name in its network.
func (n *Node) Name() string { return n.name }

// SetGone makes every call of the node fail with an error wrapping
// payments.ErrUnavailable, and ends what its callers wait on (WaitAccepted,
// payments followed) the same way, until SetGone(false): as when lnd's RPC
// is cut off. Its channels stay in the network: invoices it issued can be
// paid, and payments it made can be settled, while it is gone.
func (n *Node) SetGone(gone bool) {
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	n.gone = gone
	n.net.changedLocked()
}

// SetHook makes every later call of the node run hook first, outside the
// network's lock, with the call's context: an error fails the call with
// it, and a hook may block (stop the caller at a chosen call) or call
// SetGone. nil removes it.
func (n *Node) SetHook(hook func(ctx context.Context, op Op) error) {
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	n.hook = hook
}

// Funds is the node's balance as the ledger has it, gone or not.
func (n *Node) Funds() payments.Balance {
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	return payments.Balance{Local: n.local, Remote: n.remote}
}

// Invoice is an invoice as the ledger has it.
type Invoice struct {
	State      payments.InvoiceState
	AmountMsat int64
	Hold       bool
	// Payer is the node that paid it, "" while open.
	Payer string
}

// Invoice returns the node's invoice of hash, gone or not.
func (n *Node) Invoice(hash [32]byte) (Invoice, bool) {
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	inv := n.net.invoices[ref{n.name, hash}]
	if inv == nil {
		return Invoice{}, false
	}
	n.expireLocked(inv)
	return Invoice{State: inv.state, AmountMsat: inv.amount, Hold: inv.hold, Payer: inv.payer}, true
}

// enter starts a call: the hook, then the node's availability.
func (n *Node) enter(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		// As payments.Client's call to lnd: a call made with a context
		// that ended fails without reaching it, lnd unavailable.
		return fmt.Errorf("%w: %s: %w", payments.ErrUnavailable, op, err)
	}
	n.net.mu.Lock()
	hook := n.hook
	n.net.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, op); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	return n.availableLocked(op)
}

func (n *Node) availableLocked(op Op) error {
	if n.gone {
		return fmt.Errorf("%w: %s: fake lnd %s is gone", payments.ErrUnavailable, op, n.name)
	}
	return nil
}

// await blocks until done (called with mu held) reports true, the node
// goes away, or ctx ends.
func (n *Node) await(ctx context.Context, op Op, done func() bool) error {
	for {
		n.net.mu.Lock()
		if err := n.availableLocked(op); err != nil {
			n.net.mu.Unlock()
			return err
		}
		if done() {
			n.net.mu.Unlock()
			return nil
		}
		ch := n.net.changed
		n.net.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", payments.ErrUnavailable, op, ctx.Err())
		}
	}
}

// expireLocked cancels an open invoice past its expiry, as lnd does.
func (n *Node) expireLocked(inv *invoice) {
	if inv.state == payments.InvoiceOpen && time.Now().After(inv.created.Add(inv.expiry)) {
		inv.state = payments.InvoiceCanceled
	}
}

// Ready implements payments.Lightning: a node with no funds on either side
// has no channel.
func (n *Node) Ready(ctx context.Context) error {
	if err := n.enter(ctx, OpReady); err != nil {
		return err
	}
	if b := n.Funds(); b.Local+b.Remote == 0 {
		return fmt.Errorf("%w: fake lnd %s has no active channel", payments.ErrUnavailable, n.name)
	}
	return nil
}

// ChannelBalance implements payments.Lightning.
func (n *Node) ChannelBalance(ctx context.Context) (payments.Balance, error) {
	if err := n.enter(ctx, OpChannelBalance); err != nil {
		return payments.Balance{}, err
	}
	return n.Funds(), nil
}

// AddHoldInvoice implements payments.Lightning.
func (n *Node) AddHoldInvoice(ctx context.Context, hash [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error) {
	if err := n.enter(ctx, OpAddHoldInvoice); err != nil {
		return "", err
	}
	return n.addInvoice(&invoice{hash: hash, hold: true, amount: amtMsat, expiry: expiry, cltv: payments.HoldCltv})
}

// AddInvoice implements payments.Lightning.
func (n *Node) AddInvoice(ctx context.Context, preimage [32]byte, amtMsat int64, expiry time.Duration, memo string) (string, error) {
	if err := n.enter(ctx, OpAddInvoice); err != nil {
		return "", err
	}
	return n.addInvoice(&invoice{hash: payments.Hash(preimage), preimage: preimage, amount: amtMsat, expiry: expiry, cltv: plainCltv})
}

func (n *Node) addInvoice(inv *invoice) (string, error) {
	inv.created = time.Now().Truncate(time.Second) // a payment request's timestamp has seconds
	inv.expiry = inv.expiry.Truncate(time.Second)
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	k := ref{n.name, inv.hash}
	if n.net.invoices[k] != nil {
		return "", fmt.Errorf("add invoice: invoice with payment hash %x already exists", inv.hash[:4])
	}
	n.net.invoices[k] = inv
	n.net.changedLocked()
	return encode(n.name, inv), nil
}

// WaitAccepted implements payments.Lightning.
func (n *Node) WaitAccepted(ctx context.Context, hash [32]byte) (int64, error) {
	if err := n.enter(ctx, OpWaitAccepted); err != nil {
		return 0, err
	}
	var inv *invoice
	err := n.await(ctx, OpWaitAccepted, func() bool {
		inv = n.net.invoices[ref{n.name, hash}]
		if inv != nil {
			n.expireLocked(inv)
		}
		return inv == nil || inv.state != payments.InvoiceOpen
	})
	switch {
	case err != nil:
		return 0, err
	case inv == nil:
		return 0, fmt.Errorf("%w: subscribe invoice %x", payments.ErrUnknown, hash[:4])
	case inv.state == payments.InvoiceCanceled:
		return 0, payments.ErrCanceled
	}
	return inv.amount, nil
}

// InvoiceState implements payments.Lightning.
func (n *Node) InvoiceState(ctx context.Context, hash [32]byte) (payments.InvoiceState, error) {
	if err := n.enter(ctx, OpInvoiceState); err != nil {
		return 0, err
	}
	inv, ok := n.Invoice(hash)
	if !ok {
		return 0, fmt.Errorf("%w: lookup invoice: unable to locate invoice", payments.ErrUnknown)
	}
	return inv.State, nil
}

// Settle implements payments.Lightning: the preimage names the invoice by
// its hash, so a wrong one finds none. Settling a settled invoice again is
// a no-op, as in lnd.
func (n *Node) Settle(ctx context.Context, preimage [32]byte) error {
	if err := n.enter(ctx, OpSettle); err != nil {
		return err
	}
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	hash := payments.Hash(preimage)
	inv := n.net.invoices[ref{n.name, hash}]
	if inv == nil {
		return fmt.Errorf("%w: settle invoice: unable to locate invoice", payments.ErrUnknown)
	}
	n.expireLocked(inv)
	switch {
	case !inv.hold:
		return fmt.Errorf("settle invoice: invoice %x is not a hold invoice", hash[:4])
	case inv.state == payments.InvoiceSettled:
		return nil
	case inv.state != payments.InvoiceAccepted:
		return fmt.Errorf("settle invoice: invoice %x is %s", hash[:4], inv.state)
	}
	inv.preimage = preimage
	n.net.settleLocked(n, inv)
	return nil
}

// settleLocked moves a paid invoice's money from its payer to payee and
// ends the payment; the payer's funds left its balance when it paid.
func (net *Network) settleLocked(payee *Node, inv *invoice) {
	inv.state = payments.InvoiceSettled
	payee.local += inv.amount
	net.nodes[inv.payer].remote += inv.amount
	p := net.payments[ref{inv.payer, inv.hash}]
	p.status, p.preimage = succeeded, inv.preimage
	net.changedLocked()
}

// Cancel implements payments.Lightning. Cancelling a cancelled invoice is
// a no-op, as in lnd; a settled one cannot be cancelled.
func (n *Node) Cancel(ctx context.Context, hash [32]byte) error {
	if err := n.enter(ctx, OpCancel); err != nil {
		return err
	}
	n.net.mu.Lock()
	defer n.net.mu.Unlock()
	inv := n.net.invoices[ref{n.name, hash}]
	if inv == nil {
		return fmt.Errorf("%w: cancel invoice: unable to locate invoice", payments.ErrUnknown)
	}
	n.expireLocked(inv)
	switch inv.state {
	case payments.InvoiceSettled:
		return fmt.Errorf("cancel invoice: invoice %x already settled", hash[:4])
	case payments.InvoiceAccepted:
		payer := n.net.nodes[inv.payer]
		payer.local += inv.amount
		n.remote += inv.amount
		p := n.net.payments[ref{inv.payer, hash}]
		p.status, p.reason = failed, "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"
	}
	inv.state = payments.InvoiceCanceled
	n.net.changedLocked()
	return nil
}

// CheckInvoice implements payments.Lightning with the checks of
// *payments.Client (payments.CheckPayReq).
func (n *Node) CheckInvoice(ctx context.Context, payReq string, hash [32]byte, maxMsat int64) (int64, error) {
	if err := n.enter(ctx, OpCheckInvoice); err != nil {
		return 0, err
	}
	d, err := decode(payReq)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", payments.ErrMismatch, err)
	}
	return payments.CheckPayReq(&lnrpc.PayReq{PaymentHash: hex.EncodeToString(d.hash[:]), NumMsat: d.amount,
		Timestamp: d.timestamp, Expiry: d.expiry, CltvExpiry: d.cltv}, hash, maxMsat, time.Now())
}

// Pay implements payments.Lightning. A payment fails (an error wrapping
// payments.ErrCanceled, nothing locked) when the invoice is unknown, paid,
// cancelled or expired, when the payer's balance or the payee's inbound
// capacity is short; a hold invoice's payment stays locked until the payee
// settles or cancels it. A hash this node paid or is paying cannot be paid
// again.
func (n *Node) Pay(ctx context.Context, payReq string, feeLimitMsat int64, timeout time.Duration) (*payments.Payment, error) {
	if err := n.enter(ctx, OpPay); err != nil {
		return nil, err
	}
	d, err := decode(payReq)
	if err != nil {
		return nil, fmt.Errorf("send payment: %w", err)
	}
	n.net.mu.Lock()
	k := ref{n.name, d.hash}
	if old := n.net.payments[k]; old != nil && old.status != failed {
		n.net.mu.Unlock()
		return ended(fmt.Errorf("payment updates: payment of %x is in transition or succeeded", d.hash[:4])), nil
	}
	p := &payment{payee: d.payee, amount: d.amount}
	n.net.payments[k] = p
	inv := n.net.invoices[ref{d.payee, d.hash}]
	payee := n.net.nodes[d.payee]
	if inv != nil {
		n.expireLocked(inv)
	}
	switch {
	case n.routeFails != "":
		p.status = inFlight
		reason := n.routeFails
		time.AfterFunc(50*time.Millisecond, func() {
			n.net.mu.Lock()
			defer n.net.mu.Unlock()
			p.status, p.reason = failed, reason
			n.net.changedLocked()
		})
	case inv == nil || inv.amount != d.amount || inv.state != payments.InvoiceOpen:
		p.status, p.reason = failed, "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"
	case n.local < d.amount:
		p.status, p.reason = failed, "FAILURE_REASON_INSUFFICIENT_BALANCE"
	case payee.remote < d.amount:
		p.status, p.reason = failed, "FAILURE_REASON_NO_ROUTE"
	default:
		n.local -= d.amount
		payee.remote -= d.amount
		inv.payer = n.name
		inv.state = payments.InvoiceAccepted
		if !inv.hold {
			n.net.settleLocked(payee, inv)
		}
	}
	n.net.changedLocked()
	n.net.mu.Unlock()
	return n.follow(ctx, p)
}

// Track implements payments.Lightning.
func (n *Node) Track(ctx context.Context, hash [32]byte) (*payments.Payment, error) {
	if err := n.enter(ctx, OpTrack); err != nil {
		return nil, err
	}
	n.net.mu.Lock()
	p := n.net.payments[ref{n.name, hash}]
	n.net.mu.Unlock()
	if p == nil {
		err := fmt.Errorf("%w: payment updates: payment isn't initiated", payments.ErrUnknown)
		return ended(err), err
	}
	return n.follow(ctx, p)
}

// Close implements payments.Lightning; the fake node stays in its network.
func (n *Node) Close() error { return nil }

// ended is a payment that could not be followed, for err.
func ended(err error) *payments.Payment {
	done := make(chan struct{})
	close(done)
	return &payments.Payment{Done: done, Err: err}
}

// follow returns p as lnd's payment stream shows it: at once when it has
// ended or is locked in flight, then Done at its end, or when the node
// goes away or ctx ends (ErrUnavailable: the outcome is not known).
func (n *Node) follow(ctx context.Context, p *payment) (*payments.Payment, error) {
	done := make(chan struct{})
	out := &payments.Payment{Done: done}
	end := func() { // mu is held
		switch p.status {
		case succeeded:
			out.Preimage = p.preimage
		case failed:
			out.Err = fmt.Errorf("%w: %s", payments.ErrCanceled, p.reason)
			if p.reason == "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS" { // as lnd's client says it
				out.Err = fmt.Errorf("%w (%w): %s", payments.ErrCanceled, payments.ErrPayeeCanceled, p.reason)
			}
		}
	}
	n.net.mu.Lock()
	final := p.status != inFlight
	if final {
		end()
	}
	n.net.mu.Unlock()
	if final {
		close(done)
		return out, out.Err
	}
	go func() {
		defer close(done)
		err := n.await(ctx, "payment updates", func() bool {
			if p.status != inFlight {
				end()
				return true
			}
			return false
		})
		if err != nil {
			out.Err = err
		}
	}()
	return out, nil
}

// decoded is a fake payment request's fields.
type decoded struct {
	payee             string
	hash              [32]byte
	amount            int64
	timestamp, expiry int64
	cltv              int64
}

const prefix = "lnfake1"

// encode writes a payment request for inv of payee.
func encode(payee string, inv *invoice) string {
	return strings.Join([]string{prefix, payee, hex.EncodeToString(inv.hash[:]), strconv.FormatInt(inv.amount, 10),
		strconv.FormatInt(inv.created.Unix(), 10), strconv.FormatInt(int64(inv.expiry.Seconds()), 10),
		strconv.FormatInt(inv.cltv, 10)}, ":")
}

// decode reads a payment request that encode wrote.
func decode(s string) (decoded, error) {
	var d decoded
	f := strings.Split(s, ":")
	if len(f) != 7 || f[0] != prefix {
		return d, fmt.Errorf("not a fake payment request: %.20q", s)
	}
	d.payee = f[1]
	h, err := hex.DecodeString(f[2])
	if err != nil || len(h) != 32 {
		return d, fmt.Errorf("payment hash %q", f[2])
	}
	copy(d.hash[:], h)
	for i, v := range []*int64{&d.amount, &d.timestamp, &d.expiry, &d.cltv} {
		if *v, err = strconv.ParseInt(f[3+i], 10, 64); err != nil {
			return d, fmt.Errorf("field %d: %w", 3+i, err)
		}
	}
	return d, nil
}
