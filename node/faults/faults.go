// Package faults makes a node misbehave on purpose, so that tests can show
// that its peers catch it: a provider that lies, colludes, stalls, claims
// GPUs it lacks or forges proofs; a client that withholds payment; an
// aggregator that spoils or overcharges. Every method is nil-safe, so that
// a node without faults calls them as they are.
package faults

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Faults make a provider misbehave on purpose, so that tests can show that
// clients catch it. The CLI sets them only in builds with the `faults` tag
// (`infernet node --fault.lie PROB --fault.silent PROB --fault.slow D
// --fault.tamper-proofs`).
type Faults struct {
	// Lie is the probability of returning a corrupted output (a random
	// byte changed, so that two liars do not agree by accident), signed
	// as if it were true.
	Lie float64
	// Silent is the probability of accepting a replica and then saying
	// nothing more: no heartbeats, no result.
	Silent float64
	// Slow delays every run by this much (heartbeats continue).
	Slow time.Duration
	// Collude makes lies agree: the honest output with its last byte
	// flipped, so that several identities of one attacker outvote others.
	Collude bool
	// HonestFor keeps the first HonestFor runs honest whatever Lie says: an
	// identity that builds a record, then spends it.
	HonestFor int
	// Ring, shared by several identities of one attacker, makes them lie
	// only on jobs whose every replica they hold, so that no honest result
	// ever sits beside their lie: the strongest collusion, which only the
	// client's own runs can catch.
	Ring *Ring
	// LieAfterLines, when above 0, keeps the first LieAfterLines lines of
	// every output honest and changes each later line's "text" (a tilde
	// before it), while the job runs: a language model's provider that
	// streams a made-up completion after an honest start.
	LieAfterLines int
	// LieLines, with LieAfterLines, is how many lines lie (0: all the
	// rest): 1 changes one token of a completion.
	LieLines int
	// HoldLine, when set, is called before each line of a streamed
	// output is written (line counts from 0) and may block: a test holds
	// a stream at a line until its client has shown what came before, so
	// that streaming does not depend on the machine's speed.
	HoldLine func(line int)
	// Rewrite, when set, replaces every output with what it returns for
	// the job's input and the honest output, signed as if it were true: a
	// liar of a test's own design (one that lies when it generates and
	// not when it checks, say).
	Rewrite func(input, output []byte) []byte
	// Stall accepts replicas, reports them running and heartbeats, and
	// never answers.
	Stall bool
	// ClaimTimeout answers every replica at once (or after Slow) with a
	// signed "time limit exceeded", running nothing: a provider that would
	// end clients' jobs by blaming their limits, or stall them.
	ClaimTimeout bool
	// StreamThenRefuse, when set, answers each assign of a streamed job by
	// streaming these bytes as its output and then refusing the replica as
	// busy: one operator's keys that take turns at a replica, each adding
	// its voice to a made-up stream.
	StreamThenRefuse []byte
	// StreamThenRefuseAfter, with StreamThenRefuse, holds the stream open
	// that long before the refusal: long enough for a colluder's stream to
	// join it, and the two to be shown.
	StreamThenRefuseAfter time.Duration
	// ClaimExitZero signs every run that exited as exited 0, whatever its
	// status: a liar about how a job ended rather than about its output.
	ClaimExitZero bool
	// ClaimGPUs are GPUs this provider's advert claims it has (an H200,
	// say), which it runs nothing on.
	ClaimGPUs []wire.GPU
	// Withhold, as a client, cancels every payment, even for results it
	// accepted: a client that takes results and does not pay.
	Withhold bool
	// TakeStakes, as a client, takes every provider's collateral when its
	// replica ends, whatever the verdict: the client holds the preimage of
	// each stake's hold invoice, so nothing but the providers' caution
	// stops it.
	TakeStakes bool
	// KeepStakes, as a client, never ends a provider's stake: it neither
	// returns nor takes it, in its job or in its sweep, so that the
	// provider's payment stays locked until its HTLC expires.
	KeepStakes bool
	// Vanish, as a provider, leaves its open invoices as a killed process
	// would when the node stops: it does not cancel those of the runs its
	// stop cut short (a node stopped cleanly does).
	Vanish bool
	// DieBeforeRelease, as a client, when it returns true, stops each
	// release of a payment after it is recorded and before it is sent, the
	// sweep's too, as a node that died there would: started again (the
	// function then false), its sweep sends it.
	DieBeforeRelease func() bool
	// Tamper, as a provider selling by fair exchange, spoils every offer:
	// "proof" and "ciphertext" change a byte of either, "key" invoices a
	// preimage other than the key that encrypted the output.
	Tamper string
	// TamperProofs, as a provider running proof-mode jobs, spoils the first
	// GEMM proof of every result (a byte of its Groth16 proof changed),
	// signed as if it were true: a provider forging proofs.
	TamperProofs bool
	// Aggregate, as an aggregator, spoils its results: "output" changes a
	// byte of the merged output (stored as another blob), "shard" claims
	// another output for shard 0 (its results re-signed by nobody),
	// "terms" passes shard 1's honestly signed results off as shard 0's
	// (under shard 1's job id, shard 0's terms and a merged output to
	// match), "overcharge" invoices a paid job for twice what it owes.
	Aggregate string

	mu   sync.Mutex
	rng  *rand.Rand
	runs int // runs so far, for HonestFor
}

// Ring is what colluding identities share: the replicas of each job they
// hold.
type Ring struct {
	mu   sync.Mutex
	held map[wire.JobID]int
}

