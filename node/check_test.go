package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/wire"
)

// nearTieLiar is a provider's Faults.Rewrite that writes token instead of
// the 4th generated token of each completion it generates, and checks
// honestly: a liar that wants its lies verified.
func nearTieLiar(tb testing.TB, token int) func(input, output []byte) []byte {
	f, err := os.Open(filepath.Join("..", "testdata", "llama", "tok512.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	v, err := llama.ReadTokenizerBin(f, 512)
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := llama.NewTokenizer(v)
	if err != nil {
		tb.Fatal(err)
	}
	return func(input, output []byte) []byte {
		if bytes.Contains(input, []byte(`"claim"`)) {
			return output
		}
		lines := bytes.SplitAfter(output, []byte("\n"))
		if len(lines) < 5 {
			return output
		}
		var prev llama.Event
		if json.Unmarshal(lines[2], &prev) != nil {
			return output
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(llama.Event{Text: llama.Printable(tk.Decode(prev.Token, token)), Token: token})
		lines[3] = b.Bytes()
		return bytes.Join(lines, nil)
	}
}

// TestCheckJobNearTies: a job verified by a check job (jobs.Spec.Check) whose
// generator lies in its 4th token of "The end": 269 where the model's
// choice is 286, 0.00847 logits ahead (a near-tie; guest/go/llama's
// TestRunnerCheckTies), or 397, 0.63 behind (well above the default bound,
// Config.CheckTie). In tolerance mode the near-tie passes whether the
// generator and checker are of different classes (the liar on the
// reference kernels, the others on the CPU backend) or of one (a GPU's
// decode and its check's batched passes run different kernels): the output
// is the liar's, a completion the model could produce within rounding. The
// large gap is caught and outvoted, and so is the near-tie in exact mode,
// whose kernels are the same everywhere. Who generates is drawn at random: each case submits until the liar
// has generated once (at most 40 jobs: 1e-7 that it never does).
func TestCheckJobNearTies(t *testing.T) {
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	for _, tc := range []struct {
		name   string
		mode   uint8
		token  int
		honest string // the honest providers' backend
		pass   bool
	}{
		{"near-tie across classes", wire.ModeTolerance, 269, "cpu", true},
		{"large gap across classes", wire.ModeTolerance, 397, "cpu", false},
		{"near-tie in one class", wire.ModeTolerance, 269, "reference", true},
		{"near-tie in exact mode", wire.ModeExact, 269, "cpu", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			net := startNetwork(t, 3, func(c *Config) {
				if i == 0 {
					c.Faults = &faults.Faults{Rewrite: nearTieLiar(t, tc.token)}
				} else {
					c.Backend = tc.honest
				}
				i++
			}).vouch()
			liar := net.providers[0].ID().String()
			lie := []byte(fmt.Sprintf(`"token":%d}`, tc.token))
			for try := 0; try < 40; try++ {
				q := llama.Request{Prompt: "The end", MaxTokens: 4}
				s := streamSpec(t, net.client, q)
				s.Mode, s.Replicas, s.Check = tc.mode, 1, models.Check{q}
				var mu sync.Mutex
				var details []string
				job, err := net.client.Submit(context.Background(), s, func(e jobs.Event) {
					mu.Lock()
					details = append(details, e.Detail)
					mu.Unlock()
				})
				if err != nil {
					t.Fatal(err)
				}
				out, err := net.client.Blob(job.Output, job.OutputSize)
				if err != nil {
					t.Fatal(err)
				}
				if job.Replicas[0].Provider != liar {
					if bytes.Contains(out, lie) {
						t.Fatalf("try %d: an honest generation gave the liar's token: %s", try, out)
					}
					continue
				}
				mu.Lock()
				reported := slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, ", 1 near-ties") })
				mu.Unlock()
				if tc.pass {
					if job.Verification != jobs.VerifiedByCheck || !bytes.Contains(out, lie) || len(job.Liars) > 0 || !reported {
						t.Fatalf("the near-tie was not accepted: %s, liars %v, near-tie reported %v, output\n%s", job.Verification, job.Liars, reported, out)
					}
					return
				}
				// Caught by the vote, or by an audit (Config.AuditNew draws
				// a quarter of new providers' jobs).
				if bytes.Contains(out, lie) || !slices.Contains(job.Liars, liar) || (job.Verification != jobs.VerifiedByReplicas && job.Verification != jobs.VerifiedByAudit) {
					t.Fatalf("the lie was not caught: %s, liars %v, output\n%s", job.Verification, job.Liars, out)
				}
				return
			}
			t.Fatal("in 40 jobs the liar never generated")
		})
	}
}

// TestGenerationSameBackend: a streamed tolerance-mode job (a generation)
// runs on one backend class unless it opts out (jobs.Spec.MixedBackends); a job
// verified by a check job does not (its check allows for near-ties), nor
// need an exact-mode one (every class runs the reference kernels); asking
// for both is refused.
func TestGenerationSameBackend(t *testing.T) {
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	i := 0
	net := startNetwork(t, 4, func(c *Config) {
		if i%2 == 1 {
			c.Backend = "cpu"
		}
		i++
	}).vouch()
	q := llama.Request{Prompt: "Once upon a time", MaxTokens: 8}
	for _, tc := range []struct {
		name                string
		mode                uint8
		stream, check       bool
		same, mixed, wantOn bool
	}{
		{"generation", wire.ModeTolerance, true, false, false, false, true},
		{"generation opting out", wire.ModeTolerance, true, false, false, true, false},
		{"generation checked by prefill", wire.ModeTolerance, true, true, false, false, false},
		{"generation in exact mode", wire.ModeExact, true, false, false, false, false},
		{"not streamed", wire.ModeTolerance, false, false, false, false, false},
		{"asking for one class", wire.ModeTolerance, false, false, true, false, true},
	} {
		s := streamSpec(t, net.client, q)
		s.Mode, s.SameBackend, s.MixedBackends = tc.mode, tc.same, tc.mixed
		if tc.stream {
			s.Output = func([]byte) {}
		}
		if tc.check {
			s.Replicas, s.Check = 1, models.Check{q}
		}
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if job.Announce.SameBackend != tc.wantOn {
			t.Errorf("%s: announced SameBackend %v, want %v", tc.name, job.Announce.SameBackend, tc.wantOn)
		}
		var classes []string
		for _, r := range job.Replicas {
			if r.Result != nil && !slices.Contains(classes, r.Result.Backend) {
				classes = append(classes, r.Result.Backend)
			}
		}
		if tc.wantOn && len(classes) != 1 {
			t.Errorf("%s: replicas ran on %v, want one class", tc.name, classes)
		}
	}
	s := streamSpec(t, net.client, q)
	s.SameBackend, s.MixedBackends = true, true
	if _, err := net.client.Submit(context.Background(), s, nil); err == nil {
		t.Error("a job on the same backend class and on mixed ones was submitted")
	}
}
