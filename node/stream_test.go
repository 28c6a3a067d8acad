package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// streamSpec is a streamed job of the llama runner on stories260K for
// reqs, its blobs in n.
func streamSpec(tb testing.TB, n *Node, reqs ...llama.Request) jobs.Spec {
	tb.Helper()
	s := spec(tb, n, llama.Runner(), models.EncodeRequests(reqs))
	// A generation's run is slow on a loaded machine (or under -race): the
	// limit bounds a stuck job, not a slow one.
	s.TimeoutMS, s.MaxOutput = (5 * time.Minute).Milliseconds(), 1<<20
	for _, f := range []struct{ name, path string }{{llama.DataModel, "llama/stories260K.bin"}, {llama.DataTokenizer, "llama/tok512.bin"}} {
		b := readTestdata(tb, f.path)
		s.Data = append(s.Data, wire.DataBlob{Name: f.name, Digest: putBlob(tb, n, b), Size: int64(len(b))})
	}
	slices.SortFunc(s.Data, func(a, b wire.DataBlob) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// TestStreamedJobOutvotesALiar streams a generation from three providers,
// one of which lies from the 21st token on while it streams: what the
// client is shown is the honest completion, token by token as two honest
// streams agree, never one of the liar's tokens, and the liar is outvoted.
func TestStreamedJobOutvotesALiar(t *testing.T) {
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	const honestTokens, holdAt = 20, 40
	// The honest providers hold their streams at line holdAt until the
	// client has shown some of the completion (or for a minute): on a fast
	// machine a whole 80-token stream could otherwise arrive, and be shown,
	// in one piece.
	shownSome := make(chan struct{})
	var showOnce sync.Once
	hold := func(line int) {
		if line == holdAt {
			select {
			case <-shownSome:
			case <-time.After(time.Minute):
			}
		}
	}
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if i == 2 {
			c.Faults = &faults.Faults{LieAfterLines: honestTokens}
		} else if i < 2 { // the honest providers; 3 is the client
			c.Faults = &faults.Faults{HoldLine: hold}
		}
		i++
	}).vouch()
	liar := net.providers[2].ID()
	s := streamSpec(t, net.client, llama.Request{Prompt: "Once upon a time", MaxTokens: 80})
	s.Replicas = 3
	var (
		mu     sync.Mutex
		shown  []byte
		chunks int
	)
	s.Output = func(b []byte) {
		mu.Lock()
		shown = append(shown, b...)
		chunks++
		mu.Unlock()
		showOnce.Do(func() { close(shownSome) })
	}
	job, out := submitVerified(t, net.client, s)
	if want := runRunner(t, net.client, s); !bytes.Equal(out, want) {
		t.Fatalf("verified output differs from a local run:\n%s\nwant\n%s", out, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(shown, out) {
		t.Fatalf("streamed %q, want the verified output %q", shown, out)
	}
	if bytes.Contains(shown, []byte(`"text":"~`)) {
		t.Fatal("a token of the liar was shown")
	}
	cs, err := models.Decode(out)
	if err != nil || len(cs) != 1 || cs[0].CompletionTokens <= honestTokens {
		t.Fatalf("completions %+v (%v): want one of more than %d tokens", cs, err, honestTokens)
	}
	// How many pieces the votes release depends on how the streams
	// interleave; with the honest streams held at line holdAt until some
	// was shown, more than one is the completion shown before it ended,
	// as it was agreed.
	if chunks < 2 {
		t.Errorf("the output came in %d piece: not streamed as it was agreed", chunks)
	}
	if !slices.ContainsFunc(job.Liars, func(s string) bool { return s == liar.String() }) {
		t.Errorf("liars %v: want the lying provider %s", job.Liars, liar)
	}
	rec := net.client.peers.Record(liar)
	if rec.Lies == 0 {
		t.Errorf("the liar's record shows no lie: %+v", rec)
	}
}

// runRunner runs the job of s here, its blobs from n's store: the answer
// replicas must give.
func runRunner(tb testing.TB, n *Node, s jobs.Spec) []byte {
	tb.Helper()
	sb, err := host.New(context.Background(), host.Config{CacheDir: compileCache})
	if err != nil {
		tb.Fatal(err)
	}
	defer sb.Close(context.Background())
	input, err := n.Blob(s.Input, s.InputSize)
	if err != nil {
		tb.Fatal(err)
	}
	job := host.Job{Module: llama.Runner(), Input: input, Data: map[string]string{}}
	for _, d := range s.Data {
		job.Data[d.Name] = n.blobs.Path(d.Digest)
	}
	res, err := sb.Run(context.Background(), job, host.NewJobConfig())
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("local run: %v, %v", err, res)
	}
	return res.Output
}

// TestCheckJobCatchesALiar: jobs of one replica verified by prefill (a
// check job, jobs.Spec.Check) on three providers, one of which changes one
// token (its 21st) of every completion. Honest pairs are VerifiedByCheck;
// when the liar generates, the check job disagrees, two more replicas
// outvote it and the honest output is accepted (if it checks instead, it
// is outvoted likewise). Which provider runs what is drawn at random, and a
// liar caught is shunned: the test submits until the liar has lied once
// (at most 40 jobs; the liar generates or checks a job with chance 2/3, so
// 40 jobs without it have chance 1e-19).
func TestCheckJobCatchesALiar(t *testing.T) {
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if i == 2 {
			c.Faults = &faults.Faults{LieAfterLines: 20, LieLines: 1}
		}
		i++
		// The check is what is tested: the client's own audit convicted
		// the liar once, in a clean make test, before it generated or
		// checked, and it was banned, drawn no more.
		c.NoAudit = !c.Provide
	}).vouch()
	liar := net.providers[2].ID().String()
	var sawGenerated, sawChecked, sawHonest bool
	for try := 0; try < 40 && !(sawGenerated || sawChecked); try++ {
		q := llama.Request{Prompt: fmt.Sprintf("Once upon a time, %d", try), MaxTokens: 40}
		s := streamSpec(t, net.client, q)
		s.Replicas, s.Check = 1, models.Check([]llama.Request{q})
		job, out := submitVerified(t, net.client, s)
		if bytes.Contains(out, []byte(`"text":"~`)) {
			t.Fatalf("try %d: the liar's output was accepted (%s, replicas %+v)", try, job.Verification, job.Replicas)
		}
		generator := job.Replicas[0].Provider
		switch {
		case job.Verification == jobs.VerifiedByCheck:
			if generator == liar {
				t.Fatalf("try %d: the liar's generation was verified by a check", try)
			}
			sawHonest = true
		case generator == liar:
			if !slices.Contains(job.Liars, liar) {
				t.Fatalf("try %d: the liar generated and was not outvoted: %s, liars %v", try, job.Verification, job.Liars)
			}
			if !sawGenerated && !bytes.Equal(out, runRunner(t, net.client, s)) {
				t.Fatalf("try %d: the accepted output is not a local run's", try)
			}
			sawGenerated = true
		default: // an honest generation the check did not verify
			if (job.Verification != jobs.VerifiedByReplicas && job.Verification != jobs.VerifiedByAudit) || slices.Contains(job.Liars, generator) {
				t.Fatalf("try %d: an honest generation checked by the liar: %s, liars %v", try, job.Verification, job.Liars)
			}
			// The liar checked it and was outvoted; else an honest check
			// came too late on a loaded machine and more replicas settled
			// it without the liar: try again.
			sawChecked = slices.Contains(job.Liars, liar)
		}
	}
	if !sawGenerated && !sawChecked {
		t.Fatal("in 40 jobs the liar neither generated nor checked")
	}
	t.Logf("the liar generated %v, checked %v; honest pairs verified by the check %v", sawGenerated, sawChecked, sawHonest)
	rec := net.client.peers.Record(net.providers[2].ID())
	if rec.Lies == 0 {
		t.Error("the liar's record shows no lie")
	}
}

