package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/redundancy"
)

// outcome is what one replica goroutine ends with.
type outcome struct {
	replica uint8
	res     *wire.Result
	err     error
}

// run drives the job to a final state and records it. Replicas run on
// distinct providers; the vote counts only what established providers
// say (a newcomer's identity costs nothing, so newcomers can neither
// outvote them nor decide a vote on their own). When no established group
// decides, the client runs the job itself (an audit) and holds every
// replica to its answer; without an audit, replicas are added, established
// ones first, up to 2R+1, and a result newcomers alone agree on comes back
// unverified. The outvoted are recorded as liars. With adaptive replication
// a trusted provider may run the job alone, unless this job is drawn for a
// spot check; with jobs.Spec.Audit a share of jobs is audited whatever the vote.
func (j *jobRun) run(ctx context.Context) (*store.Job, error) {
	n := j.c.n
	if err := j.findProviders(ctx); err != nil {
		return j.finish(nil, nil, err)
	}
	j.emit(jobs.EventAnnounced, -1, "", fmt.Sprintf("%d candidates", len(j.pool)))
	want := int(j.ann.Replicas)
	if j.adaptive && want > 1 && j.trustedCandidate() && rand.Float64() >= n.SpotCheck {
		j.setTrustedOnly(true)
		want = 1
	}
	limit := min(2*int(j.ann.Replicas)+1, wire.MaxReplicas)
	results := make(chan outcome, wire.MaxReplicas)
	rctx, rcancel := context.WithCancelCause(ctx)
	defer rcancel(errJobEnded)
	j.auditEarly(rctx)
	started, running := 0, 0
	start := func() {
		r := uint8(started)
		started++
		running++
		go func() {
			res, err := j.replica(rctx, r)
			results <- outcome{r, res, err}
		}()
	}
	for range want {
		start()
	}
	var votes []*wire.Result
	var errs []error
	for running > 0 {
		o := <-results
		running--
		switch {
		case o.err != nil && j.trustedOnly() && len(errs) == 0:
			// No trusted provider could take it: replicate fully.
			j.setTrustedOnly(false)
			for range int(j.ann.Replicas) {
				start()
			}
			continue
		case o.err != nil && j.establishedOnly() && len(votes) > 0:
			// No established provider could anchor the vote: it stands
			// as the newcomers left it.
			j.setEstablishedOnly(false)
			return j.unanchored(ctx, votes)
		case o.err != nil && j.early != nil && !errors.Is(o.err, context.Canceled):
			// No provider took this replica again, but the client's own
			// run, under way, checks those that come: the job goes on.
			errs = append(errs, fmt.Errorf("replica %d: %w", o.replica, o.err))
			continue
		case o.err != nil:
			// Without this replica there is no verdict: the others are
			// given up (gaveUp), which is no fault of their providers.
			rcancel(fmt.Errorf("replica %d ended the job", o.replica))
			if !errors.Is(o.err, context.Canceled) || len(errs) == 0 {
				errs = append(errs, fmt.Errorf("replica %d: %w", o.replica, o.err))
			}
			continue
		}
		votes = append(votes, o.res)
		if running > 0 || len(errs) > 0 {
			continue
		}
		if j.checkJob != nil && !j.escalated {
			ok, err := j.runCheck(ctx, votes[0])
			if err != nil {
				return j.finish(votes, nil, err)
			}
			if ok && j.independent(peer.ID(votes[0].Provider), j.checker) {
				if j.audited(votes, j.checker) {
					return j.audit(ctx, votes)
				}
				return j.accept(ctx, votes, []int{0}, nil, jobs.VerifiedByCheck)
			}
			if ok {
				// Two newcomers, or two identities of one operator, agree: no
				// more than an unanchored vote, which identities that cost
				// nothing could stage.
				if !n.NoAudit && auditable(j.ann) {
					return j.audit(ctx, votes)
				}
				return j.accept(ctx, votes, []int{0}, nil, "") // unverified
			}
			// The replica or the checker is wrong: replicas decide which.
			j.escalated = true
			j.emit(jobs.EventDisagree, -1, "", "the check job's output differs from the replica's")
			j.setEstablishedOnly(j.establishedCandidate())
			start()
			start()
			continue
		}
		if j.trustedOnly() {
			if j.audited(votes) {
				return j.audit(ctx, votes)
			}
			return j.accept(ctx, votes, []int{0}, nil, jobs.VerifiedByTrust)
		}
		if j.audited(votes) {
			return j.audit(ctx, votes) // it tallies with the client's own run
		}
		v, err := j.tally(ctx, votes)
		if err != nil {
			return j.finish(votes, nil, err)
		}
		if w, ok := j.anchored(votes, v.Groups); ok {
			return j.accept(ctx, votes, w, losersOf(v.Groups, w), jobs.VerifiedByReplicas)
		}
		if j.ann.Replicas == 1 && !j.escalated {
			return j.accept(ctx, votes, []int{0}, nil, "")
		}
		// No established provider decides this vote.
		if !n.NoAudit && auditable(j.ann) {
			return j.audit(ctx, votes)
		}
		if started >= limit {
			if v.Decided {
				return j.unanchored(ctx, votes)
			}
			return j.finish(votes, nil, fmt.Errorf("%w after %d replicas: %s", jobs.ErrDisagree, started, describeResults(votes)))
		}
		if v.Decided && !j.establishedCandidate() {
			return j.unanchored(ctx, votes) // nobody left who could anchor it
		}
		if !v.Decided {
			j.emit(jobs.EventDisagree, -1, "", describeResults(votes))
		}
		// Another replica, on another provider, breaks the tie; an
		// established one if there is any, to anchor the vote.
		j.setEstablishedOnly(j.establishedCandidate())
		start()
	}
	if len(votes) > 0 && (j.early != nil || j.stream != nil && j.stream.shownThenDied()) {
		// Replicas were lost with nobody to take them again: the client's
		// own run decides those that came (audit), as it would have with
		// all of them. So it does when a provider whose stream was shown
		// backed out: the verdict judges what it streamed (judgeStreams).
		j.c.log.Info("replicas lost: the audit decides the others", "job", j.ann.Job, "lost", len(errs), "results", len(votes))
		j.mu.Lock()
		for _, err := range errs {
			j.rec.Unplaced = append(j.rec.Unplaced, err.Error())
		}
		j.mu.Unlock()
		return j.audit(ctx, votes)
	}
	if len(votes) == 0 && j.early != nil {
		j.c.auditor.budget.refund() // its run checked nothing
	}
	return j.finish(votes, nil, errors.Join(j.oneTimeLimit(errs)...))
}

