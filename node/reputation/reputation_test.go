package reputation

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// TestProbation: a newcomer scores 1/(Probation+1) and is not established;
// each proven result raises its score, and Probation of them establish it.
// A lie ends that for good.
func TestProbation(t *testing.T) {
	var r Record
	if s, want := r.Score(Defaults, t0), 1/float64(Defaults.Probation+1); math.Abs(s-want) > 1e-9 {
		t.Fatalf("newcomer score %v, want %v", s, want)
	}
	if r.Trusted(Defaults, t0) || r.Banned(t0) || r.Established(Defaults, t0) || r.Conduct(Defaults, t0) != 1 {
		t.Fatal("a newcomer is neither trusted, banned nor established, and behaves perfectly")
	}
	if !strings.Contains(r.Why(Defaults, t0), "on probation (0 of 5 proven)") {
		t.Fatalf("why: %q", r.Why(Defaults, t0))
	}
	now, last := t0, r.Score(Defaults, t0)
	for i := range Defaults.Probation {
		if r.Established(Defaults, now) {
			t.Fatalf("established after %d proven results", i)
		}
		now = now.Add(time.Second)
		r.Agree(Defaults, now)
		if s := r.Score(Defaults, now); s <= last {
			t.Fatalf("score %v after %d proven, was %v", s, i+1, last)
		}
		last = r.Score(Defaults, now)
	}
	if !r.Established(Defaults, now) || last < 0.99 {
		t.Fatalf("not established after %d proven results (score %v)", Defaults.Probation, last)
	}
	r.Convict(Defaults, now, "job")
	if r.Established(Defaults, now) || !r.Banned(now) || r.Established(Defaults, now.Add(2*Defaults.BanFor)) {
		t.Fatal("a convicted peer stays established, or is not banned")
	}
}

func TestLiars(t *testing.T) {
	tests := []struct {
		name       string
		agreed     int
		banned     bool
		scoreAbove float64
	}{
		{"a newcomer's first lie bans it", 0, true, 0},
		{"two agreements do not save a liar", 2, true, 0},
		{"a long honest record survives one outvote", 60, false, 0.6},
	}
	for _, tt := range tests {
		var r Record
		now := t0
		for range tt.agreed {
			now = now.Add(time.Second)
			r.Agree(Defaults, now)
		}
		r.Outvote(Defaults, now, "job")
		if r.Banned(now) != tt.banned {
			t.Errorf("%s: banned %v, score %.2f", tt.name, r.Banned(now), r.score(Defaults, now))
		}
		if !tt.banned && r.Score(Defaults, now) <= tt.scoreAbove {
			t.Errorf("%s: score %.2f", tt.name, r.Score(Defaults, now))
		}
		if r.Trusted(Defaults, now.Add(time.Hour)) {
			t.Errorf("%s: trusted after a lie", tt.name)
		}
		if tt.banned && (r.Score(Defaults, now) != 0 || !strings.Contains(r.Why(Defaults, now), "banned until")) {
			t.Errorf("%s: banned peer scores %v, why %q", tt.name, r.Score(Defaults, now), r.Why(Defaults, now))
		}
	}
}

func TestBanExpires(t *testing.T) {
	var r Record
	r.Outvote(Defaults, t0, "job")
	if !r.Banned(t0.Add(Defaults.BanFor - time.Minute)) {
		t.Fatal("ban ended early")
	}
	after := t0.Add(Defaults.BanFor + time.Minute)
	if r.Banned(after) || r.Trusted(Defaults, after) {
		t.Fatal("ban did not end, or a past liar became trusted")
	}
}

func TestForgive(t *testing.T) {
	var r Record
	now := t0
	for range Defaults.Probation {
		now = now.Add(time.Second)
		r.Complete(Defaults, now, time.Millisecond)
		r.Agree(Defaults, now)
	}
	before := r.Score(Defaults, now)
	r.Lose(Defaults, now)
	r.Convict(Defaults, now, "job")
	if !r.Banned(now) || r.Established(Defaults, now) {
		t.Fatal("a convicted peer is not banned")
	}
	r.Forgive(Defaults, now)
	if r.Banned(now) || !r.Established(Defaults, now) || r.Lies != 0 || r.LastLie != "" {
		t.Fatalf("forgiven: banned %v, established %v, lies %d", r.Banned(now), r.Established(Defaults, now), r.Lies)
	}
	if got := r.Score(Defaults, now); got != before {
		t.Errorf("forgiven score %v, before the ban %v", got, before)
	}
	if strings.Contains(r.Why(Defaults, now), "banned") || strings.Contains(r.Why(Defaults, now), "lied") {
		t.Errorf("why after forgiving: %q", r.Why(Defaults, now))
	}
	if r.Trusted(Defaults, now) {
		t.Error("forgiving restored a streak it had lost")
	}
}

