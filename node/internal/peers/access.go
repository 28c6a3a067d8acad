package peers

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
)

// Access is the node's rule for who may have which blob (blobnet's
// Config.Allow) and which blobs it may name in the DHT. A job's input is
// private: its client serves it only to the providers it assigned the job
// to, while their assigns are in progress, and a provider that fetched it
// serves it to nobody but that client. Modules, data blobs and outputs are
// public; a digest ever used as a module or data blob stays public, even
// when it is also some job's input (its bytes are out already).
//
// The marks live in memory: after a restart an old input is served to
// whoever names its digest, which only its client and its providers know.
type Access struct {
	mu      sync.Mutex
	private map[blob.Digest]bool
	public  map[blob.Digest]bool
	// grants counts, per private blob, the assigns in progress that let a
	// peer have it.
	grants map[blob.Digest]map[peer.ID]int
}

func NewAccess() *Access {
	return &Access{private: map[blob.Digest]bool{}, public: map[blob.Digest]bool{}, grants: map[blob.Digest]map[peer.ID]int{}}
}

// Allow reports whether p may have blob d.
func (a *Access) Allow(p peer.ID, d blob.Digest) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.private[d] || a.public[d] || a.grants[d][p] > 0
}

// Known reports whether p holds a grant now: a provider running one of
// this node's jobs, or a client fetching an output of a run here. The blob
// service keeps places for them (blobnet.Config.Known).
func (a *Access) Known(p peer.ID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.grants {
		if g[p] > 0 {
			return true
		}
	}
	return false
}

// Hidden reports whether d is private: never announced.
func (a *Access) Hidden(d blob.Digest) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.private[d] && !a.public[d]
}

// Input marks d a job's input.
func (a *Access) Input(d blob.Digest) {
	a.mu.Lock()
	a.private[d] = true
	a.mu.Unlock()
}

// Publish marks d public for good.
func (a *Access) Publish(d blob.Digest) {
	a.mu.Lock()
	a.public[d] = true
	a.mu.Unlock()
}

// Forget drops d's mark as an input: for a digest named and never held
// (an aggregator's client's shard input that did not come), whose mark
// would otherwise stay for good. Its grants end as they were given.
func (a *Access) Forget(d blob.Digest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.private, d)
}

// Grant lets p have private blob d until the returned function is called.
func (a *Access) Grant(d blob.Digest, p peer.ID) (revoke func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.grants[d]
	if g == nil {
		g = map[peer.ID]int{}
		a.grants[d] = g
	}
	g[p]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if g[p]--; g[p] <= 0 {
				delete(g, p)
			}
			if len(g) == 0 {
				delete(a.grants, d) // g is still a.grants[d]: none is made while it holds grants
			}
		})
	}
}