// submitVerified submits s from n and returns the job, which must be
// verified, and its output.
func submitVerified(tb testing.TB, n *Node, s jobs.Spec) (*store.Job, []byte) {
	tb.Helper()
	job, err := n.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		tb.Fatalf("job %v: %v", job, err)
	}
	out, err := n.Blob(job.Output, job.OutputSize)
	if err != nil {
		tb.Fatal(err)
	}
	return job, out
}

// TestCheckJobOfNewcomers: a generation and its check by two providers on
// probation agree, yet that is no more than two newcomers' replicas: with
// audits off the result comes back unverified, with audits on the client's
// own run verifies it.
func TestCheckJobOfNewcomers(t *testing.T) {
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	for _, noAudit := range []bool{true, false} {
		net := startNetwork(t, 2, func(c *Config) { c.NoAudit = noAudit }) // nobody vouched for
		q := llama.Request{Prompt: "Once upon a time", MaxTokens: 20}
		s := streamSpec(t, net.client, q)
		s.Replicas, s.Check = 1, models.Check([]llama.Request{q})
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, how := store.JobUnverified, ""
		if !noAudit {
			want, how = store.JobVerified, jobs.VerifiedByAudit
		}
		if job.State != want || job.Verification != how {
			t.Errorf("no audit %v: job %s, verified by %q; want %s, %q", noAudit, job.State, job.Verification, want, how)
		}
	}
}

