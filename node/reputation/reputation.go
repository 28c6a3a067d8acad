// Package reputation is what one node thinks of another, from what it has
// seen itself: how many replicas came back (completion), how often their
// results agreed with the accepted one (agreement), how often the peer was
// heard from (uptime from adverts), and how fast results arrived (latency).
// Counts decay with a half-life, so that old behaviour fades; a peer
// outvoted by other replicas is slashed hard and banned below a threshold.
//
// Trust must be earned: a peer is on probation until Params.Probation of its
// results were proven, that is agreed with an anchor (the client's own
// computation, or an established peer of another operator: Concur records
// agreement that proves nothing). Identities cost nothing to make, so
// a newcomer scores low and counts for nothing in a vote against an
// established peer, however many of them agree.
//
// A Record is plain data (it is persisted inside the node's peer records);
// its methods are not safe for concurrent use: the caller locks.
package reputation

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Params tune the model. The zero value means Defaults.
type Params struct {
	// HalfLife is how long counts take to decay to half; default 7 days.
	HalfLife time.Duration
	// LieWeight is how many agreements one outvoted result cancels; default 20.
	LieWeight float64
	// BanBelow bans a peer whose score falls under it; default 0.3.
	BanBelow float64
	// BanFor is how long a ban lasts; default 7 days.
	BanFor time.Duration
	// TrustStreak is how many consecutive agreed results, with no lie on
	// record, make a peer trusted with single replicas; default 20.
	TrustStreak int
	// MaxLies bans a peer at this many outvoted results, whatever its
	// score: a rare liar is not trusted after its first lie, and is banned
	// at its second; default 2.
	MaxLies int
	// Probation is how many proven results make a peer established: until
	// then its vote does not verify a result and its score is scaled down;
	// default 5.
	Probation int
}

// Defaults are the parameters nodes use unless configured otherwise.
var Defaults = Params{HalfLife: 7 * 24 * time.Hour, LieWeight: 20, BanBelow: 0.3, BanFor: 7 * 24 * time.Hour, TrustStreak: 20, MaxLies: 2, Probation: 5}

// WithDefaults returns p with every zero field set to its default.
func (p Params) WithDefaults() Params {
	if p.HalfLife <= 0 {
		p.HalfLife = Defaults.HalfLife
	}
	if p.LieWeight <= 0 {
		p.LieWeight = Defaults.LieWeight
	}
	if p.BanBelow <= 0 {
		p.BanBelow = Defaults.BanBelow
	}
	if p.BanFor <= 0 {
		p.BanFor = Defaults.BanFor
	}
	if p.TrustStreak <= 0 {
		p.TrustStreak = Defaults.TrustStreak
	}
	if p.MaxLies <= 0 {
		p.MaxLies = Defaults.MaxLies
	}
	if p.Probation <= 0 {
		p.Probation = Defaults.Probation
	}
	return p
}

// Record is one peer's reputation. Counts are decayed floats.
type Record struct {
	Completed float64 `json:"completed"`
	Lost      float64 `json:"lost"`
	Agreed    float64 `json:"agreed"`
	Outvoted  float64 `json:"outvoted"`
	// Lies counts outvoted results ever (it does not decay): a peer that
	// lied once is never trusted with single replicas again. Convictions
	// are those of them this node proved wrong by its own run (Convict).
	Lies        int `json:"lies"`
	Convictions int `json:"convictions,omitempty"`
	// Streak is consecutive agreed results since the last lie or loss.
	Streak int `json:"streak"`
	// Proven counts results that agreed with an anchor: the client's own
	// run, or an established peer's result. It does not decay: it is what
	// takes a peer out of probation.
	Proven int `json:"proven,omitempty"`
	// LatencyMS is a moving average of the time a result took beyond the
	// run itself (network, queue, fetching).
	LatencyMS float64 `json:"latency_ms"`
	// Adverts counts adverts seen since FirstAdvert; Interval is the
	// advert interval the peer declares.
	Adverts     float64       `json:"adverts"`
	FirstAdvert time.Time     `json:"first_advert,omitzero"`
	Interval    time.Duration `json:"interval,omitempty"`
	// BannedUntil is the end of the current ban (zero: not banned).
	BannedUntil time.Time `json:"banned_until,omitzero"`
	LastLie     string    `json:"last_lie,omitempty"` // the job it was outvoted on
	Updated     time.Time `json:"updated,omitzero"`
}