// errJobEnded is why a job's replicas still running when its run returns
// are given up.
var errJobEnded = errors.New("the job ended")

// oneTimeLimit replaces the replicas' time-limit errors (tooShort), each
// counting the runs that had run out when it was made, by one that counts
// them all: two replicas whose runs ran out together said "on 1 provider"
// and "on 2 providers".
func (j *jobRun) oneTimeLimit(errs []error) []error {
	ops := j.timedOutOn("")
	var out []error
	first := true
	for _, err := range errs {
		if !errors.Is(err, jobs.ErrTimeLimit) {
			out = append(out, err)
			continue
		}
		if first {
			first = false
			if ops >= 2 {
				err = j.tooShort(ops)
			}
			out = append([]error{err}, out...)
		}
	}
	return out
}

// anchored returns the group of agreeing results that established
// providers decide. Providers are counted by operator (Book.Group), so that
// one operator's identities count once: the group must have established
// members of at least one operator, members of at least two operators, and
// established members of strictly more operators than any other group.
// However many newcomers agree, they do not outvote an established peer.
func (j *jobRun) anchored(votes []*wire.Result, groups [][]int) ([]int, bool) {
	book := j.c.n.Peers
	if why := book.Eclipsed(); why != "" {
		j.because(why)
		return nil, false
	}
	established := make([]int, len(groups)) // operators with an established member
	operators := make([]int, len(groups))
	best := -1
	for g, members := range groups {
		var all, est []peer.ID
		for _, i := range members {
			all = append(all, peer.ID(votes[i].Provider))
		}
		for _, id := range all {
			if book.Established(id) {
				est = append(est, id)
			}
		}
		established[g], operators[g] = operatorsAmong(book.SameOperator, est), operatorsAmong(book.SameOperator, all)
		if best < 0 || established[g] > established[best] {
			best = g
		}
	}
	if best < 0 || established[best] == 0 || operators[best] < 2 {
		return nil, false
	}
	for g := range groups {
		if g != best && established[g] >= established[best] {
			return nil, false
		}
	}
	return groups[best], true
}

// unverifiedWhy is why a job came back unverified, where nothing more
// particular (because) said so.
func (j *jobRun) unverifiedWhy() string {
	switch {
	case j.ann.Replicas == 1 && !j.escalated:
		return "one replica (--replicas 1): nothing checked it"
	case j.c.n.NoAudit:
		return "no established provider anchored the replicas' vote, and this node does not audit (node --no-audit)"
	case !auditable(j.ann):
		return "no established provider anchored the replicas' vote, and this node cannot audit the job: " + unauditableWhy(j.ann)
	}
	return "no established provider anchored the replicas' vote"
}

// because records why the job may come back unverified.
func (j *jobRun) because(why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.unverified = why
}

// independent reports whether two providers' agreement verifies a result:
// they are of distinct operators (Book.Group), and one is established,
// and this client's peers are not all one bootstrap source's (Eclipsed).
func (j *jobRun) independent(a, b peer.ID) bool {
	book := j.c.n.Peers
	if why := book.Eclipsed(); why != "" {
		j.because(why)
		return false
	}
	return !book.SameOperator(a, b) && (book.Established(a) || book.Established(b))
}

