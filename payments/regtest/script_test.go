package regtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lncli prints protobuf JSON with one or two spaces after each colon, chosen
// per binary (protobuf-go's detrand hashes the executable). The recordings
// under testdata/lncli come from a real lncli v0.20.0-beta on the regtest
// network (record-lncli.sh): one-space/ from the cached build, two-spaces/
// from the same binary with two zero bytes appended, which flipped its
// choice. listchannels is re-indented by lncli itself, so it has one space
// in both.
var spacings = []string{"one-space", "two-spaces"}

// TestRecordedSpacings checks the premise of TestScriptChecks: the two
// recordings differ in spacing, as two lncli builds can.
func TestRecordedSpacings(t *testing.T) {
	count := func(dir string) (files, doubled int) {
		err := filepath.WalkDir(filepath.Join("testdata", "lncli", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
				return err
			}
			b, err := os.ReadFile(path)
			files++
			if bytes.Contains(b, []byte(`":  `)) {
				doubled++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files, doubled
	}
	if files, doubled := count("one-space"); files == 0 || doubled != 0 {
		t.Errorf("one-space: %d of %d files have two spaces after a colon, want 0 of more than 0", doubled, files)
	}
	if files, doubled := count("two-spaces"); doubled < files/2 {
		t.Errorf("two-spaces: %d of %d files have two spaces after a colon, want most", doubled, files)
	}
}

// TestScriptChecks runs scripts/regtest.sh's own checks (the script sourced,
// with lncli replaced by testdata/lncli/replay) against what lncli printed,
// in both spacings: each check must answer yes where the recording says so
// and no one step past it.
func TestScriptChecks(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is not on PATH: scripts/regtest.sh reads lncli's JSON with it (make deps installs it)")
	}
	for _, spacing := range spacings {
		t.Run(spacing, func(t *testing.T) {
			rec := recording{t: t, dir: filepath.Join("testdata", "lncli", spacing)}
			var info struct {
				Height uint32 `json:"block_height"`
				Pubkey string `json:"identity_pubkey"`
			}
			rec.read("getinfo.json", &info)
			var state struct{ State string }
			rec.read("state.json", &state)
			var wallet struct {
				Confirmed int64 `json:"confirmed_balance,string"`
			}
			rec.read("walletbalance.json", &wallet)
			var invoice struct {
				State string
				Hash  string `json:"r_hash"`
			}
			rec.read("lookupinvoice.json", &invoice)
			var addinvoice struct {
				Request string `json:"payment_request"`
			}
			rec.read("addinvoice.json", &addinvoice)
			active := rec.activeChannels("listchannels.json")
			stillActive := rec.activeChannels("inactive/listchannels.json")
			if stillActive >= active || invoice.State != "ACCEPTED" || info.Pubkey == "" || wallet.Confirmed == 0 {
				t.Fatalf("recording: %d then %d active channels, invoice %q, pubkey %q, balance %d: not what record-lncli.sh records",
					active, stillActive, invoice.State, info.Pubkey, wallet.Confirmed)
			}

			questions := []struct {
				call string
				over string // a subfolder whose recordings replace the main ones
				want bool
			}{
				{call: "state_is client " + state.State, want: true},
				{call: "state_is client WAITING_TO_START", want: false},
				{call: fmt.Sprintf("synced client %d", info.Height), want: true},
				{call: fmt.Sprintf("synced client %d", info.Height+1), want: false},
				{call: fmt.Sprintf("confirmed_balance_at_least client %d", wallet.Confirmed), want: true},
				{call: fmt.Sprintf("confirmed_balance_at_least client %d", wallet.Confirmed+1), want: false},
				{call: fmt.Sprintf("active_channels_at_least client %d", active), want: true},
				{call: fmt.Sprintf("active_channels_at_least client %d", active+1), want: false},
				{call: fmt.Sprintf("active_channels_at_least client %d", stillActive), over: "inactive", want: true},
				{call: fmt.Sprintf("active_channels_at_least client %d", stillActive+1), over: "inactive", want: false},
				{call: "route_ok client " + info.Pubkey, want: true},
				{call: "invoice_state_is provider1 " + invoice.Hash + " ACCEPTED", want: true},
				{call: "invoice_state_is provider1 " + invoice.Hash + " SETTLED", want: false},
			}
			for _, q := range questions {
				t.Run(strings.TrimSpace(q.call+" "+q.over), func(t *testing.T) {
					out, _, err := rec.run(q.over, "", `if "$@"; then echo yes; else echo no; fi`, strings.Fields(q.call)...)
					if err != nil {
						t.Fatal(err)
					}
					if got := out == "yes\n"; got != q.want {
						t.Errorf("%s answered %q, want %v", q.call, out, q.want)
					}
				})
			}

			answers := []struct {
				call, stdin, want string
			}{
				{call: "pubkey client", want: info.Pubkey},
				{call: "field payment_request", stdin: "addinvoice.json", want: addinvoice.Request},
				{call: "active_channels", stdin: "listchannels.json", want: strconv.Itoa(active)},
			}
			for _, a := range answers {
				out, _, err := rec.run("", a.stdin, `"$@"`, strings.Fields(a.call)...)
				if err != nil || strings.TrimSpace(out) != a.want {
					t.Errorf("%s < %s: %q, %v; want %q", a.call, a.stdin, out, err, a.want)
				}
			}
			for _, refused := range []struct{ call, stdin string }{
				{"field nosuch", "addinvoice.json"},
				{"succeeded", "failed/payinvoice.json"},
			} {
				if out, _, err := rec.run("", refused.stdin, `"$@"`, strings.Fields(refused.call)...); err == nil {
					t.Errorf("%s < %s succeeded (%q), want a failure", refused.call, refused.stdin, out)
				}
			}
			if _, _, err := rec.run("", "payinvoice.json", `succeeded`); err != nil {
				t.Errorf("succeeded < payinvoice.json: %v", err)
			}

			// Payments: what `up` does to prove the network, then the same
			// with a payment that lncli reports FAILED (exit 1).
			payments := []struct {
				call, over, want string
				ok               bool
			}{
				{call: "pay client provider1 1000", want: "paid 1000 sat client->provider1: lnd latency ", ok: true},
				{call: "pay client provider1 1000", over: "failed", want: "ERROR: payment client->provider1 failed (exit 1): [lncli] FAILED"},
				{call: "hold_invoice_roundtrip client provider1", want: "hold invoice client->provider1: ACCEPTED, settled, payer SUCCEEDED", ok: true},
				{call: "hold_invoice_roundtrip client provider1", over: "failed", want: "ERROR: hold invoice payment client->provider1 failed (exit 1)"},
			}
			for _, p := range payments {
				_, stderr, err := rec.run(p.over, "", `"$@"`, strings.Fields(p.call)...)
				if (err == nil) != p.ok || !strings.Contains(stderr, p.want) {
					if len(stderr) > 400 {
						stderr = "…" + stderr[len(stderr)-400:]
					}
					t.Errorf("%s (recordings %q): %v, stderr %q; want ok=%v and %q", p.call, p.over, err, stderr, p.ok, p.want)
				}
			}
		})
	}
}

// recording is one folder of recorded lncli outputs.
type recording struct {
	t   *testing.T
	dir string
}

func (r recording) read(name string, v any) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
}

