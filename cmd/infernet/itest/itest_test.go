// Package itest runs infernet as real processes: several `infernet node`
// processes on loopback, jobs submitted with `infernet submit`, providers
// killed with SIGKILL mid-job. Only 127.0.0.1 is ever dialled (mDNS and NAT
// port mapping are off).
package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/store"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "infernet-itest-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "infernet")
	build := exec.Command("go", "build", "-tags", buildTags, "-o", binary, "github.com/infernet/infernet/cmd/infernet")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building infernet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `infernet node`.
type proc struct {
	name    string
	dataDir string
	cmd     *exec.Cmd
	addr    string // first dialable multiaddr
	stderr  *syncBuffer
	ns      string // network namespace it runs in ("": this one)
	bin     string // its program ("": this build's, binary)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startNode starts a node process and waits until its API answers.
func startNode(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	return startNodeAt(t, name, filepath.Join(t.TempDir(), name), extra...)
}

// peerID is the peer ID of a node process (infernet id).
func peerID(t *testing.T, p *proc) string {
	t.Helper()
	out, stderr, code := infernet(t, nil, "id", "--datadir", p.dataDir)
	if code != 0 {
		t.Fatalf("infernet id: exit %d: %s", code, stderr)
	}
	return strings.TrimSpace(out)
}

// startNodeAt is startNode with a data directory prepared by the caller.
// Each node listens on a /16 of loopback of its own (loopback): peers
// count it as an operator of its own.
func startNodeAt(t *testing.T, name, dataDir string, extra ...string) *proc {
	t.Helper()
	return (&proc{name: name, dataDir: dataDir}).startOnLoopback(t, extra...)
}

// startOnLoopback starts p listening on a /16 of loopback of its own.
func (p *proc) startOnLoopback(t *testing.T, extra ...string) *proc {
	t.Helper()
	ip := loopback()
	return p.start(t, "/ip4/"+ip+"/", append([]string{"--listen", "/ip4/" + ip + "/tcp/0"}, extra...)...)
}

// loopbackNext numbers the /16s loopback hands out.
var loopbackNext atomic.Uint32

// loopback returns 127.N.0.1, N from 1 to 254 in turn: all of 127/8 is
// loopback on Linux, and a node dials from its listening address, so its
// peers see it in a network group (node.Config.NoNetGroups) of its own.
func loopback() string { return fmt.Sprintf("127.%d.0.1", loopbackNext.Add(1)%254+1) }

// command is the infernet CLI with args, in p's network namespace if it
// has one.
func (p *proc) command(args ...string) *exec.Cmd {
	bin := binary
	if p.bin != "" {
		bin = p.bin
	}
	if p.ns != "" {
		return exec.Command("ip", append([]string{"netns", "exec", p.ns, bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

// start starts p's node process with extra flags and waits until it
// printed an address beginning with addrPrefix and its API answers.
func (p *proc) start(t *testing.T, addrPrefix string, extra ...string) *proc {
	t.Helper()
	p.stderr = &syncBuffer{}
	args := append([]string{"node", "--datadir", p.dataDir,
		"--api", "127.0.0.1:0", "--mdns=false", "--nat=false", "--slots", "2",
		"--heartbeat", "200ms", "--silence", "3s", "--gossip-heartbeat", "100ms", "--backend", "reference",
		"--warm-runner=false"}, extra...) // tests of models pass --warm-runner
	if level := os.Getenv("INFERNET_ITEST_LOG_LEVEL"); level != "" {
		args = append(args, "--log-level", level) // e.g. debug, to chase a flaky test
	}
	p.cmd = p.command(args...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() || os.Getenv("INFERNET_ITEST_LOG_LEVEL") != "" {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for p.addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s exited: %s", p.name, p.stderr.String())
			}
			if strings.HasPrefix(l, addrPrefix) {
				p.addr = l
			}
		case <-timeout:
			t.Fatalf("%s printed no address: %s", p.name, p.stderr.String())
		}
	}
	waitFor(t, 30*time.Second, p.name+"'s API", func() bool {
		if p.ns != "" { // its loopback API is inside the namespace
			_, _, code := p.infernet(t, nil, "peers", "--json", "--datadir", p.dataDir)
			return code == 0
		}
		c, err := api.Dial(p.dataDir, "")
		if err != nil {
			return false
		}
		_, err = c.Node(context.Background())
		return err == nil
	})
	return p
}

func (p *proc) api(t *testing.T) *api.Client {
	t.Helper()
	c, err := api.Dial(p.dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// infernet runs the CLI and returns stdout, stderr and the exit code.
func infernet(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	return (&proc{}).infernet(t, stdin, args...)
}

// infernet runs the CLI in p's network namespace.
func (p *proc) infernet(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	cmd := p.command(args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// summary mirrors the fields of `infernet submit --json` the tests read.
type summary struct {
	Job       string   `json:"job"`
	State     string   `json:"state"`
	Verified  bool     `json:"verified"`
	Agree     int      `json:"agree"`
	Liars     []string `json:"liars"`
	Output    string   `json:"output"`
	Seed      string   `json:"seed"`
	Providers []struct {
		Replica  int    `json:"replica"`
		Provider string `json:"provider"`
		State    string `json:"state"`
		Error    string `json:"error"`
	} `json:"providers"`
}

// network starts three providers and a client-only node and waits until
// the client has every provider's advert.
func network(t *testing.T) (client *proc, providers []*proc) {
	t.Helper()
	boot := startNode(t, "p1")
	providers = []*proc{boot, startNode(t, "p2", "--bootstrap", boot.addr), startNode(t, "p3", "--bootstrap", boot.addr)}
	client = startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 3)
	return client, providers
}

// waitAdverts waits until the client has n providers' adverts. A provider
// the client is not connected to reaches it only through the gossip mesh:
// at the latest with its next advert, one node.DefaultAdvertInterval after
// the last (a provider connected to it answers its subscription at once).
// A loaded machine (CI's, running the other lanes beside) can take that
// long to connect the two: the wait is the interval and a margin.
func waitAdverts(t *testing.T, client *proc, n int) {
	t.Helper()
	c := client.api(t)
	waitFor(t, node.DefaultAdvertInterval+15*time.Second, fmt.Sprintf("the client to see %d provider adverts", n), func() bool {
		peers, err := c.Peers(context.Background())
		if err != nil {
			return false
		}
		got := 0
		for _, p := range peers {
			if p.Advert != nil {
				got++
			}
		}
		return got == n
	})
}

func TestNetworkProcesses(t *testing.T) {
	client, providers := network(t)
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	module := filepath.Join(jobs, "cpu", "cpu.wasm")
	want, err := os.ReadFile(filepath.Join(jobs, "cpu", "output.txt"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("two replicas", func(t *testing.T) {
		outFile := filepath.Join(t.TempDir(), "out")
		stdout, stderr, code := infernet(t, nil, "submit", module, "--input", filepath.Join(jobs, "cpu", "input.txt"),
			"--output", outFile, "--replicas", "2", "--json", "--datadir", client.dataDir)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, stderr)
		}
		var s summary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("summary %q: %v", stdout, err)
		}
		got, _ := os.ReadFile(outFile)
		if !bytes.Equal(got, want) {
			t.Fatalf("output %q, want %q", got, want)
		}
		if !s.Verified || s.Agree != 2 || len(s.Providers) != 2 || s.Providers[0].Provider == s.Providers[1].Provider {
			t.Fatalf("summary %+v: want verified by two distinct providers", s)
		}
		// jobs lists it; its record is in the client's database.
		out, _, code := infernet(t, nil, "jobs", "--json", "--datadir", client.dataDir)
		var list []store.Job
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID.String() != s.Job {
			t.Fatalf("jobs: exit %d %s", code, out)
		}
		// jobs ID says how it was verified, as submit did.
		if _, stderr, code := infernet(t, nil, "jobs", s.Job[:8], "--datadir", client.dataDir); code != 0 ||
			!strings.Contains(stderr, "2 of 2 replicas agree") || !strings.Contains(stderr, "replica 1") || !strings.Contains(stderr, "sha256 "+s.Output) {
			t.Errorf("jobs ID: exit %d, %q; want the job's verdict and replicas", code, stderr)
		}
		// The plain-text summary goes to stderr and the output to stdout.
		stdout, stderr, code = infernet(t, nil, "submit", module, "--input", filepath.Join(jobs, "cpu", "input.txt"), "--datadir", client.dataDir, "--progress", "always")
		if code != 0 || stdout != string(want) || !strings.Contains(stderr, "2 of 2 replicas agree") || !strings.Contains(stderr, "verified") {
			t.Fatalf("submit: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if !strings.Contains(stderr, "replica 1") || !strings.Contains(stderr, "result from") {
			t.Errorf("--progress always drew no progress: %q", stderr)
		}
	})

	t.Run("provider silent mid-job", func(t *testing.T) {
		runWithVictim(t, client, providers, module, syscall.SIGSTOP)
	})

	t.Run("provider killed mid-job", func(t *testing.T) {
		runWithVictim(t, client, providers, module, syscall.SIGKILL)
	})

	t.Run("peers and usage errors", func(t *testing.T) {
		out, _, code := infernet(t, nil, "peers", "--datadir", client.dataDir)
		if code != 0 || !strings.Contains(out, "REPUTATION") || strings.Count(out, "reference") < 2 {
			t.Fatalf("peers: exit %d\n%s", code, out)
		}
		_, stderr, code := infernet(t, nil, "submit", module, "--require", "vram >=", "--datadir", client.dataDir)
		if code != 1 || !strings.Contains(stderr, "--require") {
			t.Fatalf("bad --require: exit %d %q", code, stderr)
		}
		_, stderr, code = infernet(t, nil, "submit", module, "--input", filepath.Join(jobs, "cpu", "input.txt"), "--require", "gpus > 0", "--datadir", client.dataDir)
		if code != 123 || !strings.Contains(stderr, "not enough matching providers") {
			t.Fatalf("unsatisfiable --require: exit %d %q", code, stderr)
		}
		// No node, and no way to find one (no bootstrap peers, no mDNS).
		lonely := t.TempDir()
		if err := os.WriteFile(filepath.Join(lonely, "config.json"), []byte(`{"mdns": false}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code = infernet(t, nil, "submit", module, "--datadir", lonely)
		if code != 1 || !strings.Contains(stderr, "no node runs for") || !strings.Contains(stderr, "no peer to join through") {
			t.Fatalf("no node: exit %d %q", code, stderr)
		}
	})

	// A job that draws random bytes gives on the network what infernet run
	// gives with the seed --json names (a newcomer could not reproduce
	// one: submit has no --seed, and the seed was said nowhere).
	t.Run("a network run reproduced here", func(t *testing.T) {
		random := filepath.Join("..", "..", "..", "host", "testdata", "random.wasm")
		outFile := filepath.Join(t.TempDir(), "out")
		stdout, stderr, code := infernet(t, nil, "submit", random, "--replicas", "2", "--json", "--output", outFile, "--datadir", client.dataDir)
		var s summary
		if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || len(s.Seed) != 64 {
			t.Fatalf("submit: exit %d %s %s", code, stdout, stderr)
		}
		got, _ := os.ReadFile(outFile)
		here, _, code := infernet(t, nil, "run", random, "--seed", s.Seed)
		if other, _, _ := infernet(t, nil, "run", random); code != 0 || len(got) != 16 || here != string(got) || other == here {
			t.Fatalf("network %x, here with its seed %x, here without %x", got, here, other)
		}
	})
}

// runWithVictim submits a job that runs for a few seconds with two replicas,
// sends sig to the first provider seen running it (SIGKILL: it dies;
// SIGSTOP: it falls silent), and checks that the job still ends verified by
// the two other providers with the right output.
func runWithVictim(t *testing.T, client *proc, providers []*proc, module string, sig syscall.Signal) {
	input := []byte("1200 1000")
	wantOut, _, code := infernet(t, input, "run", module, "--input", "-")
	if code != 0 {
		t.Fatalf("local run exit %d", code)
	}
	cmd := exec.Command(binary, "submit", module, "--input", "-", "--replicas", "2", "--json", "--datadir", client.dataDir, "--output", filepath.Join(t.TempDir(), "out"))
	cmd.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	outFile := cmd.Args[len(cmd.Args)-1]
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var victim *proc
	waitFor(t, 60*time.Second, "a provider to run the job", func() bool {
		for _, p := range providers {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			runs, err := p.api(t).Runs(ctx)
			cancel()
			if err != nil {
				continue // a provider killed or stopped by an earlier test
			}
			for _, r := range runs {
				if r.State == store.RunRunning && r.Started.After(started) {
					victim = p
					return true
				}
			}
		}
		return false
	})
	victimID, _, _ := infernet(t, nil, "id", "--datadir", victim.dataDir)
	victimID = strings.TrimSpace(victimID)
	if err := victim.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGSTOP {
		defer victim.cmd.Process.Signal(syscall.SIGCONT)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("submit: %v: %s", err, errb.String())
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	got, _ := os.ReadFile(outFile)
	if !bytes.Equal(got, []byte(wantOut)) {
		t.Fatalf("output %q, want %q", got, wantOut)
	}
	lost, done := 0, map[string]bool{}
	for _, p := range s.Providers {
		switch p.State {
		case "lost":
			if p.Provider != victimID {
				t.Errorf("replica lost on %s, which was not killed (%s)", p.Provider, p.Error)
			}
			lost++
		case "done":
			done[p.Provider] = true
		}
	}
	if !s.Verified || lost != 1 || len(done) != 2 || done[victimID] {
		t.Fatalf("summary %+v: want verified by the two survivors, one replica lost on %s", s, victimID)
	}
}

// TestNodeRefusesMoneyWithoutLnd: a node in free mode (no lnd) refuses a
// --price it could never be paid and a --serve-max-price its API could
// never pay, and says what it needs, before it joins anything.
func TestNodeRefusesMoneyWithoutLnd(t *testing.T) {
	for _, tt := range []struct {
		flags []string
		want  []string // in stderr
	}{
		{[]string{"--price", "5000"}, []string{"--price 5000 needs lnd", "--lnd.rpcserver"}},
		{[]string{"--serve-max-price", "5000"}, []string{"--serve-max-price 5000 needs lnd", "--lnd.rpcserver"}},
		// Not money, but refused as early: an API whose every answer
		// would be unverified.
		{[]string{"--serve-replicas", "1"}, []string{"--serve-replicas 1: want 2 or more", "--serve-verify prefill"}},
		{[]string{"--serve-replicas", "0"}, []string{"--serve-replicas 0: want 2 or more"}},
		// Nor limits that are no limit (they had become defaults unseen).
		{[]string{"--slots", "-1", "--max-timeout", "-5s", "--audit", "2", "--fee", "-1", "--max-memory", "10"},
			[]string{"--slots is negative", "--max-timeout is negative", "--audit 2 is a share", "--fee -1 is negative", "--max-memory 10 bytes"}},
		{[]string{"--backend", "nope"}, []string{"--backend nope: want auto, reference"}},
	} {
		args := append([]string{"node", "--datadir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false", "--nat=false"}, tt.flags...)
		_, stderr, code := infernet(t, nil, args...)
		for _, w := range tt.want {
			if code == 0 || !strings.Contains(stderr, w) {
				t.Errorf("node %v: exit %d, %q; want %q", tt.flags, code, stderr, w)
			}
		}
	}
}

// TestConfigFileSaysWhatItTakes: a setting config.json does not take is
// refused, saying which it takes (an operator tried "slots", a flag of
// infernet node, which goes in its "node" object).
func TestConfigFileSaysWhatItTakes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"slots": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := infernet(t, nil, "node", "--datadir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false", "--nat=false")
	if code == 0 || !strings.Contains(stderr, `unknown field "slots"`) || !strings.Contains(stderr, "it takes bootstrap, listen, mdns, nat, reachability, relays, lnd") ||
		!strings.Contains(stderr, "and node, whose object takes flags of infernet node by name") {
		t.Errorf("config.json with slots: exit %d, %q", code, stderr)
	}
}