// proves reports whether id's agreement with the winners is proven: an
// established winner of another operator agrees, and this client is not
// eclipsed (whoever eclipses it may hold keys in many networks). An
// operator's own identities never graduate one another.
func (j *jobRun) proves(votes []*wire.Result, winners []int, id peer.ID) bool {
	book := j.c.n.Peers
	if book.Eclipsed() != "" {
		return false
	}
	for _, k := range winners {
		other := peer.ID(votes[k].Provider)
		if book.Established(other) && !book.SameOperator(other, id) {
			return true
		}
	}
	return false
}

// losersOf is every member of groups outside winners.
func losersOf(groups [][]int, winners []int) []int {
	var out []int
	for _, g := range groups {
		if len(g) > 0 && !slices.Contains(winners, g[0]) {
			out = append(out, g...)
		}
	}
	slices.Sort(out)
	return out
}

// unanchored ends a vote no established provider decided: the largest
// group's result is returned unverified (if two agree and outnumber the
// rest), nobody is judged, and nobody earns anything by it.
func (j *jobRun) unanchored(ctx context.Context, votes []*wire.Result) (*store.Job, error) {
	if j.isFair() {
		// An output sold by fair exchange is seen only once it is paid for.
		return j.finish(votes, nil, fmt.Errorf("%w: no established provider agrees, and a fair-exchange output cannot be checked before it is bought (vouch for providers with --trust)", jobs.ErrDisagree))
	}
	v, err := j.tally(ctx, votes)
	if err != nil {
		return j.finish(votes, nil, err)
	}
	if !v.Decided {
		return j.finish(votes, nil, fmt.Errorf("%w: %s", jobs.ErrDisagree, describeResults(votes)))
	}
	if _, err := j.output(ctx, votes[v.Winner[0]], nil); err != nil {
		return j.finish(votes, nil, fmt.Errorf("output: %w", err))
	}
	return j.finish(votes, &verdict{best: votes[v.Winner[0]], agree: len(v.Winner)}, nil)
}

// audit runs the job here and accepts what agrees with this run: those
// replicas are proven, every other one signed a wrong result and is
// convicted. If none agrees, the client's own output is the job's.
func (j *jobRun) audit(ctx context.Context, votes []*wire.Result) (*store.Job, error) {
	n := j.c.n
	var own *wire.Result
	err := ErrAuditCap
	if j.early != nil {
		select {
		case e := <-j.early:
			own, err = e.res, e.err
		case <-ctx.Done():
			own, err = nil, ctx.Err()
		}
		j.early = nil
	} else if j.c.auditor.budget.take() {
		j.emit(jobs.EventAudit, -1, "", "after the replicas")
		own, err = j.c.auditor.run(ctx, j.ann, j.input, nil)
	} else {
		j.because("this client ran its share of audits (node --audit-cap)")
		j.emit(jobs.EventDisagree, -1, "", "not audited: "+err.Error())
	}
	if err == nil && j.ann.Mode == wire.ModeTolerance && j.tolerance() == nil {
		// Compared bit for bit, a run on another backend class proves
		// nothing: another backend, or the same one at another revision
		// of its numerics. The replicas' class is the job's when it fixed
		// one (SameBackend), else only their backend is known.
		j.mu.Lock()
		fixed := j.backend
		j.mu.Unlock()
		mine, theirs := own.Backend, votes[0].Backend
		if fixed != "" {
			mine, theirs = class(own.Backend, uint16(tensor.Revision(own.Backend))), fixed
		}
		if mine != theirs {
			err = fmt.Errorf("%w: this client runs it on %s, the replicas on %s", ErrNoAudit, mine, theirs)
		}
	}
	if err != nil {
		j.c.log.Warn("audit failed", "job", j.ann.Job, "err", err)
		if v, terr := j.tally(ctx, votes); terr == nil {
			if w, ok := j.anchored(votes, v.Groups); ok {
				return j.accept(ctx, votes, w, losersOf(v.Groups, w), jobs.VerifiedByReplicas)
			}
		}
		return j.unanchored(ctx, votes)
	}
	if tol := j.tolerance(); tol != nil {
		// An honest output that is not the format --compare reads is the
		// job's, not its providers': it compares equal to nothing, so
		// every replica would be convicted (a newcomer's walk: text under
		// --compare f32 banned two honest, established providers).
		out, err := j.output(ctx, own, nil)
		if err == nil {
			err = tol.Fits(out)
		}
		if err != nil {
			return j.finish(votes, nil, fmt.Errorf("this client's own run: %w (--compare %v reads the output as such; compare otherwise, or bit for bit without --compare)", err, tol.Format))
		}
	}
	all := append(slices.Clone(votes), own)
	v, err := j.tally(ctx, all)
	if err != nil {
		return j.finish(votes, nil, err)
	}
	var winners []int
	for _, g := range v.Groups {
		if slices.Contains(g, len(votes)) {
			winners = slices.DeleteFunc(slices.Clone(g), func(i int) bool { return i == len(votes) })
		}
	}
	losers := losersOf(v.Groups, append(winners, len(votes)))
	if len(winners) == 0 {
		// Every replica was wrong: the client's own run is the answer.
		for _, i := range losers {
			j.convict(peer.ID(votes[i].Provider))
		}
		j.c.remember(j, own)
		v := &verdict{best: own, how: jobs.VerifiedByAudit, liars: pick(votes, losers)}
		if j.stream != nil {
			// What the replicas streamed may have been released: the
			// answer must continue it, or the job fails (a lie shown).
			out, err := j.output(ctx, own, nil)
			if err == nil {
				j.judgeStreams(votes, out)
				err = j.stream.finish(out)
			}
			if err != nil {
				return j.finish(votes, v, err)
			}
		}
		n.Counts.Verified.Add(1)
		return j.finish(votes, v, nil)
	}
	return j.accept(ctx, votes, winners, losers, jobs.VerifiedByAudit)
}