// activeChannels counts the active channels of a listchannels recording,
// read here with encoding/json, apart from the script's jq.
func (r recording) activeChannels(name string) int {
	var list struct{ Channels []struct{ Active bool } }
	r.read(name, &list)
	n := 0
	for _, c := range list.Channels {
		if c.Active {
			n++
		}
	}
	return n
}

// run sources scripts/regtest.sh in bash, with lncli replaced by the replay
// of this recording (and of its subfolder over first, if set) and stdin
// from the recording named stdin, then runs body with args as "$@". It
// returns stdout, stderr, and an error for a non-zero exit.
func (r recording) run(over, stdin, body string, args ...string) (string, string, error) {
	r.t.Helper()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			r.t.Fatal(err)
		}
		return a
	}
	rt := r.t.TempDir()
	ports := "BTCD_RPC_PORT=1\n"
	for _, n := range []string{"CLIENT", "PROVIDER1", "PROVIDER2", "AGGREGATOR"} {
		ports += n + "_RPC_PORT=1\n" + n + "_P2P_PORT=1\n"
	}
	if err := os.WriteFile(filepath.Join(rt, "ports"), []byte(ports), 0o644); err != nil {
		r.t.Fatal(err)
	}
	script := `. "$1"; RT=$2; load_ports; shift 2; ` + body
	cmd := exec.Command("bash", append([]string{"-c", script, "bash", abs("../../scripts/regtest.sh"), rt}, args...)...)
	cmd.Env = append(os.Environ(),
		"REGTEST_LNCLI="+abs("testdata/lncli/replay"),
		"LNCLI_RECORDED="+abs(r.dir),
		"REGTEST_TIMEOUT=10",
	)
	if over != "" {
		cmd.Env = append(cmd.Env, "LNCLI_RECORDED_OVER="+abs(filepath.Join(r.dir, over)))
	}
	if stdin != "" {
		f, err := os.Open(filepath.Join(r.dir, stdin))
		if err != nil {
			r.t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}
