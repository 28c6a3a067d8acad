package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// statusKB reads a "Field:   N kB" line of /proc/PID/status.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTime is the CPU time pid has used (user and system).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// resetPeak starts a new peak-RSS measurement (VmHWM) for pid.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting peak RSS: %v", err)
	}
}

// TestHostileRSS runs hostile jobs through `infernet submit` against two
// provider processes and checks each provider's peak RSS during each attack:
// at most twice its idle RSS plus the memory the job declared. After each
// attack an honest job still verifies.
func TestHostileRSS(t *testing.T) {
	boot := startNode(t, "p1", "--max-memory", "256MiB")
	providers := []*proc{boot, startNode(t, "p2", "--bootstrap", boot.addr, "--max-memory", "256MiB")}
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 2)
	root := filepath.Join("..", "..", "..", "testdata")
	tmp := t.TempDir()
	honest := func(t *testing.T) {
		t.Helper()
		stdout, stderr, code := infernet(t, nil, "submit", filepath.Join(root, "jobs", "cpu", "cpu.wasm"), "--input", filepath.Join(root, "jobs", "cpu", "input.txt"),
			"--json", "--datadir", client.dataDir, "--output", filepath.Join(tmp, "honest"))
		var s summary
		if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || !s.Verified {
			t.Fatalf("honest job: exit %d %s %s", code, stdout, stderr)
		}
	}
	honest(t) // warm: the honest module is compiled and cached
	idle := map[int]int64{}
	for _, p := range providers {
		idle[p.cmd.Process.Pid] = statusKB(t, p.cmd.Process.Pid, "VmRSS")
	}
	big := filepath.Join(tmp, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcdef"), 16<<20), 0o600); err != nil { // 256 MiB
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		memory int64 // declared, bytes
		refuse string
	}{
		// 1.5 GiB took a provider to 4.26 GB RSS before outputs were capped.
		{"output limit 1.5 GiB refused", []string{filepath.Join(root, "bad", "output_flood.wasm"), "--max-output", "1536MiB", "--memory", "16MiB"}, 16 << 20, "output limit"},
		{"output flood to the provider's cap", []string{filepath.Join(root, "bad", "output_flood.wasm"), "--max-output", "64MiB", "--memory", "16MiB"}, 16 << 20, ""},
		{"guest memory bomb", []string{filepath.Join(root, "bad", "memory_grow_loop.wasm"), "--memory", "128MiB"}, 128 << 20, ""},
		{"host tensor bomb", []string{filepath.Join(root, "bad", "infernet_hostile.wasm"), "--memory", "64MiB"}, 64 << 20, ""},
		// 300 KB of nested blocks compiled for 30 s or more of CPU in wazero.
		{"compile bomb", []string{filepath.Join(root, "bad", "nesting_bomb.wasm"), "--memory", "16MiB"}, 16 << 20, ""},
		{"input of 256 MiB", []string{filepath.Join(root, "jobs", "cat", "cat.wasm"), "--input", big, "--memory", "16MiB", "--max-output", "1MiB", "--timeout", "2m"}, 16 << 20, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpu := map[int]time.Duration{}
			for _, p := range providers {
				resetPeak(t, p.cmd.Process.Pid)
				cpu[p.cmd.Process.Pid] = cpuTime(t, p.cmd.Process.Pid)
			}
			args := append([]string{"submit"}, tt.args...)
			_, stderr, code := infernet(t, nil, append(args, "--json", "--datadir", client.dataDir, "--output", filepath.Join(tmp, "out"))...)
			if tt.refuse != "" && (code == 0 || !strings.Contains(stderr, tt.refuse)) {
				t.Errorf("exit %d, stderr %q; want a refusal naming %q", code, stderr, tt.refuse)
			}
			for _, p := range providers {
				pid := p.cmd.Process.Pid
				peak, bound := statusKB(t, pid, "VmHWM"), 2*idle[pid]+tt.memory>>10
				t.Logf("%s: peak RSS %d MiB (idle %d MiB, declared %d MiB, bound %d MiB), %v CPU", p.name, peak>>10, idle[pid]>>10, tt.memory>>20, bound>>10, cpuTime(t, pid)-cpu[pid])
				if peak > bound {
					t.Errorf("%s: peak RSS %d KiB over 2×idle + declared = %d KiB", p.name, peak, bound)
				}
			}
			honest(t)
		})
	}
}

// TestEclipsedClientProcesses: a client process whose only bootstrap
// peer is one network's (two providers, but both learned through it) does
// not let their agreement verify a job: with --no-audit the job comes back
// unverified (exit 122) and submit says why, and `infernet peers` warns.
// A client given bootstrap peers in two networks gets no warning.
func TestEclipsedClientProcesses(t *testing.T) {
	boot := startNode(t, "p1")
	p2 := startNode(t, "p2", "--bootstrap", boot.addr)
	eclipsed := startNode(t, "eclipsed", "--bootstrap", boot.addr, "--no-provide", "--no-audit")
	open := startNode(t, "open", "--bootstrap", boot.addr, "--bootstrap", p2.addr, "--no-provide", "--no-audit")
	waitAdverts(t, eclipsed, 2)
	waitAdverts(t, open, 2)
	root := filepath.Join("..", "..", "..", "testdata", "jobs", "cat")
	in := filepath.Join(t.TempDir(), "in")
	os.WriteFile(in, []byte("hello"), 0o600)
	_, stderr, code := infernet(t, nil, "submit", filepath.Join(root, "cat.wasm"), "--input", in, "--datadir", eclipsed.dataDir)
	const why = "came through bootstrap peers in one network"
	if code != 122 || !strings.Contains(stderr, "unverified: every peer this node learned of "+why) {
		t.Fatalf("eclipsed client's job: exit %d, stderr:\n%s\nwant 122 saying why", code, stderr)
	}
	if _, stderr, code := infernet(t, nil, "peers", "--datadir", eclipsed.dataDir); code != 0 || !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, why) {
		t.Fatalf("eclipsed client's peers: exit %d, stderr %q; want a warning saying why", code, stderr)
	}
	if _, stderr, code := infernet(t, nil, "peers", "--datadir", open.dataDir); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("client with two bootstrap networks: exit %d, stderr %q; want no warning", code, stderr)
	}
}