// earlyAudit is the outcome of an audit started with its job.
type earlyAudit struct {
	res *wire.Result
	err error
}

// auditEarly starts the client's own run of a job as the job starts, when
// an audit is all but certain: exact mode, and no established provider
// among the candidates to anchor the vote, so that newcomers' replicas
// alone never decide it. It runs beside the replicas rather than after
// them (a new network's job took twice its replicas' time), and a
// streamed job's output streams from it as it comes (streamVote.own);
// audit takes its result. It spends an audit of the budget, or starts
// nothing when the budget is spent. An adaptive job's that is not
// streamed waits for its replicas, as before: those jobs are where
// verification's overhead is counted, and a pool that lacks established
// providers for a moment (a loaded machine's adverts late) would start
// audits that the vote, anchored once they are back, never needed.
func (j *jobRun) auditEarly(ctx context.Context) {
	n := j.c.n
	if j.ann.Mode != wire.ModeExact || n.NoAudit || !auditable(j.ann) || j.adaptive && j.stream == nil ||
		j.establishedCandidate() || !j.c.auditor.budget.take() {
		return
	}
	var tee io.Writer
	if j.stream != nil {
		tee = writerFunc(j.stream.own)
	}
	j.early = make(chan earlyAudit, 1)
	j.emit(jobs.EventAudit, -1, "", "beside the replicas: no established provider can anchor their vote")
	// The run can outlive the job's (a verdict the audit was not needed
	// for): cancelled with it, it still writes, its spool and perhaps its
	// output blob. The node's Close stops it and waits: it had written in
	// a test's data directory as its cleanup removed it.
	ctx, stop := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(n.Life, stop)
	run := func() {
		defer stopOnClose()
		defer stop()
		res, err := j.c.auditor.run(ctx, j.ann, j.input, tee)
		j.early <- earlyAudit{res, err}
	}
	if !n.Group.Go(run) {
		stopOnClose()
		stop()
		j.early <- earlyAudit{nil, fmt.Errorf("audit: %w", context.Canceled)} // the node is closing
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// pick returns votes[i] for each i of idx.
func pick(votes []*wire.Result, idx []int) []*wire.Result {
	var out []*wire.Result
	for _, i := range idx {
		out = append(out, votes[i])
	}
	return out
}

// NewRecord is how many proven results a provider's record needs before
// its jobs are audited at Config.Audit rather than Config.AuditNew: four
// probations. An operator that keeps making identities keeps paying the
// higher share.
const NewRecord = 20

// audited reports whether this job, run by the providers of votes (and a
// check job's checker), is drawn for an audit: its roll falls under the
// largest of jobs.Spec.Audit, Config.Audit, and Config.AuditNew when one of
// them has a new record. An attacker cannot tell which jobs are audited:
// the roll is the client's, drawn when the job starts.
func (j *jobRun) audited(votes []*wire.Result, others ...peer.ID) bool {
	n := j.c.n
	if n.NoAudit || !auditable(j.ann) {
		return false
	}
	share := max(j.auditShare, n.Audit)
	ids := others
	for _, v := range votes {
		ids = append(ids, peer.ID(v.Provider))
	}
	for _, id := range ids {
		if id != "" && n.Peers.Young(id, NewRecord) {
			share = max(share, n.AuditNew)
		}
	}
	return j.auditRoll < share
}

// tally compares the replicas' results: exact mode by output digest,
// tolerance mode by the declared format and tolerance; outcomes, fair
// exchange commitments and GEMM proofs' digests must match exactly.
func (j *jobRun) tally(ctx context.Context, votes []*wire.Result) (redundancy.Verdict, error) {
	tol := j.tolerance()
	vs := make([]redundancy.Vote, len(votes))
	for i, r := range votes {
		key := fmt.Sprintf("%d/%d/%s/%s/%s", r.Outcome, r.ExitCode, r.Error, j.commitment(r), j.proofDigests(r))
		vs[i] = redundancy.Vote{Key: key, Digest: r.Output}
		if tol != nil {
			var hints []peer.ID
			if r.Sig != nil {
				hints = []peer.ID{peer.ID(r.Provider)}
			}
			out, err := j.output(ctx, r, hints)
			if err != nil {
				return redundancy.Verdict{}, fmt.Errorf("output of replica %d: %w", r.Replica, err)
			}
			vs[i].Output = out
		}
	}
	return redundancy.Tally(vs, tol, 2), nil
}

// tolerance is the job's comparison rule; nil means bit for bit.
func (j *jobRun) tolerance() *redundancy.Tolerance {
	if j.ann.Mode != wire.ModeTolerance || j.ann.Format == 0 {
		return nil
	}
	return &redundancy.Tolerance{Rtol: j.ann.Rtol, Atol: j.ann.Atol, Format: redundancy.Format(j.ann.Format)}
}

// output returns a result's output, fetching it from hints when it did
// not come inline, and keeps it in the blob store.
func (j *jobRun) output(ctx context.Context, r *wire.Result, hints []peer.ID) ([]byte, error) {
	n := j.c.n
	if r.OutputData != nil {
		if _, err := n.Blobs.PutBytes(r.OutputData); err != nil {
			return nil, err
		}
		return r.OutputData, nil
	}
	if _, ok := n.Blobs.Has(r.Output); ok {
		// Here already (an audit's own output, or fetched before).
	} else if r.OutputSize > 0 {
		if err := n.BlobSvc.Fetch(ctx, r.Output, r.OutputSize, hints); err != nil {
			return nil, err
		}
	} else if _, err := n.Blobs.PutBytes(nil); err != nil {
		return nil, err
	}
	return n.Blobs.Bytes(r.Output, r.OutputSize)
}

// accept makes the winning output local, settles reputations (winners
// agreed, losers lied) and records the job.
func (j *jobRun) accept(ctx context.Context, votes []*wire.Result, winners, losers []int, how string) (*store.Job, error) {
	n := j.c.n
	best := votes[winners[0]]
	j.mu.Lock()
	slow := j.outOfTime
	j.outOfTime = nil
	j.mu.Unlock()
	for _, p := range slow {
		n.Peers.Lose(p) // others ran the job within its limit
	}
	var hints []peer.ID
	for _, i := range winners {
		hints = append(hints, peer.ID(votes[i].Provider))
	}
	var out []byte
	if j.isFair() {
		// The verdict is recorded before anything is paid, so that an
		// output opened after a restart (openBought) is known verified.
		j.mu.Lock()
		j.rec.Verification, j.rec.Agree = how, len(winners)
		rec := *j.rec
		rec.Replicas = append([]store.Replica(nil), j.rec.Replicas...)
		j.mu.Unlock()
		if err := n.DB.PutJob(&rec); err != nil {
			return j.finish(votes, nil, err)
		}
		var won []*wire.Result
		for _, i := range winners {
			won = append(won, votes[i])
		}
		var err error
		if out, err = j.buy(ctx, won); err == nil {
			_, err = n.Blobs.PutBytes(out)
		}
		if err != nil {
			return j.finish(votes, nil, err)
		}
	} else {
		var err error
		if out, err = j.output(ctx, best, hints); err != nil {
			return j.finish(votes, nil, fmt.Errorf("output: %w", err))
		}
	}
	// The verdict stands whatever was streamed: winners and losers are
	// judged first, so that liars whose stream was shown before the truth
	// came are not spared by the job's failure.
	j.judge(votes, winners, losers, how, best)
	won := map[*wire.Result]bool{}
	for _, i := range winners {
		won[votes[i]] = true
	}
	v := &verdict{best: best, agree: len(winners), how: how, liars: pick(votes, losers), winners: won}
	if j.stream != nil && how != "" {
		j.judgeStreams(votes, out)
		if err := j.stream.finish(out); err != nil {
			return j.finish(votes, v, err)
		}
	}
	n.Counts.Verified.Add(1)
	if j.adaptive && rand.Float64() < n.Canary {
		j.c.sendCanary()
	}
	return j.finish(votes, v, nil)
}

// judgeStreams outvotes the providers whose streams out, the verified
// output, contradicts and whose results did not vote (those the verdict
// judged): an attempt that streamed made-up bytes and then backed out, by
// a refusal or a dropped connection, had cost its provider only a lost
// replica, however often its bytes were shown (a red-team run: an
// established key and a fresh one, 3 shown lies per established key).
func (j *jobRun) judgeStreams(votes []*wire.Result, out []byte) {
	if j.ann.Mode == wire.ModeTolerance && !j.ann.SameBackend {
		return // honest replicas of other backends may part at a near-tie
	}
	voted := func(p peer.ID) bool {
		return slices.ContainsFunc(votes, func(r *wire.Result) bool { return peer.ID(r.Provider) == p })
	}
	for _, p := range j.stream.contradicting(out, voted) {
		j.c.log.Warn("a provider's stream contradicts the verified output", "job", j.ann.Job, "provider", p)
		j.c.n.Peers.Outvote(p, j.ann.Job)
	}
}

// judge settles the reputations of a verdict's providers: winners agreed,
// losers lied (outvoted, or convicted by the client's own run).
func (j *jobRun) judge(votes []*wire.Result, winners, losers []int, how string, best *wire.Result) {
	n := j.c.n
	switch how {
	case jobs.VerifiedByReplicas:
		for _, i := range winners {
			if id := peer.ID(votes[i].Provider); j.proves(votes, winners, id) {
				n.Peers.Agree(id)
			} else {
				n.Peers.Concur(id)
			}
		}
		for _, i := range losers {
			n.Peers.Outvote(peer.ID(votes[i].Provider), j.ann.Job)
		}
		if j.checker != "" && slices.Contains(winners, 0) {
			n.Peers.Outvote(j.checker, j.ann.Job) // its check contradicted the truth
		}
	case jobs.VerifiedByCheck:
		n.Peers.Agree(peer.ID(best.Provider))
		n.Peers.Agree(j.checker)
	case jobs.VerifiedByAudit:
		// The client's own run is the proof: for the winners, and against
		// everyone who signed anything else.
		for _, i := range winners {
			n.Peers.Agree(peer.ID(votes[i].Provider))
		}
		for _, i := range losers {
			j.convict(peer.ID(votes[i].Provider))
		}
		if j.checker != "" && j.escalated && slices.Contains(winners, 0) {
			// Its check contradicted the generation the client's own run
			// confirms: outvoted, as a vote would have it (an audit drawn
			// after the check disagreed left it unjudged, and a liar that
			// only checks went unnoticed).
			n.Peers.Outvote(j.checker, j.ann.Job)
		}
		j.c.remember(j, best)
	}
}

// verdict is an accepted result and how it was reached.
type verdict struct {
	best    *wire.Result
	agree   int
	how     string
	liars   []*wire.Result
	winners map[*wire.Result]bool // whose payments are released
}

// finish records the job's final state: accepted with v, or failed with err.
func (j *jobRun) finish(votes []*wire.Result, v *verdict, err error) (*store.Job, error) {
	// Paid replicas: those whose result was accepted are paid, everyone
	// else's invoice is cancelled. Each step is recorded before it is taken (settleOut).
	var won map[*wire.Result]bool
	if v != nil {
		won = v.winners
	}
	j.settleAll(won)
	j.mu.Lock()
	rec := j.rec
	rec.Finished = time.Now()
	switch {
	case err != nil:
		rec.State, rec.Error = store.JobFailed, err.Error()
	case v.how == "":
		rec.State, rec.Unverified = store.JobUnverified, j.unverified
		if rec.Unverified == "" {
			rec.Unverified = j.unverifiedWhy()
		}
	default:
		rec.State, rec.Verification = store.JobVerified, v.how
	}
	if v != nil {
		// With err too, the verdict stands and the job failed anyway (its
		// stream showed what the verdict contradicts): its liars are on
		// record, and the winners paid.
		rec.Output, rec.OutputSize, rec.ExitCode = v.best.Output, v.best.OutputSize, v.best.ExitCode
		rec.Agree, rec.Outcome = v.agree, v.best.Outcome
		if err == nil {
			rec.Error = v.best.Error
		}
		rec.Proofs = j.proofs[v.best] // j.mu is held
		for _, l := range v.liars {
			rec.Liars = append(rec.Liars, peer.ID(l.Provider).String())
			if id := peer.ID(l.Provider).String(); j.convicted[id] && !slices.Contains(rec.Convicted, id) {
				rec.Convicted = append(rec.Convicted, id)
			}
			for i := range rec.Replicas {
				if rec.Replicas[i].Provider == peer.ID(l.Provider).String() && rec.Replicas[i].Index == l.Replica {
					rec.Replicas[i].State = store.ReplicaOutvoted
				}
			}
		}
	}
	out := *rec
	out.Replicas = append([]store.Replica(nil), rec.Replicas...)
	j.mu.Unlock()
	if j.ephemeral {
		return &out, err
	}
	if perr := j.c.n.DB.PutJob(&out); perr != nil {
		return &out, errors.Join(err, perr)
	}
	return &out, err
}

func describeResults(rs []*wire.Result) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " vs "
		}
		s += fmt.Sprintf("%s: exit %d output %s", peer.ID(r.Provider).ShortString(), r.ExitCode, r.Output.Short())
		if r.Error != "" {
			s += " (" + r.Error + ")"
		}
	}
	return s
}