// holdsAll registers one more replica of the job of a held by the ring and
// waits up to wait for the ring to hold all of the job's replicas.
func (r *Ring) holdsAll(a *wire.JobAnnounce, wait time.Duration) bool {
	r.mu.Lock()
	if r.held == nil {
		r.held = map[wire.JobID]int{}
	}
	r.held[a.Job]++
	r.mu.Unlock()
	deadline := time.Now().Add(wait)
	for {
		r.mu.Lock()
		all := r.held[a.Job] >= int(a.Replicas)
		r.mu.Unlock()
		if all || time.Now().After(deadline) {
			return all
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Lies, silent and slow draw this run's faults; all are nil-safe.
func (f *Faults) Lies(a *wire.JobAnnounce) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	f.runs++
	honest := f.runs <= f.HonestFor
	f.mu.Unlock()
	if f.Ring != nil && !f.Ring.holdsAll(a, time.Second) {
		return false
	}
	return !honest && f.roll(f.Lie)
}
func (f *Faults) Stalls() bool { return f != nil && f.Stall }

// ClaimsTimeout reports ClaimTimeout.
func (f *Faults) ClaimsTimeout() bool { return f != nil && f.ClaimTimeout }
func (f *Faults) Rewriter() func(input, output []byte) []byte {
	if f == nil {
		return nil
	}
	return f.Rewrite
}

// StreamsThenRefuses returns StreamThenRefuse.
func (f *Faults) StreamsThenRefuses() []byte {
	if f == nil {
		return nil
	}
	return f.StreamThenRefuse
}

// TakesStakes reports TakeStakes.
func (f *Faults) TakesStakes() bool { return f != nil && f.TakeStakes }

// KeepsStakes reports KeepStakes.
func (f *Faults) KeepsStakes() bool { return f != nil && f.KeepStakes }

// ExitsZero reports whether runs are to be signed as exited 0
// (ClaimExitZero).
func (f *Faults) ExitsZero() bool { return f != nil && f.ClaimExitZero }

func (f *Faults) LiesAfter() (after, lines int) {
	if f == nil {
		return 0, 0
	}
	return f.LieAfterLines, f.LieLines
}
func (f *Faults) Holds() func(line int) {
	if f == nil {
		return nil
	}
	return f.HoldLine
}
func (f *Faults) GoesSilent() bool { return f != nil && f.roll(f.Silent) }
func (f *Faults) Withholds() bool  { return f != nil && f.Withhold }

// Vanishes reports Vanish.
func (f *Faults) Vanishes() bool { return f != nil && f.Vanish }

// DiesBeforeRelease reports DieBeforeRelease's answer.
func (f *Faults) DiesBeforeRelease() bool {
	return f != nil && f.DieBeforeRelease != nil && f.DieBeforeRelease()
}
func (f *Faults) Delay() time.Duration {
	if f == nil {
		return 0
	}
	return f.Slow
}

// tamper spoils an offer as Tamper says; it reports whether the invoice
// must be for another key.
func (f *Faults) TamperOffer(o *fair.Offer) (otherKey bool) {
	if f == nil {
		return false
	}
	switch f.Tamper {
	case "proof":
		o.Proof[len(o.Proof)/2] ^= 1
	case "ciphertext":
		o.Ciphertext[len(o.Ciphertext)-1] ^= 1
	case "key":
		return true
	}
	return false
}

// SpoilProofs spoils the first of a result's proofs when TamperProofs is set.
func (f *Faults) SpoilProofs(proofs []gemmproof.Proof) {
	if f == nil || !f.TamperProofs || len(proofs) == 0 {
		return
	}
	g := proofs[0].Groth16
	g[len(g)/2] ^= 0x10
}

// roll reports true with probability p.
func (f *Faults) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng == nil {
		f.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return f.rng.Float64() < p
}

// Corrupt returns a copy of out with one random byte changed (or one byte
// added to an empty output).
func (f *Faults) Corrupt(out []byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Collude && len(out) > 0 {
		c := append([]byte(nil), out...)
		c[len(c)-1] ^= 1
		return c
	}
	if len(out) == 0 {
		return []byte{byte(f.rng.UintN(256))}
	}
	c := append([]byte(nil), out...)
	c[f.rng.IntN(len(c))] ^= byte(1 + f.rng.UintN(255))
	return c
}

// Overcharges reports whether an aggregator invoices too much.
func (f *Faults) Overcharges() bool { return f != nil && f.Aggregate == "overcharge" }

// SpoilAggregate spoils an aggregator's result as Aggregate says.
func (f *Faults) SpoilAggregate(blobs *blob.Store, res *wire.AggregateResult) {
	if f == nil || len(res.Shards) == 0 {
		return
	}
	switch f.Aggregate {
	case "output":
		b, err := blobs.Bytes(res.Output, res.OutputSize)
		if err != nil || len(b) == 0 {
			return
		}
		b[len(b)/2] ^= 1
		if d, err := blobs.PutBytes(b); err == nil {
			res.Output = d
		}
	case "shard":
		if rs := res.Shards[0].Results; len(rs) > 0 {
			rs[0].Output = blob.Sum([]byte("another output"))
		}
	case "terms":
		if len(res.Shards) < 2 || len(res.Shards[1].Results) == 0 || res.Merged != (blob.Digest{}) {
			return
		}
		s0, s1 := &res.Shards[0], res.Shards[1]
		s0.Announce.Job, s0.Announce.Time, s0.Announce.Deadline = s1.Announce.Job, s1.Announce.Time, s1.Announce.Deadline
		s0.Results, s0.Terms = s1.Results, s1.Terms
		var merged []byte
		for _, sh := range res.Shards {
			r := sh.Results[0]
			b, err := blobs.Bytes(r.Output, r.OutputSize)
			if err != nil {
				return
			}
			merged = append(merged, b...)
		}
		if d, err := blobs.PutBytes(merged); err == nil {
			res.Output, res.OutputSize = d, int64(len(merged))
		}
	}
}
