package reach

import (
	"sync/atomic"
	"time"

	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
)

// Usage counts what this node's relay service spends on others; it is the
// relay's metrics tracer. The zero value is ready.
type Usage struct {
	active                      atomic.Bool
	reservations, open          atomic.Int64 // held now
	reserved, circuits, refused atomic.Int64 // ever
	atLimits, noSlot            atomic.Int64 // of refused
	bytes                       atomic.Int64
}

// UsageStats is a snapshot of Usage.
type UsageStats struct {
	// Active says whether the relay service runs (it waits for the node
	// to be publicly reachable).
	Active bool
	// Reservations and Circuits are held now; Reserved, Opened and
	// Refused (reservations and circuits refused) count since start;
	// Bytes are the bytes relayed.
	Reservations, Circuits, Reserved, Opened, Refused, Bytes int64
	// Of Refused: AtLimits were over this relay's limits (the operator's
	// to raise); NoSlot were circuits to peers that hold no reservation
	// here (most often a relayed address of a peer since gone: harmless).
	AtLimits, NoSlot int64
}

// Stats returns the counts now.
func (u *Usage) Stats() UsageStats {
	return UsageStats{Active: u.active.Load(), Reservations: u.reservations.Load(), Circuits: u.open.Load(),
		Reserved: u.reserved.Load(), Opened: u.circuits.Load(), Refused: u.refused.Load(), Bytes: u.bytes.Load(),
		AtLimits: u.atLimits.Load(), NoSlot: u.noSlot.Load()}
}

// refuse counts a refusal of status s.
func (u *Usage) refuse(s pbv2.Status) {
	u.refused.Add(1)
	switch s {
	case pbv2.Status_RESOURCE_LIMIT_EXCEEDED, pbv2.Status_RESERVATION_REFUSED:
		u.atLimits.Add(1)
	case pbv2.Status_NO_RESERVATION:
		u.noSlot.Add(1)
	}
}

// RelayStatus implements relay.MetricsTracer.
func (u *Usage) RelayStatus(enabled bool) { u.active.Store(enabled) }

// ConnectionOpened implements relay.MetricsTracer.
func (u *Usage) ConnectionOpened() { u.open.Add(1); u.circuits.Add(1) }

// ConnectionClosed implements relay.MetricsTracer.
func (u *Usage) ConnectionClosed(time.Duration) { u.open.Add(-1) }

// ConnectionRequestHandled implements relay.MetricsTracer.
func (u *Usage) ConnectionRequestHandled(s pbv2.Status) {
	if s != pbv2.Status_OK {
		u.refuse(s)
	}
}

// ReservationAllowed implements relay.MetricsTracer.
func (u *Usage) ReservationAllowed(renewal bool) {
	if !renewal {
		u.reservations.Add(1)
		u.reserved.Add(1)
	}
}

// ReservationClosed implements relay.MetricsTracer.
func (u *Usage) ReservationClosed(n int) { u.reservations.Add(-int64(n)) }

// ReservationRequestHandled implements relay.MetricsTracer.
func (u *Usage) ReservationRequestHandled(s pbv2.Status) {
	if s != pbv2.Status_OK {
		u.refuse(s)
	}
}

// BytesTransferred implements relay.MetricsTracer.
func (u *Usage) BytesTransferred(n int) { u.bytes.Add(int64(n)) }
