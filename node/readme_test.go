package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/keys"
)

// The documents (README.md and docs/*.md) quote figures that the code
// decides. Their tables of flags, defaults and limits are generated from the
// code (go generate ./...; cmd/infernet/internal/docgen, whose test fails
// when a checked-in table is stale), and the prose names the constants those
// tables hold rather than restating their values. The tests here check what
// the tables cannot: that every constant the prose names is in a table, and
// the figures that are behaviour rather than one constant.

// docRoot is the repository root, seen from this package.
const docRoot = ".."

// TestDocsConstants checks the documents' figures that are not one constant
// of a generated table, and that each constant they name is in one.
func TestDocsConstants(t *testing.T) {
	// Every constant the prose names (`node.DefaultMaxMemory`,
	// `reputation.Defaults`) is a row of a generated table, or a prefix of
	// one, so that a reader finds its value.
	rows := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([\\w.]+)` \\| ")
	named := regexp.MustCompile("`((?:node|wire|host|gossip|blobnet|payments|requirement|reputation|llama|abi|cli)\\.(?:Default|Max|Min|Exit|Hold)[\\w.]*)`")
	for _, file := range docFileList(t) {
		for _, block := range docGenerated(t, file) {
			for _, m := range row.FindAllStringSubmatch(block, -1) {
				rows[m[1]] = true
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal("no generated table of limits in the documents")
	}
	for _, file := range docFileList(t) {
		for _, m := range named.FindAllSubmatch(docRead(t, file), -1) {
			name := string(m[1])
			found := rows[name]
			for r := range rows {
				found = found || strings.HasPrefix(r, name+".")
			}
			if !found {
				t.Errorf("%s names %s, which no generated table of limits holds", file, name)
			}
		}
	}

	// How many unpaid results a client may leave is behaviour, not one
	// constant.
	if m := regexp.MustCompile(`Beyond (\d+) \+ 1 in (\d+) of the results it paid for`).FindSubmatch(docProse(t, "docs/payments.md")); m == nil {
		t.Error("docs/payments.md no longer says how many unpaid results a client may have")
	} else {
		base, per := docAtoi(t, m[1]), docAtoi(t, m[2])
		for _, paid := range []int{0, 9, 10, 25, 100} {
			allowed := base + paid/per
			if peers.OwesTooMuch(allowed, paid) || !peers.OwesTooMuch(allowed+1, paid) {
				t.Errorf("docs/payments.md: a client that paid %d may leave %d unpaid, the code disagrees", paid, allowed)
			}
		}
	}

	// --max-per-client is documented (its flag, the limits table) as
	// slots + sessions + queue/2, with DefaultQueuePerSlot places queued
	// per slot and DefaultSessionsPerSlot sessions.
	for _, slots := range []int{1, 4, 16} {
		c := Config{Slots: slots}
		c.setDefaults()
		if c.Queue != DefaultQueuePerSlot*slots || c.Sessions != DefaultSessionsPerSlot*slots || c.MaxPerClient != c.Slots+c.Sessions+c.Queue/2 {
			t.Errorf("with %d slots: a queue of %d, %d sessions and --max-per-client %d, not %d, %d and slots + sessions + queue/2",
				slots, c.Queue, c.Sessions, c.MaxPerClient, DefaultQueuePerSlot*slots, DefaultSessionsPerSlot*slots)
		}
	}

	// The packages the README names are among those make deps installs.
	if m := regexp.MustCompile(`Debian packages \(([^)]*), \.\.\.\)`).FindSubmatch(docProse(t, "README.md")); m == nil {
		t.Error("README.md no longer names the Debian packages of make deps")
	} else {
		pm := regexp.MustCompile(`(?m)^packages=\(([^)]*)\)`).FindStringSubmatch(string(docRead(t, "scripts/deps.sh")))
		if pm == nil {
			t.Fatal("scripts/deps.sh has no packages=(...)")
		}
		for _, p := range strings.Split(string(m[1]), ", ") {
			if !slices.Contains(strings.Fields(pm[1]), p) {
				t.Errorf("README.md names package %s, which scripts/deps.sh does not install", p)
			}
		}
	}

	// The templates the documents list are the key store's.
	var names []string
	for _, tm := range keys.Templates() {
		names = append(names, tm.Name)
	}
	if m := regexp.MustCompile("Templates by name \\(`infernet ceremony templates`\\): ([^.]+)\\.").FindSubmatch(docProse(t, "docs/proofs.md")); m == nil {
		t.Error("docs/proofs.md no longer lists the templates")
	} else if got := docBackticked(string(m[1])); !slices.Equal(got, names) {
		t.Errorf("docs/proofs.md lists templates %v, the key store has %v", got, names)
	}

	// The backend table of docs/tensor.md names every backend, and only those.
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| ").FindAllSubmatch(docRead(t, "docs/tensor.md"), -1) {
		listed = append(listed, string(m[1]))
	}
	if want := strings.Split(backends.Names(), ", "); !slices.Equal(listed, want) {
		t.Errorf("docs/tensor.md lists backends %v, the code has %v", listed, want)
	}
}

// TestDocsProtocols: every libp2p protocol or topic the documents name in
// backticks is one the code speaks, and each the code speaks is named.
func TestDocsProtocols(t *testing.T) {
	known := map[string]bool{"/infernet": true} // the DHT's protocol prefix
	for _, p := range []string{string(wire.ProtocolBid), string(wire.ProtocolAssign), string(wire.ProtocolResult), string(wire.ProtocolSettle),
		string(wire.ProtocolAggregate), blobnet.ProtocolID, challenge.ID, gossip.TopicJobs, gossip.TopicAdverts} {
		known[p] = true
	}
	re := regexp.MustCompile("`(/infernet[^`]*)`")
	named := map[string]bool{}
	for _, file := range docFileList(t) {
		for _, m := range re.FindAllSubmatch(docRead(t, file), -1) {
			named[string(m[1])] = true
			if !known[string(m[1])] {
				t.Errorf("%s names protocol %s, which the code does not have", file, m[1])
			}
		}
	}
	for p := range known {
		if !named[p] {
			t.Errorf("no document names protocol %s", p)
		}
	}
}

// TestDocsExample: the README's worked example shows the job's real output,
// its real size and digest, and runs files that exist.
func TestDocsExample(t *testing.T) {
	b := string(docRead(t, "README.md"))
	out, err := os.ReadFile(filepath.Join(docRoot, "testdata/jobs/cpu/output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b, "\n"+string(out)) {
		t.Errorf("README's example output is not testdata/jobs/cpu/output.txt (%q)", out)
	}
	m := regexp.MustCompile(`output (\d+) bytes, sha256 ([0-9a-f]{64})`).FindStringSubmatch(b)
	sum := sha256.Sum256(out)
	switch {
	case m == nil:
		t.Error("README's example no longer shows the output's size and digest")
	case m[1] != strconv.Itoa(len(out)) || m[2] != hex.EncodeToString(sum[:]):
		t.Errorf("README's example says %s bytes, sha256 %s; the output is %d bytes, sha256 %x", m[1], m[2], len(out), sum)
	}
	for _, p := range []string{"testdata/jobs/cpu/cpu.wasm", "testdata/jobs/cpu/input.txt"} {
		if !strings.Contains(b, "submit "+p) && !strings.Contains(b, "--input "+p) {
			t.Errorf("README's example no longer runs %s", p)
		}
	}
}

// TestDocsLinks: every relative link in README.md and docs/*.md points at a
// file that exists (and, with #anchor, at a heading of it), and every
// repository path the documents name in backticks exists.
func TestDocsLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	path := regexp.MustCompile("`((?:abi|guest|host|node|proofs|payments|cmd|testdata|scripts|docs)/[^` ]*)`")
	links, paths := 0, 0
	for _, file := range docFileList(t) {
		b := docRead(t, file)
		for _, m := range link.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			name, anchor, _ := strings.Cut(target, "#")
			dest := file
			if name != "" {
				dest = filepath.Join(filepath.Dir(file), name)
			}
			if _, err := os.Stat(filepath.Join(docRoot, dest)); err != nil {
				t.Errorf("%s links to %s, which does not exist", file, target)
				continue
			}
			if anchor != "" && !slices.Contains(docAnchors(docRead(t, dest)), anchor) {
				t.Errorf("%s links to %s: %s has no heading #%s", file, target, dest, anchor)
			}
		}
		for _, m := range path.FindAllSubmatch(b, -1) {
			p := string(m[1])
			if strings.ContainsAny(p, "{*[") {
				continue
			}
			paths++
			if _, err := os.Stat(filepath.Join(docRoot, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", file, p)
			}
		}
	}
	if links == 0 || paths == 0 {
		t.Errorf("found %d links and %d paths: the patterns are broken", links, paths)
	}
}

// docFileList are README.md and docs/*.md, relative to the repository root.
func docFileList(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(docRoot, f)
		out = append(out, rel)
	}
	return out
}

// docProse is a document with every run of white space made one space, so
// that patterns do not depend on where lines break.
func docProse(t *testing.T, file string) []byte {
	t.Helper()
	return []byte(strings.Join(strings.Fields(string(docRead(t, file))), " "))
}

func docRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docAnchors are the GitHub anchors of a Markdown file's headings.
func docAnchors(doc []byte) []string {
	var out []string
	count := map[string]int{}
	inCode := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		count[b.String()]++
		out = append(out, a)
	}
	return out
}

// docGenerated are the bodies of a document's generated blocks.
func docGenerated(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?s)<!-- generated: [^>]*-->(.*?)<!-- end generated -->`).FindAllSubmatch(docRead(t, file), -1) {
		out = append(out, string(m[1]))
	}
	return out
}

func docAtoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func docBackticked(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
