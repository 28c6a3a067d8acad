package itest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/api"
)

// The NAT lab: five network namespaces on this machine, joined by veth
// pairs, and nothing else ever dialled.
//
//	home A 192.168.1.2 ── router A (nftables masquerade) 11.0.1.1 ─┐
//	                                                               pub: bootstrap 11.0.0.1, relay 11.0.0.2
//	home B 192.168.2.2 ── router B (nftables masquerade) 11.0.2.1 ─┘     (and the route between the routers)
//
// The "internet" side uses addresses libp2p counts as public (11.0.0.0/8),
// since hole punching only tries public addresses; no packet leaves the
// namespaces, which have no link to this machine's own network.
type natLab struct {
	pub, routerA, routerB, homeA, homeB string
}

// nat is how a router maps its home's connections.
type nat string

const (
	// cone: Linux's masquerade keeps the source port where it is free, so
	// a socket gets the same public port for every destination
	// (endpoint-independent mapping); unsolicited packets are dropped.
	cone nat = "masquerade"
	// symmetric: a random public port for every connection (endpoint-
	// dependent mapping): a hole punch cannot guess it.
	symmetric nat = "masquerade fully-random"
)

// sh runs a command with stdin and fails t with its output.
func sh(t *testing.T, stdin string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// newNATLab builds the lab, router B mapping as natB, and removes it when
// t ends, failed or not. It fails (never skips) where namespaces cannot be
// made: the test needs root, ip (iproute2) and nft (nftables; scripts/deps.sh
// installs both).
func newNATLab(t *testing.T, natB nat) *natLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the NAT tests build network namespaces and need root (run as root, e.g. sudo go test)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the NAT tests need %s: run scripts/deps.sh (%v)", tool, err)
		}
	}
	b := make([]byte, 3)
	rand.Read(b)
	tag := "inr" + hex.EncodeToString(b) // unique per run: runs may overlap
	l := &natLab{pub: tag + "-pub", routerA: tag + "-ra", routerB: tag + "-rb", homeA: tag + "-ha", homeB: tag + "-hb"}
	all := []string{l.pub, l.routerA, l.routerB, l.homeA, l.homeB}
	for _, ns := range all {
		sh(t, "", "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() }) // its veths go with it
		sh(t, "", "ip", "-n", ns, "link", "set", "lo", "up")
	}
	// veth pairs are made inside the namespaces, so their short names
	// never meet this machine's own.
	link := func(a, an, b, bn string) {
		sh(t, "", "ip", "link", "add", an, "netns", a, "type", "veth", "peer", "name", bn, "netns", b)
		sh(t, "", "ip", "-n", a, "link", "set", an, "up")
		sh(t, "", "ip", "-n", b, "link", "set", bn, "up")
	}
	addr := func(ns, dev, cidr string) { sh(t, "", "ip", "-n", ns, "addr", "add", cidr, "dev", dev) }
	route := func(ns, via string) { sh(t, "", "ip", "-n", ns, "route", "add", "default", "via", via) }
	forward := func(ns string) { sh(t, "", "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1") }

	addr(l.pub, "lo", "11.0.0.1/32")
	addr(l.pub, "lo", "11.0.0.2/32")
	forward(l.pub)
	for i, side := range []struct {
		router, home string
		nat          nat
	}{{l.routerA, l.homeA, cone}, {l.routerB, l.homeB, natB}} {
		n := i + 1
		link(l.pub, fmt.Sprintf("r%d", n), side.router, "wan0")
		addr(l.pub, fmt.Sprintf("r%d", n), fmt.Sprintf("11.0.%d.254/24", n))
		addr(side.router, "wan0", fmt.Sprintf("11.0.%d.1/24", n))
		route(side.router, fmt.Sprintf("11.0.%d.254", n))
		link(side.router, "lan0", side.home, "eth0")
		addr(side.router, "lan0", fmt.Sprintf("192.168.%d.1/24", n))
		addr(side.home, "eth0", fmt.Sprintf("192.168.%d.2/24", n))
		route(side.home, fmt.Sprintf("192.168.%d.1", n))
		forward(side.router)
		// A home router: masquerade out, and only replies (conntrack) in;
		// the rest is dropped unanswered, as home routers do (an RST to an
		// early hole punching SYN would end the punch).
		sh(t, fmt.Sprintf(`table ip infernet {
	chain natout { type nat hook postrouting priority srcnat; oifname "wan0" %s; }
	chain input { type filter hook input priority filter; policy drop;
		iifname { "lo", "lan0" } accept
		ct state established,related accept
	}
	chain firewall { type filter hook forward priority filter; policy drop;
		iifname "lan0" accept
		ct state established,related accept
	}
}
`, side.nat), "ip", "netns", "exec", side.router, "nft", "-f", "-")
	}
	return l
}

