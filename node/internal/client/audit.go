package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/wire"
)

// An audit is the client running a job itself, on its own machine, under
// the job's terms: the one anchor no number of colluding identities can
// move. A replica that disagrees with it signed a result proven wrong.
// Clients audit the jobs whose vote no established peer decides (until
// providers earn their place) and, with jobs.Spec.Audit, a random share of all.

// ErrNoAudit: this job cannot be checked by running it here.
var ErrNoAudit = errors.New("job cannot be audited here")

// ErrAuditCap: the client ran its share of audits (Config.AuditCap).
var ErrAuditCap = fmt.Errorf("%w: this client ran its share of audits", ErrNoAudit)

// auditor runs audits. Its sandbox is the provider's when this node is
// one, else one opened at the first audit.
type auditor struct {
	n      *Config
	slots  chan struct{} // audits at once: half the CPUs
	budget auditBudget

	once sync.Once
	sb   *host.Sandbox
	set  *backends.Set // set when the auditor opened the sandbox itself
	err  error
}

func newAuditor(n *Config, share float64) *auditor {
	return &auditor{n: n, slots: make(chan struct{}, max(1, runtime.NumCPU()/2)),
		budget: auditBudget{share: share, tokens: auditBurst}}
}

// auditBurst is how many audits a client may run ahead of its share: a
// new network's first jobs all need one, until providers are established.
const auditBurst = 16

// auditBudget caps a client's audits at a share of its jobs (a token
// bucket: each job adds share, each audit takes one), so that identities
// that cost nothing cannot make the client do their work: however many
// there are, its own work per job is bounded.
type auditBudget struct {
	mu     sync.Mutex
	share  float64 // 0: no cap
	tokens float64 // guarded by mu
}

// job credits one job's share.
func (b *auditBudget) job() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+b.share, auditBurst)
}

// take spends one audit; false past the cap.
func (b *auditBudget) take() bool {
	if b.share <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refund gives back an audit taken for a job that ended before any
// replica's result came (its own run then checked nothing), so that
// providers that fail every replica cannot spend the budget for nothing.
func (b *auditBudget) refund() {
	if b.share <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+1, auditBurst)
}

// sandbox returns the sandbox audits run in, opening it the first time.
func (a *auditor) sandbox(ctx context.Context) (*host.Sandbox, error) {
	a.once.Do(func() {
		if a.n.Sandbox != nil {
			if a.sb = a.n.Sandbox(); a.sb != nil {
				return
			}
		}
		rt := a.n.Runtime
		rt.ProvingKeys = nil // an audit proves nothing
		a.sb, a.set, a.err = runner.Open(ctx, rt)
	})
	return a.sb, a.err
}

func (a *auditor) close() error {
	if a.set == nil {
		return nil
	}
	return errors.Join(a.sb.Close(context.Background()), a.set.Close())
}

// auditable reports whether the client's own run can stand for the job's
// true answer: exact mode, or tolerance mode with a numeric comparison
// (bit-for-bit tolerance jobs differ by backend), and no GEMM proofs (the
// client proves nothing, so a proof-mode guest would run differently), and
// not sold by fair exchange (replicas vote on commitments to outputs that
// the client only sees once it has paid).
// A bit-for-bit tolerance job on one backend class (SameBackend) is
// auditable too, when the client's run turns out to be on that class.
func auditable(an *wire.JobAnnounce) bool {
	if an.Proofs || an.Settle == wire.SettleFair {
		return false
	}
	return an.Mode == wire.ModeExact || an.Format != 0 || an.SameBackend
}

// unauditableWhy says why a job that is not auditable is not, and what
// would make it so.
func unauditableWhy(an *wire.JobAnnounce) string {
	switch {
	case an.Proofs:
		return "a proof-mode job runs its GEMMs with proofs this node does not make (--trust the providers you run, see docs/proofs.md)"
	case an.Settle == wire.SettleFair:
		return "by fair exchange this node sees an output only once it has paid for it"
	}
	return "tolerance mode compared bit for bit gives other bits on another backend (--compare f32|f64|text compares within a tolerance, --same-backend runs every replica on one backend class)"
}

// RunHere runs the job of an in this node's own sandbox, as an audit does,
// and returns its result, unsigned, its output in the blob store: a check
// that trusts no provider (an aggregator's spot check). The job's module,
// input and data must be in the store. It is ErrNoAudit for a job whose
// run here proves nothing (see auditable).
func (c *Client) RunHere(ctx context.Context, an *wire.JobAnnounce) (*wire.Result, error) {
	res, err := c.auditor.run(ctx, an, nil, nil)
	if err != nil {
		return nil, err
	}
	if res.Outcome != wire.OutcomeExited || res.ExitCode != 0 {
		return res, fmt.Errorf("it did not exit 0 here (%s)", res.Key())
	}
	return res, nil
}

