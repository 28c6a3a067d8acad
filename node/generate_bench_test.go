package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// benchModel is a model of the generation benchmarks: its files.
type benchModel struct {
	name, model, tokenizer string
}

// benchModels are stories260K (real) and random models of the stories15M
// and 110M shapes (llamatest.Cached writes them once per machine), with
// Llama 2's tokenizer.
func benchModels(b *testing.B) []benchModel {
	td := filepath.Join("..", "testdata", "llama")
	ms := []benchModel{{"stories260K", filepath.Join(td, "stories260K.bin"), filepath.Join(td, "tok512.bin")}}
	for _, s := range []llamatest.Shape{llamatest.Stories15M, llamatest.Stories110M} {
		ms = append(ms, benchModel{s.Name, llamatest.Cached(b, s, 1), filepath.Join(td, "tokenizer.bin")})
	}
	return ms
}

// job is a host job of the runner on m for reqs, the module's digest and
// the model's files as data with their digests (as a provider gives them,
// from its blobs: without, every job would hash the 3.8 MB module).
func (m benchModel) job(b *testing.B, reqs ...llama.Request) host.Job {
	data := map[string]string{llama.DataModel: m.model, llama.DataTokenizer: m.tokenizer}
	job := host.Job{Module: llama.Runner(), Digest: runnerDigest(), Input: models.EncodeRequests(reqs), Data: data}
	var blobs []wire.DataBlob
	for name, path := range data {
		blobs = append(blobs, wire.DataBlob{Name: name, Digest: fileDigest(b, path)})
	}
	runner.SetDataDigests(&job, blobs)
	return job
}

// runnerDigest is the SHA-256 of llama.Runner().
var runnerDigest = sync.OnceValue(func() blob.Digest { return blob.Sum(llama.Runner()) })

// fileDigests caches the digests of benchmark files by path.
var fileDigests sync.Map

func fileDigest(b *testing.B, path string) blob.Digest {
	if d, ok := fileDigests.Load(path); ok {
		return d.(blob.Digest)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		b.Fatal(err)
	}
	d := blob.Digest(h.Sum(nil))
	fileDigests.Store(path, d)
	return d
}

// firstToken is a job's stdout that notes when the runner's first event
// came.
type firstToken struct {
	bytes.Buffer
	at time.Time
}

func (f *firstToken) Write(p []byte) (int, error) {
	if f.at.IsZero() && bytes.IndexByte(p, '\n') >= 0 {
		f.at = time.Now()
	}
	return f.Buffer.Write(p)
}

// runTimed runs job on sb and returns the time to its first token and to
// its end, from the call that starts it.
func runTimed(b *testing.B, sb *host.Sandbox, job host.Job) (first, total time.Duration, out []byte) {
	var w firstToken
	job.Stdout = &w
	start := time.Now()
	res, err := sb.Run(context.Background(), job, host.NewJobConfig().WithTimeout(5*time.Minute).WithMemoryLimit(512<<20).WithMaxOutput(64<<20))
	total = time.Since(start)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("run: %v, exit %v", err, res)
	}
	if _, err := models.Decode(w.Bytes()); err != nil || w.at.IsZero() {
		b.Fatalf("output %q: %v", w.Bytes(), err)
	}
	return w.at.Sub(start), total, w.Bytes()
}