// startIn starts a node in namespace ns listening on TCP and QUIC at ip.
func startIn(t *testing.T, ns, name, ip string, extra ...string) *proc {
	t.Helper()
	p := &proc{name: name, dataDir: filepath.Join(t.TempDir(), name), ns: ns}
	listen := []string{"--listen", "/ip4/" + ip + "/tcp/4001", "--listen", "/ip4/" + ip + "/udp/4001/quic-v1"}
	return p.start(t, "/ip4/"+ip+"/", append(listen, extra...)...)
}

// via is how p's node reaches peer id now (api.Peer.Via), and whether it
// has id's advert.
func via(t *testing.T, p *proc, id string) (string, bool) {
	t.Helper()
	out, _, code := p.infernet(t, nil, "peers", "--json", "--datadir", p.dataDir)
	var peers []api.Peer
	if code != 0 || json.Unmarshal([]byte(out), &peers) != nil {
		return "", false
	}
	for _, q := range peers {
		if q.ID == id {
			return q.Via, q.Advert != nil
		}
	}
	return "", false
}

var relayUsage = regexp.MustCompile(`msg="relay usage".*`)

// TestNAT runs verified jobs from a client behind one home router on a
// provider behind another, neither with a port mapping: through the relay
// at first, then over a hole-punched connection where both routers map
// endpoint-independently; only through the relay where one maps
// symmetrically.
func TestNAT(t *testing.T) {
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	module := filepath.Join(jobs, "cpu", "cpu.wasm")
	input := filepath.Join(jobs, "cpu", "input.txt")
	want, err := os.ReadFile(filepath.Join(jobs, "cpu", "output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		natB nat
		// after is how the client reaches the provider once jobs ran.
		after string
		// bulk measures what share of a 50 MiB input the relay carries.
		bulk bool
	}{
		{"both cone", cone, "hole-punched", true},
		{"one symmetric", symmetric, "relayed", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lab := newNATLab(t, tt.natB)
			boot := startIn(t, lab.pub, "bootstrap", "11.0.0.1", "--no-provide", "--reachability", "public")
			relay := startIn(t, lab.pub, "relay", "11.0.0.2", "--no-provide", "--reachability", "public", "--relay",
				"--bootstrap", boot.addr)
			// Two providers behind router A, so that two replicas agree (and
			// the client's audit verifies them); behind NAT with no port
			// mapping (--nat=false) and told they are not reachable
			// (AutoNAT needs four public observers to learn it; see
			// package reach), they take a relay slot at once.
			start := time.Now()
			var providers []*proc
			ids := map[string]bool{}
			for i, port := range []string{"4001", "4002"} {
				p := &proc{name: fmt.Sprintf("provider%d", i+1), dataDir: filepath.Join(t.TempDir(), "provider"), ns: lab.homeA}
				p.start(t, "/ip4/192.168.1.2/", "--listen", "/ip4/192.168.1.2/tcp/"+port, "--listen", "/ip4/192.168.1.2/udp/"+port+"/quic-v1",
					"--reachability", "private", "--bootstrap", boot.addr, "--relay.static", relay.addr)
				providers = append(providers, p)
				ids[peerID(t, p)] = true
			}
			// The lab's whole internet is one /16 (11.0.0.0/16), so the
			// client counts every peer as an operator of its own.
			// Its silence is the default's double rather than the tests' 3 s:
			// every word of a replica crosses the relay and three node
			// processes, and a CI run under load once heard nothing from
			// either provider for 3 s and failed the job.
			client := startIn(t, lab.homeB, "client", "192.168.2.2", "--no-provide", "--reachability", "private",
				"--bootstrap", boot.addr, "--no-netgroups", "--silence", "10s")
			for _, p := range providers {
				// Logged whole, with the provider's own ID: dialable.
				self := p.addr[strings.LastIndex(p.addr, "/p2p/"):]
				waitFor(t, 60*time.Second, p.name+"'s relayed address", func() bool {
					return strings.Contains(p.stderr.String(), "/p2p-circuit"+self)
				})
			}
			relayedAt := time.Since(start)
			for id := range ids {
				waitFor(t, 60*time.Second, "the client to see the providers' adverts", func() bool {
					_, advert := via(t, client, id)
					return advert
				})
			}
			advertsAt := time.Since(start)
			job := func(i int, input string, want []byte) {
				t.Helper()
				outFile := filepath.Join(t.TempDir(), "out")
				stdout, stderr, code := client.infernet(t, nil, "submit", module, "--input", input, "--replicas", "2",
					"--json", "--output", outFile, "--datadir", client.dataDir)
				if code != 0 {
					t.Fatalf("job %d: submit exit %d: %s %s", i, code, stdout, stderr)
				}
				var s summary
				if err := json.Unmarshal([]byte(stdout), &s); err != nil {
					t.Fatalf("job %d: summary %q: %v", i, stdout, err)
				}
				if !s.Verified || s.Agree != 2 {
					t.Fatalf("job %d: summary %+v: want verified by two replicas", i, s)
				}
				for _, r := range s.Providers {
					if !ids[r.Provider] {
						t.Fatalf("job %d: replica on %s, not a provider behind NAT", i, r.Provider)
					}
				}
				if got, _ := os.ReadFile(outFile); !bytes.Equal(got, want) {
					t.Fatalf("job %d: output %q, want %q", i, got, want)
				}
			}
			// The first job goes through the relay: the providers have no
			// other address the client could dial.
			job(0, input, want)
			t.Logf("%s: providers' start to relayed addresses %v, to the client holding their adverts %v, to the first job's verified result %v",
				tt.name, relayedAt, advertsAt, time.Since(start))
			// The client was given no relay: it found the relay among its
			// connected peers (identify says who speaks the hop protocol).
			waitFor(t, 60*time.Second, "the client's relayed address, from a relay it found", func() bool {
				return strings.Contains(client.stderr.String(), "/p2p-circuit")
			})
			// Then the connections become direct where the routers allow a
			// hole punch, and stay relayed where not; jobs run either way.
			for id := range ids {
				waitFor(t, 90*time.Second, fmt.Sprintf("the client to reach %s %s", id, tt.after), func() bool {
					got, _ := via(t, client, id)
					return got == tt.after
				})
			}
			t.Logf("%s: providers' start to %s connections %v", tt.name, tt.after, time.Since(start))
			for i := 1; i < 3; i++ {
				job(i, input, want)
			}
			for id := range ids {
				if got, _ := via(t, client, id); got != tt.after {
					t.Errorf("client reaches provider %s %q after the jobs, want %q", id, got, tt.after)
				}
			}
			// The relay carried the first connection (its circuit count),
			// and says what it spent against its limits.
			use := lastUsage(t, relay)
			t.Logf("%s: %s", tt.name, use)
			if !tt.bulk {
				return
			}
			// A 50 MiB input, fetched by both providers, goes over the
			// direct connections: the relay carries almost none of it.
			big := filepath.Join(t.TempDir(), "big")
			if err := os.WriteFile(big, append([]byte("10 10\n"), bytes.Repeat([]byte{'\n'}, 50<<20)...), 0o600); err != nil {
				t.Fatal(err)
			}
			// The relay logs its usage every 10 s when it changed: a line
			// logged 11 s after the last job is the count at its end.
			time.Sleep(11 * time.Second)
			before := usageBytes(t, lastUsage(t, relay))
			job(3, big, []byte("mandelbrot 10x10 maxiter 10 iterations 571 hash 2ff3f46a\n"))
			time.Sleep(11 * time.Second)
			after := usageBytes(t, lastUsage(t, relay))
			moved := int64(2 * (50<<20 + 6))
			t.Logf("%s: 50 MiB input to two providers: the relay carried %d of %d bytes (%.3f%%)", tt.name, after-before, moved,
				100*float64(after-before)/float64(moved))
			if after-before > moved/100 {
				t.Errorf("the relay carried %d bytes of a %d-byte transfer over hole-punched connections", after-before, moved)
			}
		})
	}
}

var relayBytes = regexp.MustCompile(` bytes=(\d+)`)

// lastUsage waits for the relay's latest usage line to count a circuit.
func lastUsage(t *testing.T, relay *proc) string {
	t.Helper()
	var use string
	waitFor(t, 30*time.Second, "the relay's usage", func() bool {
		m := relayUsage.FindAllString(relay.stderr.String(), -1)
		if len(m) == 0 || strings.Contains(m[len(m)-1], "circuits_opened=0") {
			return false
		}
		use = m[len(m)-1]
		return true
	})
	return use
}

// usageBytes is the bytes count of a relay usage line.
func usageBytes(t *testing.T, line string) int64 {
	t.Helper()
	m := relayBytes.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no bytes in %q", line)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