// decay brings the counts to now.
func (r *Record) decay(p Params, now time.Time) {
	if !r.Updated.IsZero() && now.After(r.Updated) {
		f := math.Exp2(-float64(now.Sub(r.Updated)) / float64(p.HalfLife))
		r.Completed *= f
		r.Lost *= f
		r.Agreed *= f
		r.Outvoted *= f
		r.Adverts *= f
	}
	r.Updated = now
}

// Complete records a result that came back, latency beyond the run itself.
func (r *Record) Complete(p Params, now time.Time, latency time.Duration) {
	p = p.WithDefaults()
	r.decay(p, now)
	r.Completed++
	ms := float64(latency.Microseconds()) / 1000
	if r.LatencyMS == 0 {
		r.LatencyMS = ms
	} else {
		r.LatencyMS = 0.8*r.LatencyMS + 0.2*ms
	}
}

// Lose records a replica the peer accepted and never returned.
func (r *Record) Lose(p Params, now time.Time) {
	p = p.WithDefaults()
	r.decay(p, now)
	r.Lost++
	r.Streak = 0
	r.checkBan(p, now)
}

// Agree records a result that agreed with the accepted one, which an
// anchor vouched for (the client's own run or an established peer).
func (r *Record) Agree(p Params, now time.Time) {
	p = p.WithDefaults()
	r.decay(p, now)
	r.Agreed++
	r.Streak++
	r.Proven++
}

// Concur records a result that agreed with the accepted one when no anchor
// independent of the peer vouched for it (only identities of its own
// operator agreed): it counts in the score, but neither proves the peer
// nor lengthens its streak, so a colluder cannot graduate its own identities.
func (r *Record) Concur(p Params, now time.Time) {
	p = p.WithDefaults()
	r.decay(p, now)
	r.Agreed++
}

// Outvote records a result other replicas outvoted on job: a lie.
func (r *Record) Outvote(p Params, now time.Time, job string) {
	p = p.WithDefaults()
	r.decay(p, now)
	r.Outvoted++
	r.Lies++
	r.Streak = 0
	r.LastLie = job
	r.checkBan(p, now)
}

// Convict records a result the client proved wrong by computing it itself
// (an audit, a canary): no tolerance for error, the peer is banned now.
func (r *Record) Convict(p Params, now time.Time, job string) {
	p = p.WithDefaults()
	r.Outvote(p, now, job)
	r.Convictions++
	r.BannedUntil = now.Add(p.BanFor)
}

// Advert records an advert; interval is the peer's declared period.
func (r *Record) Advert(p Params, now time.Time, interval time.Duration) {
	p = p.WithDefaults()
	r.decay(p, now)
	if r.FirstAdvert.IsZero() {
		r.FirstAdvert = now
	}
	r.Adverts++
	// The interval is the peer's own word: bounded, so that declaring a
	// long one does not excuse silence.
	r.Interval = min(max(interval, 10*time.Second), MaxAdvertInterval)
}

// MaxAdvertInterval is the longest advert interval uptime is measured
// against, whatever a peer declares.
const MaxAdvertInterval = 5 * time.Minute

func (r *Record) checkBan(p Params, now time.Time) {
	if r.score(p, now) < p.BanBelow || r.Lies >= p.MaxLies {
		r.BannedUntil = now.Add(p.BanFor)
	}
}

// Forgive undoes what the peer is blamed for, at its operator's word (a
// ban made by mistake: the client's own wrong comparison, an outage that
// lost its replicas): the ban, the lies and the lost replicas go; what it
// earned (results completed, agreed and proven) stays, so that a peer
// established before is established again.
func (r *Record) Forgive(p Params, now time.Time) {
	r.decay(p.WithDefaults(), now)
	r.BannedUntil = time.Time{}
	r.Lies, r.Convictions, r.Outvoted, r.Lost, r.LastLie = 0, 0, 0, 0, ""
}

// Banned reports whether the peer is banned at now.
func (r *Record) Banned(now time.Time) bool { return now.Before(r.BannedUntil) }

// Established reports whether the peer is out of probation: enough proven
// results, no lie on record, not banned. Only established peers anchor a
// vote.
func (r *Record) Established(p Params, now time.Time) bool {
	p = p.WithDefaults()
	return r.Lies == 0 && r.Proven >= p.Probation && !r.Banned(now)
}

