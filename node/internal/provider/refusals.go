package provider

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/wire"
)

// refusals tells the operator which of the provider's terms turn work
// away: a bid refused for its terms (a price under this provider's, a
// stake over its limit, a timeout over --timeout) said so to the client
// alone, and an operator whose settings cost it work saw nothing. Each kind
// of refusal is logged at most once a refusalEvery, with how many came
// since; busy and stopping, which are no setting's doing, are not.
type refusals struct {
	log *slog.Logger

	mu    sync.Mutex
	total uint64              // guarded by mu
	kinds map[string]*refusal // by kind (the reason without its figures); guarded by mu
}

type refusal struct {
	logged time.Time
	since  int // refused since logged
}

// refusalEvery is how often one kind of refusal is logged.
const refusalEvery = time.Minute

// maxRefusalKinds bounds the kinds remembered: reasons are the provider's
// own words, but a client's terms pick among them.
const maxRefusalKinds = 64

// note records a bid refused to client for why.
func (r *refusals) note(client peer.ID, why string) {
	if why == wire.ReasonBusy || why == ReasonStopping {
		return
	}
	kind := strings.Map(func(c rune) rune {
		if c >= '0' && c <= '9' || c == '.' {
			return -1
		}
		return c
	}, why)
	now := time.Now()
	r.mu.Lock()
	r.total++
	if r.kinds == nil || len(r.kinds) >= maxRefusalKinds && r.kinds[kind] == nil {
		r.kinds = map[string]*refusal{}
	}
	k := r.kinds[kind]
	if k == nil {
		k = &refusal{}
		r.kinds[kind] = k
	}
	k.since++
	if now.Sub(k.logged) < refusalEvery {
		r.mu.Unlock()
		return
	}
	n := k.since
	k.logged, k.since = now, 0
	r.mu.Unlock()
	r.log.Info("bid refused for this provider's terms", "why", why, "client", client, "times", n, "in", refusalEvery)
}

// Total is how many bids were refused for their terms.
func (r *refusals) Total() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}
