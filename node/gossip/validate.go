package gossip

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"

	"github.com/infernet/infernet/node/wire"
)

// verdict counts and returns a validation result. Reject is for provably
// malformed messages only (it costs the relaying peer score); everything
// else a well-behaved peer could have relayed is Ignore.
func (g *Gossip) verdict(v pubsub.ValidationResult, topic string, from peer.ID, why string) pubsub.ValidationResult {
	switch v {
	case pubsub.ValidationReject:
		g.rejected.Add(1)
		g.log.Debug("gossip rejected", "topic", topic, "from", from, "why", why)
	case pubsub.ValidationIgnore:
		g.ignored.Add(1)
		g.log.Debug("gossip ignored", "topic", topic, "from", from, "why", why)
	}
	return v
}

// decode applies the checks common to both topics: size, schema, version.
func (g *Gossip) decode(topic string, msg *pubsub.Message, m wire.Versioned) (pubsub.ValidationResult, bool) {
	from := msg.GetFrom()
	if err := wire.Unmarshal(msg.Data, wire.MaxGossipMessage, m); err != nil {
		// A newer version is not provably malformed; a missing one is.
		if errors.Is(err, wire.ErrVersion) && m.Version() > wire.Version {
			return g.verdict(pubsub.ValidationIgnore, topic, from, err.Error()), false
		}
		return g.verdict(pubsub.ValidationReject, topic, from, err.Error()), false
	}
	return pubsub.ValidationAccept, true
}

// fresh reports whether a timestamp is within MaxSkew of now.
func (g *Gossip) fresh(unixMilli int64) bool {
	d := g.cfg.Now().Sub(time.UnixMilli(unixMilli))
	return d <= g.cfg.MaxSkew && d >= -g.cfg.MaxSkew
}

// allow takes a token from the origin's bucket for the topic.
func (g *Gossip) allow(topic string, origin peer.ID) bool {
	key := topic + string(origin)
	v, ok := g.limiters.Load(key)
	if !ok {
		v, _ = g.limiters.LoadOrStore(key, &limiterEntry{lim: rate.NewLimiter(rate.Limit(g.cfg.Rate), g.cfg.Burst)})
	}
	e := v.(*limiterEntry)
	now := g.cfg.Now()
	e.used.Store(now.UnixNano())
	return e.lim.AllowN(now, 1)
}

func (g *Gossip) validateAnnounce(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	var m wire.JobAnnounce
	if v, ok := g.decode(TopicJobs, msg, &m); !ok {
		return v
	}
	origin := msg.GetFrom()
	if err := m.Validate(); err != nil {
		return g.verdict(pubsub.ValidationReject, TopicJobs, origin, err.Error())
	}
	if peer.ID(m.Client) != origin {
		return g.verdict(pubsub.ValidationReject, TopicJobs, origin, "announce for another client")
	}
	if !g.fresh(m.Time) {
		return g.verdict(pubsub.ValidationIgnore, TopicJobs, origin, "timestamp outside window")
	}
	if !g.allow(TopicJobs, origin) {
		return g.verdict(pubsub.ValidationIgnore, TopicJobs, origin, "rate limit")
	}
	msg.ValidatorData = &m
	return pubsub.ValidationAccept
}

func (g *Gossip) validateAdvert(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	var m wire.CapabilityAdvert
	if v, ok := g.decode(TopicAdverts, msg, &m); !ok {
		return v
	}
	origin := msg.GetFrom()
	if err := m.Validate(); err != nil {
		return g.verdict(pubsub.ValidationReject, TopicAdverts, origin, err.Error())
	}
	if peer.ID(m.Peer) != origin {
		return g.verdict(pubsub.ValidationReject, TopicAdverts, origin, "advert for another peer")
	}
	if !g.fresh(m.Time) {
		return g.verdict(pubsub.ValidationIgnore, TopicAdverts, origin, "timestamp outside window")
	}
	if !g.allow(TopicAdverts, origin) {
		return g.verdict(pubsub.ValidationIgnore, TopicAdverts, origin, "rate limit")
	}
	// Only newer adverts travel on: replays and reordered copies stop here.
	for {
		old, loaded := g.lastSeq.LoadOrStore(origin, m.Seq)
		if !loaded {
			break
		}
		if old.(uint64) >= m.Seq {
			return g.verdict(pubsub.ValidationIgnore, TopicAdverts, origin, "stale advert")
		}
		if g.lastSeq.CompareAndSwap(origin, old, m.Seq) {
			break
		}
	}
	msg.ValidatorData = &m
	return pubsub.ValidationAccept
}

// tracer counts outbound traffic and drops.
type tracer struct {
	sentRPCs, sentMsgs, sentJobs, dropped atomic.Uint64
}

func (t *tracer) AddPeer(peer.ID, protocol.ID)          {}
func (t *tracer) RemovePeer(peer.ID)                    {}
func (t *tracer) Join(string)                           {}
func (t *tracer) Leave(string)                          {}
func (t *tracer) Graft(peer.ID, string)                 {}
func (t *tracer) Prune(peer.ID, string)                 {}
func (t *tracer) ValidateMessage(*pubsub.Message)       {}
func (t *tracer) DeliverMessage(*pubsub.Message)        {}
func (t *tracer) RejectMessage(*pubsub.Message, string) {}
func (t *tracer) DuplicateMessage(*pubsub.Message)      {}
func (t *tracer) ThrottlePeer(peer.ID)                  {}
func (t *tracer) RecvRPC(*pubsub.RPC)                   {}
func (t *tracer) UndeliverableMessage(*pubsub.Message)  {}
func (t *tracer) SendRPC(rpc *pubsub.RPC, _ peer.ID) {
	t.sentRPCs.Add(1)
	pub := rpc.GetPublish()
	t.sentMsgs.Add(uint64(len(pub)))
	for _, m := range pub {
		if m.GetTopic() == TopicJobs {
			t.sentJobs.Add(1)
		}
	}
}
func (t *tracer) DropRPC(*pubsub.RPC, peer.ID) { t.dropped.Add(1) }