// Trusted reports whether the peer may be given single replicas: it is
// established, with a long streak of agreed results.
func (r *Record) Trusted(p Params, now time.Time) bool {
	p = p.WithDefaults()
	return r.Established(p, now) && r.Streak >= p.TrustStreak
}

// earned scales a score by how far the peer is through probation: a
// newcomer gets 1/(Probation+1) of it, an established peer all of it.
func (r *Record) earned(p Params) float64 {
	return min(1, float64(r.Proven+1)/float64(p.Probation+1))
}

// parts are the factors of the score, each in (0, 1].
func (r *Record) parts(p Params, now time.Time) (completion, agreement, uptime float64) {
	c := *r
	c.decay(p, now)
	completion = (c.Completed + 1) / (c.Completed + c.Lost + 1)
	agreement = (c.Agreed + 1) / (c.Agreed + 1 + p.LieWeight*c.Outvoted)
	uptime = 1
	if !c.FirstAdvert.IsZero() && c.Interval > 0 {
		// Adverts seen over adverts due since the first, with one missed
		// advert forgiven; counts decay like the rest, so this is recent uptime.
		due := now.Sub(c.FirstAdvert).Seconds() / c.Interval.Seconds()
		span := c.Interval.Seconds() / p.HalfLife.Seconds()
		due = (1 - math.Exp2(-due*span)) / (1 - math.Exp2(-span)) // decayed sum of due adverts
		uptime = min(1, (c.Adverts+1)/max(due, 1))
	}
	return completion, agreement, uptime
}

func (r *Record) score(p Params, now time.Time) float64 {
	c, a, u := r.parts(p, now)
	return c * a * (0.5 + 0.5*u) // being away costs at most half
}

// Score is the peer's reputation in [0, 1] (0 while banned): its behaviour
// (completion, agreement, uptime) scaled by how much trust it has earned. A
// peer never seen scores 1/(Probation+1): newcomers get a little work, and
// more as their results are proven.
func (r *Record) Score(p Params, now time.Time) float64 {
	if r.Banned(now) {
		return 0
	}
	p = p.WithDefaults()
	return r.score(p, now) * r.earned(p)
}

// Conduct is the peer's behaviour alone, in [0, 1] (0 while banned), with
// no discount for probation: what gossip scoring uses, since a newcomer's
// messages are as good as anyone's.
func (r *Record) Conduct(p Params, now time.Time) float64 {
	if r.Banned(now) {
		return 0
	}
	return r.score(p.WithDefaults(), now)
}

// Why explains the score in one line, for `infernet peers`.
func (r *Record) Why(p Params, now time.Time) string {
	p = p.WithDefaults()
	c, a, u := r.parts(p, now)
	var b strings.Builder
	if r.Banned(now) {
		switch outvoted := r.Lies - r.Convictions; {
		case r.Convictions > 0 && outvoted > 0:
			fmt.Fprintf(&b, "banned until %s: proved wrong by this node's own run %d×, outvoted %d× (last on job %.12s); ", r.BannedUntil.Format(time.DateTime), r.Convictions, outvoted, r.LastLie)
		case r.Convictions > 0:
			fmt.Fprintf(&b, "banned until %s: proved wrong by this node's own run %d× (last on job %.12s); ", r.BannedUntil.Format(time.DateTime), r.Convictions, r.LastLie)
		case r.Lies > 0:
			fmt.Fprintf(&b, "banned until %s: outvoted %d× (last on job %.12s); ", r.BannedUntil.Format(time.DateTime), r.Lies, r.LastLie)
		default:
			fmt.Fprintf(&b, "banned until %s: replicas lost; ", r.BannedUntil.Format(time.DateTime))
		}
	}
	fmt.Fprintf(&b, "agreed %.0f, outvoted %.0f (%.0f%%), completed %.0f%% (%.0f lost), uptime %.0f%%",
		r.Agreed, r.Outvoted, 100*a, 100*c, r.Lost, 100*u)
	if r.LatencyMS > 0 {
		fmt.Fprintf(&b, ", results %.1f ms past the run", r.LatencyMS)
	}
	switch {
	case r.Trusted(p, now):
		b.WriteString(", trusted")
	case r.Lies > 0 && !r.Banned(now):
		fmt.Fprintf(&b, ", lied %d×", r.Lies)
	case r.Lies == 0 && r.Proven < p.Probation:
		fmt.Fprintf(&b, ", on probation (%d of %d proven)", r.Proven, p.Probation)
	}
	return b.String()
}