func TestTrust(t *testing.T) {
	var r Record
	now := t0
	for i := range Defaults.TrustStreak {
		if r.Trusted(Defaults, now) {
			t.Fatalf("trusted after %d agreements", i)
		}
		now = now.Add(time.Second)
		r.Agree(Defaults, now)
	}
	if !r.Trusted(Defaults, now) {
		t.Fatal("not trusted after a full streak")
	}
	r.Lose(Defaults, now)
	if r.Trusted(Defaults, now) {
		t.Fatal("a lost replica keeps the streak")
	}
}

func TestDecay(t *testing.T) {
	var r Record
	for range 8 {
		r.Agree(Defaults, t0)
	}
	r.Lose(Defaults, t0)
	c := r
	c.decay(Defaults, t0.Add(Defaults.HalfLife))
	if math.Abs(c.Agreed-4) > 1e-9 || math.Abs(c.Lost-0.5) > 1e-9 {
		t.Fatalf("after a half-life: agreed %v, lost %v; want 4, 0.5", c.Agreed, c.Lost)
	}
}

func TestUptime(t *testing.T) {
	var r Record
	now := t0
	for range 60 { // an hour of adverts every minute
		r.Advert(Defaults, now, time.Minute)
		now = now.Add(time.Minute)
	}
	_, _, up := r.parts(Defaults, now)
	if up < 0.99 {
		t.Fatalf("uptime %.3f with every advert seen", up)
	}
	_, _, up = r.parts(Defaults, now.Add(time.Hour)) // then an hour of silence
	if up > 0.6 || up < 0.4 {
		t.Fatalf("uptime %.3f after being away as long as present, want ~0.5", up)
	}
	if r.Score(Defaults, now.Add(time.Hour)) >= r.Score(Defaults, now) {
		t.Fatal("being away did not lower the score")
	}
}

func TestLatency(t *testing.T) {
	var r Record
	r.Complete(Defaults, t0, 10*time.Millisecond)
	r.Complete(Defaults, t0, 20*time.Millisecond)
	if math.Abs(r.LatencyMS-12) > 1e-9 {
		t.Fatalf("latency %v, want 12", r.LatencyMS)
	}
	if !strings.Contains(r.Why(Defaults, t0), "12.0 ms") {
		t.Fatalf("why %q", r.Why(Defaults, t0))
	}
}

func TestSecondLieBans(t *testing.T) {
	var r Record
	now := t0
	for range 200 {
		now = now.Add(time.Second)
		r.Agree(Defaults, now)
	}
	r.Outvote(Defaults, now, "a")
	if r.Banned(now) {
		t.Fatal("a long record was banned at its first lie")
	}
	r.Outvote(Defaults, now, "b")
	if !r.Banned(now) {
		t.Fatalf("not banned at the second lie: %s", r.Why(Defaults, now))
	}
}

// TestDeclaredIntervalBounded: a peer declaring a day between adverts is
// measured against MaxAdvertInterval: silent for an hour, its uptime falls.
func TestDeclaredIntervalBounded(t *testing.T) {
	var r Record
	r.Advert(Defaults, t0, 24*time.Hour)
	if r.Interval != MaxAdvertInterval {
		t.Fatalf("interval %v, want %v", r.Interval, MaxAdvertInterval)
	}
	if _, _, u := r.parts(Defaults, t0.Add(time.Hour)); u > 0.25 {
		t.Fatalf("uptime %.2f after an hour of silence", u)
	}
}

// TestWhyNamesTheEvidence: a ban says what it rests on: results this
// node proved wrong by its own run, or votes (a conviction had read
// "outvoted 1×", sending an operator after a vote that never happened:
// a newcomer's walk).
func TestWhyNamesTheEvidence(t *testing.T) {
	for _, tc := range []struct {
		name             string
		convict, outvote int
		want, not        string
	}{
		{"convicted", 1, 0, "proved wrong by this node's own run 1× (last on job", "outvoted 1×"},
		{"outvoted", 0, 2, "outvoted 2× (last on job", "proved wrong"},
		{"both", 1, 1, "proved wrong by this node's own run 1×, outvoted 1×", "outvoted 2×"},
	} {
		var r Record
		for range tc.outvote {
			r.Outvote(Defaults, t0, "vote")
		}
		for range tc.convict {
			r.Convict(Defaults, t0, "audit")
		}
		if why := r.Why(Defaults, t0); !strings.Contains(why, tc.want) || strings.Contains(why, tc.not) {
			t.Errorf("%s: %q; want %q, not %q", tc.name, why, tc.want, tc.not)
		}
	}
}