// establishedCandidate reports whether an established provider of an
// operator holding no replica of this job is among the candidates.
func (j *jobRun) establishedCandidate() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	held := j.heldGroupsLocked()
	for _, c := range j.pool {
		if !held[j.c.n.Peers.Group(c.ID)] && j.c.n.Peers.Established(c.ID) {
			return true
		}
	}
	return false
}

// heldGroupsLocked is the operators holding a replica of this job, by
// their main network (Book.Group): no other replica goes to them. A draw
// goes by the main network alone, so that an identity seen from other
// networks besides (addresses in honest operators' /16s, which a cloud's
// customers share) cannot keep their operators off the jobs it holds; a
// vote goes by all of them (SameOperator), so such an identity's
// agreement with one of those networks verifies nothing. j.mu must be
// held.
func (j *jobRun) heldGroupsLocked() map[string]bool {
	held := map[string]bool{}
	for id, ok := range j.holders {
		if ok {
			held[j.c.n.Peers.Group(id)] = true
		}
	}
	return held
}

// operatorsAmong counts the operators ids belong to, at least: identities
// that may be one operator's (same: Book.SameOperator) count once.
func operatorsAmong(same func(a, b peer.ID) bool, ids []peer.ID) int {
	var distinct []peer.ID
	for _, id := range ids {
		if !slices.ContainsFunc(distinct, func(o peer.ID) bool { return same(o, id) }) {
			distinct = append(distinct, id)
		}
	}
	return len(distinct)
}