// run runs the job of an (its input inline, or in the store) here and
// returns the result a provider would sign, unsigned, its output in the
// blob store; tee, where not nil, is given the output as it is written.
func (a *auditor) run(ctx context.Context, an *wire.JobAnnounce, input []byte, tee io.Writer) (*wire.Result, error) {
	if !auditable(an) {
		return nil, ErrNoAudit
	}
	n := a.n
	sb, err := a.sandbox(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit sandbox: %w", err)
	}
	if p := an.TensorPrecision(); !slices.Contains(sb.Precisions(), p) {
		// Another precision's run proves nothing of these replicas, and
		// might convict honest ones: no audit.
		return nil, fmt.Errorf("%w: precision %v not offered here", ErrNoAudit, p)
	}
	module, err := n.Blobs.Bytes(an.Module, n.MaxModule)
	if err != nil {
		return nil, fmt.Errorf("audit module: %w", err)
	}
	job := host.Job{Module: module, Digest: an.Module, Input: input}
	for _, d := range an.Data {
		if _, ok := n.Blobs.Has(d.Digest); !ok {
			return nil, fmt.Errorf("audit data %s: %w", d.Name, blob.ErrNotFound)
		}
		if job.Data == nil {
			job.Data = map[string]string{}
		}
		job.Data[d.Name] = n.Blobs.Path(d.Digest)
	}
	runner.SetDataDigests(&job, an.Data)
	if input == nil && an.InputSize > 0 {
		f, _, err := n.Blobs.Open(an.Input)
		if err != nil {
			return nil, fmt.Errorf("audit input: %w", err)
		}
		defer f.Close()
		job.Stdin = f
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-a.slots }()
	cfg := runner.JobConfig(&an.Terms, an.Seed())
	if err := compiled(ctx, sb, job.Module, cfg); err != nil {
		return nil, err
	}
	sp, err := runner.NewSpool(filepath.Join(n.DataDir, "audit"))
	if err != nil {
		return nil, err
	}
	defer sp.Remove()
	job.Stdout = sp
	if tee != nil {
		job.Stdout = io.MultiWriter(sp, tee)
	}
	out, runErr := sb.Run(ctx, job, cfg)
	res := runner.Result(n.Blobs, &wire.Result{V: wire.Version, Job: an.Job, Outcome: wire.OutcomeFailed}, out, runErr, an, sp)
	if res.Outcome == wire.OutcomeFailed {
		return nil, fmt.Errorf("audit run: %s", res.Error)
	}
	if res.OutputData != nil {
		if _, err := n.Blobs.PutBytes(res.OutputData); err != nil {
			return nil, err
		}
	} else if res.OutputSize == 0 {
		if _, err := n.Blobs.PutBytes(nil); err != nil {
			return nil, err
		}
	}
	n.Counts.Audits.Add(1)
	return res, nil
}

// compiled compiles module for cfg in sb, or returns ctx's error when ctx
// ends first. A compile ignores ctx (wazero's, and the wait for another
// caller's compile of the module, the llama runner's warm compile among
// them), and the node's Close waits for an early audit: a job of a large
// module had held Close for its whole compile (a red-team run: 15 s of
// the llama runner). The compile goes on without the audit, as the warm
// one does, and a run of the module then finds it compiled. A compile's
// own error is the run's to say (Run returns the same).
func compiled(ctx context.Context, sb *host.Sandbox, module []byte, cfg host.JobConfig) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sb.Compile(ctx, module, cfg)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Warm compiles module, for each memory limit, in the sandbox the client's
// audits run in (the provider's, on a node that is one), so that its first
// job waits for no compile. The built-in llama runner took 2 to 5 s to
// compile on each provider and then again on the client for its audit:
// nearly all of a fresh node's first generation.
func (c *Client) Warm(ctx context.Context, module []byte, memories ...uint64) error {
	sb, err := c.auditor.sandbox(ctx)
	if err != nil {
		return err
	}
	for _, m := range memories {
		if _, err := sb.Compile(ctx, module, host.NewJobConfig().WithMemoryLimit(m)); err != nil {
			return err
		}
	}
	return nil
}

// Audit runs the job of an with input in the client's own sandbox, as an
// audit does, and returns its result; ErrNoAudit if it cannot be audited
// here.
func (c *Client) Audit(ctx context.Context, an *wire.JobAnnounce, input []byte) (*wire.Result, error) {
	return c.auditor.run(ctx, an, input, nil)
}
