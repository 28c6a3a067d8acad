package gossip

import (
	"context"
	"errors"
	"slices"
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

// originLocked returns the state of id, creating it; when the table is
// full it first forgets the least recently seen eighth (one sort per
// MaxOrigins/8 new origins, not a scan per message). g.mu must be held.
func (g *Gossip) originLocked(id peer.ID, now time.Time) *origin {
	o := g.origins[id]
	if o == nil {
		if len(g.origins) >= g.cfg.MaxOrigins {
			g.evictLocked(max(1, g.cfg.MaxOrigins/8))
		}
		o = &origin{
			jobs:    rate.NewLimiter(rate.Limit(g.cfg.Rate), g.cfg.Burst),
			adverts: rate.NewLimiter(rate.Limit(g.cfg.Rate), g.cfg.Burst),
		}
		g.origins[id] = o
	}
	o.used = now
	return o
}

// evictLocked forgets the n least recently seen origins. g.mu must be held.
func (g *Gossip) evictLocked(n int) {
	ids := make([]peer.ID, 0, len(g.origins))
	for id := range g.origins {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b peer.ID) int { return g.origins[a].used.Compare(g.origins[b].used) })
	for _, id := range ids[:min(n, len(ids))] {
		delete(g.origins, id)
	}
}

// allow takes a token from the origin's bucket for the topic.
func (g *Gossip) allow(topic string, id peer.ID) bool {
	now := g.cfg.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.originLocked(id, now)
	lim := o.adverts
	if topic == TopicJobs {
		lim = o.jobs
	}
	return lim.AllowN(now, 1)
}

// newer records seq as id's newest advert and reports whether it is newer
// than the last one seen.
func (g *Gossip) newer(id peer.ID, seq uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.originLocked(id, g.cfg.Now())
	if o.seqSeen && seq <= o.seq {
		return false
	}
	o.seq, o.seqSeen = seq, true
	return true
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
	if !g.newer(origin, m.Seq) {
		return g.verdict(pubsub.ValidationIgnore, TopicAdverts, origin, "stale advert")
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