func (j *jobRun) establishedOnly() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.onlyEstablished
}

func (j *jobRun) setEstablishedOnly(v bool) {
	j.mu.Lock()
	j.onlyEstablished = v
	j.mu.Unlock()
}

// trustedCandidate reports whether a trusted provider is among the candidates.
func (j *jobRun) trustedCandidate() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range j.pool {
		if c.Trusted {
			return true
		}
	}
	return false
}

func (j *jobRun) trustedOnly() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.onlyTrusted
}

func (j *jobRun) setTrustedOnly(v bool) {
	j.mu.Lock()
	j.onlyTrusted = v
	j.mu.Unlock()
}

// knownAnswer is a verified job kept for canaries: its terms, its input and
// the output every honest provider returns.
type knownAnswer struct {
	ann    wire.JobAnnounce
	input  []byte
	output blob.Digest
	vks    map[int]groth16.VerifyingKey // a proof-mode job's verifying keys
}

// maxKnown caps the canary pool.
const maxKnown = 32

// remember keeps a job this client computed itself (an audit) as a
// possible canary: a canary's answer must never be one a vote could have
// been won with.
func (c *Client) remember(j *jobRun, own *wire.Result) {
	if j.ephemeral || (j.ann.InputSize > 0 && j.input == nil) || j.isFair() ||
		j.tolerance() != nil || own.Outcome != wire.OutcomeExited {
		return // canaries carry their input inline, are escrowed and exact
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := knownAnswer{ann: *j.ann, input: j.input, output: own.Output, vks: j.vks}
	if len(c.known) < maxKnown {
		c.known = append(c.known, k)
	} else {
		c.known[rand.IntN(maxKnown)] = k
	}
}

// sendCanary sends a job whose answer is known to a trusted provider, as
// one ordinary replica under a fresh job id, and judges the provider by it.
func (c *Client) sendCanary() {
	c.mu.Lock()
	if len(c.known) == 0 {
		c.mu.Unlock()
		return
	}
	k := c.known[rand.IntN(len(c.known))]
	c.mu.Unlock()
	n := c.n
	var trusted []peers.Candidate
	for _, cand := range n.Peers.Candidates(alwaysMatch, k.ann.Price, k.ann.Memory, 3*n.AdvertInterval, nil) {
		if cand.Trusted {
			trusted = append(trusted, cand)
		}
	}
	if len(trusted) == 0 {
		return
	}
	p := trusted[rand.IntN(len(trusted))].ID
	n.Group.Go(func() {
		now := time.Now()
		ann := k.ann
		ann.Job, ann.Replicas, ann.Time = wire.NewJobID(), 1, wire.Millis(now)
		ann.Deadline = wire.Millis(now.Add(2*ann.Timeout() + 30*time.Second))
		j := &jobRun{c: c, ann: &ann, req: alwaysMatch, input: k.input, ephemeral: true, vks: k.vks,
			holders: map[peer.ID]bool{}, matched: map[peer.ID]peers.Candidate{}, bidBackend: map[peer.ID]string{}, late: map[uint8]chan *wire.Result{0: make(chan *wire.Result, 1)},
			rec: &store.Job{ID: ann.Job, Announce: ann, Created: now}}
		defer c.track(j)()
		ctx, cancel := context.WithDeadline(n.Life, time.UnixMilli(ann.Deadline))
		defer cancel()
		res, err := j.attempt(ctx, 0, p)
		right := err == nil && res.Output == k.output
		if err == nil && !right {
			j.convict(p) // the answer is the client's own
		}
		j.settleAll(map[*wire.Result]bool{res: right}) // a canary is paid like any replica
		if err != nil {
			return // the attempt already counted a loss
		}
		n.Counts.Canaries.Add(1)
		if right {
			n.Peers.Agree(p)
		}
	})
}

// runCheck runs the check job of the replica res (jobs.Spec.Check) on another
// provider and reports whether its output confirms res's.
//
// An exact-mode job runs on the reference kernels everywhere, bit for bit,
// so its check is exact. A tolerance-mode job runs on each provider's fast
// backend, and its check allows near-ties of Config.CheckTie logits: where
// the model's top two logits are closer than the rounding error between
// two computations, an honest generator and an honest checker choose
// different tokens. That happens across backend classes (a GPU's kernels
// and a CPU's sum in other orders) and within one too: a generation's
// decode steps are one-row products (a GPU's GEMV kernel), its check's
// batched passes many-row ones (cuBLAS), and a class name is only what a
// provider says of itself. The checker's report says how many near-ties
// it took. A liar who picks near-tie tokens on purpose still writes a
// completion the model produces within rounding error; one who claims a
// near-tie where the gap is larger is caught, as the checker computes the
// logits itself.
func (j *jobRun) runCheck(ctx context.Context, res *wire.Result) (bool, error) {
	n := j.c.n
	provider := peer.ID(res.Provider)
	out, err := j.output(ctx, res, []peer.ID{provider})
	if err != nil {
		return false, fmt.Errorf("output: %w", err)
	}
	var tie float32
	if j.ann.Mode == wire.ModeTolerance {
		tie = n.CheckTie
	}
	input, err := j.checkJob.Input(out, tie)
	if err != nil {
		j.c.log.Warn("the replica's output cannot be checked", "job", j.ann.Job, "provider", provider, "err", err)
		return false, nil
	}
	in, err := n.Blobs.PutBytes(input)
	if err != nil {
		return false, err
	}
	spec := j.spec
	spec.Input, spec.InputSize = in, int64(len(input))
	spec.Check, spec.Output, spec.Adaptive, spec.Audit = nil, nil, false, 0
	spec.Deadline = time.Until(time.UnixMilli(j.ann.Deadline))
	// The checker comes from another operator: the generator's own
	// identities would check whatever it wrote.
	avoid := []peer.ID{provider}
	j.mu.Lock()
	for _, c := range j.pool {
		if c.ID != provider && n.Peers.SameOperator(c.ID, provider) {
			avoid = append(avoid, c.ID)
		}
	}
	j.mu.Unlock()
	rec, err := j.c.submit(ctx, spec, avoid, nil)
	if err != nil {
		return false, fmt.Errorf("check job: %w", err)
	}
	var checker *wire.Result // the check job's accepted result
	for _, r := range rec.Replicas {
		if r.Result != nil && r.Result.Output == rec.Output {
			checker = r.Result
		}
	}
	if checker != nil {
		j.checker = peer.ID(checker.Provider)
	} else if len(rec.Replicas) > 0 {
		if id, err := peer.Decode(rec.Replicas[len(rec.Replicas)-1].Provider); err == nil {
			j.checker = id
		}
	}
	ok, note := j.confirms(res, out, rec, checker, tie)
	// Its own record says whose check it is: alone, one replica of it
	// would read as an unverified job.
	rec.CheckOf = j.ann.Job
	if rec.State == store.JobUnverified {
		rec.Unverified = fmt.Sprintf("the check of job %s: its output is held against that job's, which it verifies", j.ann.Job)
	}
	if err := n.DB.PutJob(rec); err != nil {
		j.c.log.Warn("recording a check job", "job", rec.ID, "err", err)
	}
	j.emit(jobs.EventResult, -1, j.checker, fmt.Sprintf("check job %s: output %s%s", rec.ID, rec.Output.Short(), note))
	return ok, nil
}

// confirms reports whether the check job rec, its accepted result
// checker's, confirms res, whose output is out: the same output, or, with
// a tie bound, one that differs by near-ties alone, or by the rounding of
// logprobs (jobs.Checker.Confirms).
// note tells of the near-ties.
func (j *jobRun) confirms(res *wire.Result, out []byte, rec *store.Job, checker *wire.Result, tie float32) (ok bool, note string) {
	switch {
	case rec.ExitCode != res.ExitCode:
		return false, ""
	case rec.Output == res.Output && rec.OutputSize == res.OutputSize:
		return true, ""
	case checker == nil || rec.Output.IsZero():
		return false, ""
	}
	log := j.c.log.With("job", j.ann.Job, "provider", peer.ID(res.Provider), "checker", j.checker)
	checked, err := j.c.n.Blobs.Bytes(rec.Output, rec.OutputSize)
	if err != nil {
		log.Warn("the check job's output is not here", "err", err)
		return false, ""
	}
	ties, gap, ok := j.checkJob.Confirms(out, checked, tie)
	if !ok || ties == 0 { // without near-ties, logprobs within rounding
		return ok, ""
	}
	note = fmt.Sprintf(", %d near-ties (the largest gap %.3g logits) between %s and %s", ties, gap, res.Backend, checker.Backend)
	log.Info("the check took near-ties", "backends", res.Backend+"/"+checker.Backend, "ties", ties, "gap", gap)
	return true, note
}
