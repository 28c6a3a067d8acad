package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
)

// needsGPU reports whether req matches advert a only for its GPU claim:
// it matches a, but not a with its GPUs and its "cuda" backends removed.
// Only such jobs need a challenge: others would go to a the same without
// the claim.
func needsGPU(req *requirement.Program, a *wire.CapabilityAdvert) bool {
	if a == nil || (len(a.GPUs) == 0 && !slices.ContainsFunc(a.Backends, isCUDA)) {
		return false
	}
	if ok, err := req.Match(requirement.FromAdvert(a, 1)); !ok || err != nil {
		return false
	}
	bare := *a
	bare.GPUs = nil
	bare.Backends = slices.DeleteFunc(slices.Clone(a.Backends), isCUDA)
	ok, err := req.Match(requirement.FromAdvert(&bare, 1))
	return !ok || err != nil
}

func isCUDA(name string) bool { return strings.HasPrefix(name, "cuda") }

// checkGPU challenges p before it is asked to bid, when the job matched
// p's advert only for the GPU it claims. A failed challenge is a lie (a
// wrong row convicts p at once, a late root counts as one outvote) and
// the replica goes elsewhere. A refusal or a transport
// error passes on as errRefused (with errBusy when p may accept later)
// or errUnreachable, and p gets no GPU-only job until it passes.
func (j *jobRun) checkGPU(ctx context.Context, p peer.ID) error {
	n := j.c.n
	j.mu.Lock()
	a := j.matched[p].Advert
	j.mu.Unlock()
	if !needsGPU(j.req, a) {
		return nil
	}
	params := n.GPUChallenge
	err := n.Peers.GPUChallenge(ctx, p, func(ctx context.Context) (challenge.Report, error) {
		rep, err := challenge.Run(ctx, n.Host, p, params)
		n.Logger.Info("GPU challenge", "peer", p, "n", rep.N, "root", rep.Elapsed, "deadline", rep.Deadline,
			"rows", rep.Rows, "verify", rep.Verify, "err", err)
		switch {
		case errors.Is(err, challenge.ErrWrongRow):
			j.convict(p) // a signed wrong answer
		case errors.Is(err, challenge.ErrFailed):
			// Too slow for the GPU it claims: a lie, but one an honest GPU
			// behind a slow link could tell once; a newcomer's first lie, or
			// anyone's second, bans it.
			n.Peers.Outvote(p, j.ann.Job)
		}
		return rep, err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, challenge.ErrFailed):
		return fmt.Errorf("%w: GPU challenge: %w", ErrLie, err)
	case errors.Is(err, challenge.ErrBusy):
		// Asked again after a back-off, as a busy bid is: one client's
		// exchange under way must not drop the provider from the job.
		return fmt.Errorf("%w: %w: GPU challenge: %w", errRefused, errBusy, err)
	case errors.Is(err, challenge.ErrRefused):
		return fmt.Errorf("%w: GPU challenge: %w", errRefused, err)
	}
	return fmt.Errorf("GPU challenge: %w: %w", errUnreachable, err)
}