// TestStreamedFromOwnRun: a streamed generation whose providers are all
// newcomers, so that only the client's own run can verify it: the client
// runs it as the job starts and streams that run's output as it comes,
// the whole completion before either replica (slowed by 15 s) has
// answered; the replicas then agree with it and the job is verified.
func TestStreamedFromOwnRun(t *testing.T) {
	t.Parallel() // waits far more than it computes
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	net := startNetwork(t, 2, func(c *Config) { c.Faults = &faults.Faults{Slow: 15 * time.Second} }) // nobody vouched for
	s := streamSpec(t, net.client, llama.Request{Prompt: "Once upon a time", MaxTokens: 40})
	s.Replicas = 2
	var (
		mu          sync.Mutex
		shown       []byte
		atFirstVote []byte
		votes       int
	)
	s.Output = func(b []byte) {
		mu.Lock()
		shown = append(shown, b...)
		mu.Unlock()
	}
	job, err := net.client.Submit(context.Background(), s, func(e jobs.Event) {
		if e.Kind != jobs.EventResult {
			return
		}
		mu.Lock()
		if votes++; votes == 1 {
			atFirstVote = bytes.Clone(shown)
		}
		mu.Unlock()
	})
	if err != nil || job.State != store.JobVerified || job.Verification != jobs.VerifiedByAudit {
		t.Fatalf("job %+v, %v: want verified by the client's own run", job, err)
	}
	out, err := net.client.Blob(job.Output, job.OutputSize)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(shown, out) {
		t.Fatalf("streamed %q, want the verified output %q", shown, out)
	}
	if votes != 2 || !bytes.Equal(atFirstVote, out) {
		t.Errorf("%d of %d bytes shown when the first of %d replicas answered: want the whole completion streamed from the client's own run",
			len(atFirstVote), len(out), votes)
	}
}

// TestStreamShownThenBackedOut: an established attacker key (E) and a
// fresh one of another network (N) stream the same made-up bytes, are
// shown (two operators, an established one among them, against an honest
// newcomer not yet that far), and then refuse their replicas rather than
// sign the lie. The client's own run decides the job with the honest
// result (an audit, as the replicas backed out after being shown), and E
// and N are outvoted for what they streamed: E is shown once, not until
// its lost replicas ban it for a while (3 shown lies and 3 failed jobs
// per established key in a red-team run; the job fails each time, as the
// stream showed a lie).
func TestStreamShownThenBackedOut(t *testing.T) {
	t.Parallel() // waits far more than it computes
	fake := []byte("made up by the attacker\n")
	i := 0
	net, _ := hostileNetwork(t, 1, 2, func() *faults.Faults {
		return &faults.Faults{StreamThenRefuse: fake, StreamThenRefuseAfter: 2 * time.Second}
	}, func(c *Config) {
		if c.Provide {
			c.Listen = []string{netgroup.SharedLoopback(30+i, 0)} // every provider its own /16
			i++
		}
	})
	c := net.client
	est, fresh := net.providers[1].ID(), net.providers[2].ID()
	c.peers.Update(est, func(r *reputation.Record, p reputation.Params, _ time.Time) { r.Proven = p.Probation })
	shown := 0
	for k := range 3 {
		// N is a fresh key each job (keys cost nothing).
		c.peers.Update(fresh, func(r *reputation.Record, p reputation.Params, _ time.Time) {
			*r = reputation.Record{FirstAdvert: r.FirstAdvert, Adverts: r.Adverts, Interval: r.Interval}
		})
		s, _ := catJob(t, c, k)
		s.Replicas = 3
		var mu sync.Mutex
		var got []byte
		s.Output = func(b []byte) { mu.Lock(); got = append(got, b...); mu.Unlock() }
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		job, err := c.Submit(ctx, s, nil)
		cancel()
		mu.Lock()
		if bytes.Contains(got, fake) {
			shown++
			if err == nil {
				t.Errorf("job %d: the made-up bytes were shown and the job ended %v with no error", k, job.State)
			}
		}
		mu.Unlock()
	}
	t.Logf("the made-up stream was shown in %d of 3 jobs; the established key's record %+v", shown, c.peers.Record(est))
	if shown > 1 {
		t.Errorf("the made-up stream was shown in %d of 3 jobs: its established key went on after the first", shown)
	}
	if shown == 1 && c.peers.Record(est).Lies == 0 {
		t.Errorf("the established key's stream was shown, contradicted, and it is not outvoted: %+v", c.peers.Record(est))
	}
}