// benchSandbox is a sandbox on the reference backend (exact mode's) with
// a model cache of cache bytes (negative: none).
func benchSandbox(b *testing.B, cache int64) *host.Sandbox {
	set, err := backends.Open(context.Background(), backends.Config{Fast: "reference"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { set.Close() })
	cfg := host.Config{Reference: set.Reference, Fast: set.Fast}
	cfg.ModelCache = cache
	sb, err := host.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// BenchmarkGenerateStart is a job's start on a provider: from the call
// that starts a generation job to the runner's first token, for a prompt
// of BOS alone (one forward pass), with the model's weights in the model
// cache from an earlier job (cached; target <= 20 ms) or read by the job
// itself (uncached: a sandbox without a cache). The module is compiled
// before. decode-ms is one forward pass (of a 33-token completion's after
// the first), so start-ms, first-token-ms less it, is the start alone.
func BenchmarkGenerateStart(b *testing.B) {
	if len(llama.Runner()) == 0 {
		b.Skip("no runner in this build")
	}
	for _, m := range benchModels(b) {
		for _, cached := range []bool{true, false} {
			name := m.name + "/uncached"
			cache := int64(-1)
			if cached {
				name, cache = m.name+"/cached", 0
			}
			b.Run(name, func(b *testing.B) {
				sb := benchSandbox(b, cache)
				one := m.job(b, llama.Request{MaxTokens: 1})
				first, _, _ := runTimed(b, sb, one) // compiles, fills the cache
				b.Logf("first job (compilation included): first token after %v", first)
				first, total, _ := runTimed(b, sb, m.job(b, llama.Request{MaxTokens: 33}))
				decode := (total - first) / 32
				var sum time.Duration
				for b.Loop() {
					first, _, _ := runTimed(b, sb, one)
					sum += first
				}
				mean := sum / time.Duration(b.N)
				b.ReportMetric(msf(mean), "first-token-ms")
				b.ReportMetric(msf(decode), "decode-ms")
				b.ReportMetric(msf(max(mean-decode, 0)), "start-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkGenerateNetwork is the network's overhead on a 128-token
// completion: the same job run here (local, as generate --local runs it)
// and submitted to 2 replicas (network: Submit's wall time, the client's
// view), its weights cached everywhere. Target: network <= local + 30 ms +
// 10 %. The in-process providers share one sandbox and this machine's
// cores, so both replicas run at once beside each other: coord-ms, the
// network's time less its slower replica's run (as the providers report
// it), is the coordination alone (announce, assign, blob checks, result,
// vote).
func BenchmarkGenerateNetwork(b *testing.B) {
	if len(llama.Runner()) == 0 {
		b.Skip("no runner in this build")
	}
	nodes := benchNetwork(b, 3)
	client := nodes[0]
	for _, p := range nodes[1:] {
		client.peers.Vouch(p.ID())
	}
	sb := client.cfg.Sandbox
	for _, m := range benchModels(b)[:2] {
		b.Run(m.name, func(b *testing.B) {
			req := llama.Request{Prompt: "Once upon a time", MaxTokens: 128}
			local := m.job(b, req)
			spec := jobs.Spec{Replicas: 2, Terms: wire.Terms{TimeoutMS: 300_000, Memory: 512 << 20, MaxOutput: 64 << 20}}
			spec.Module, spec.ModuleSize = putBlob(b, client, local.Module), int64(len(local.Module))
			spec.Input, spec.InputSize = putBlob(b, client, local.Input), int64(len(local.Input))
			for _, name := range []string{llama.DataModel, llama.DataTokenizer} {
				f, err := os.Open(local.Data[name])
				if err != nil {
					b.Fatal(err)
				}
				d, size, err := client.PutBlobFrom(context.Background(), f, 1<<40)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				spec.Data = append(spec.Data, wire.DataBlob{Name: name, Digest: d, Size: size})
			}
			slices.SortFunc(spec.Data, func(a, b wire.DataBlob) int { return strings.Compare(a.Name, b.Name) })
			submit := func() (time.Duration, time.Duration, *store.Job) {
				start := time.Now()
				job, err := client.Submit(context.Background(), spec, nil)
				took := time.Since(start)
				if err != nil || job.State != store.JobVerified {
					b.Fatalf("job %v: %v", job, err)
				}
				var slowest time.Duration
				for _, r := range job.Replicas {
					if r.Result != nil {
						slowest = max(slowest, time.Duration(r.Result.RunMicros)*time.Microsecond)
					}
				}
				return took, slowest, job
			}
			// Warm: compiled, weights cached, blobs fetched by both providers.
			_, _, want := runTimed(b, sb, local)
			_, _, job := submit()
			if out, err := client.Blob(job.Output, job.OutputSize); err != nil || !bytes.Equal(out, want) {
				b.Fatalf("network output differs from the local one: %v", err)
			}
			var localSum, netSum, coordSum time.Duration
			for b.Loop() {
				_, l, _ := runTimed(b, sb, local)
				n, slowest, _ := submit()
				localSum, netSum, coordSum = localSum+l, netSum+n, coordSum+n-slowest
			}
			k := time.Duration(b.N)
			b.ReportMetric(msf(localSum/k), "local-ms")
			b.ReportMetric(msf(netSum/k), "network-ms")
			b.ReportMetric(msf((netSum-localSum)/k), "overhead-ms")
			b.ReportMetric(100*float64(netSum-localSum)/float64(localSum), "overhead-%")
			b.ReportMetric(msf(coordSum/k), "coord-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// msf is d in milliseconds.
func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkVerifyByPrefill is the cost of verification by prefill: a
// 256-token greedy completion generated (gen-ms), then checked by the
// runner as a claim, in batched forward passes (check-ms), on the
// stories15M and 110M shapes, weights cached. ratio is (gen + check) / gen,
// what one replica plus the check costs against one generation (target
// <= 1.3).
func BenchmarkVerifyByPrefill(b *testing.B) {
	if len(llama.Runner()) == 0 {
		b.Skip("no runner in this build")
	}
	for _, m := range benchModels(b)[1:] {
		b.Run(m.name, func(b *testing.B) {
			sb := benchSandbox(b, 0)
			q := llama.Request{Prompt: "Once upon a time", MaxTokens: 256}
			runTimed(b, sb, m.job(b, llama.Request{MaxTokens: 1})) // compiled, cached
			var genSum, checkSum time.Duration
			for b.Loop() {
				_, gen, out := runTimed(b, sb, m.job(b, q))
				c := q
				for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
					var e llama.Event
					if err := json.Unmarshal(line, &e); err != nil {
						b.Fatal(err)
					}
					if !e.Done {
						c.Claim = append(c.Claim, e.Token)
					}
				}
				_, check, checked := runTimed(b, sb, m.job(b, c))
				if !bytes.Equal(checked, out) {
					b.Fatalf("the check of a true claim wrote another output")
				}
				genSum, checkSum = genSum+gen, checkSum+check
				b.ReportMetric(float64(len(c.Claim)), "tokens")
			}
			k := time.Duration(b.N)
			b.ReportMetric(msf(genSum/k), "gen-ms")
			b.ReportMetric(msf(checkSum/k), "check-ms")
			b.ReportMetric(float64(genSum+checkSum)/float64(genSum), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
