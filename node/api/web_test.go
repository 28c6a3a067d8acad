package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/api/dashboardtest"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// routesInSource lists the API's routes as its source registers them
// ("METHOD /path" or "/path"), so that a route added later is attacked too.
func routesInSource(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`)
	var routes []string
	for _, f := range []string{"server.go", "dashboard.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			routes = append(routes, m[1])
		}
	}
	if len(routes) < 30 {
		t.Fatalf("only %d routes found in the source: %q", len(routes), routes)
	}
	return routes
}

// TestEveryRouteRefusesWebPages attacks every route the API registers as a hostile
// web page would: a cross-origin "simple" request (a form post, a text/plain
// body, no custom header; the browser sends the Origin), a CORS preflight,
// and a DNS-rebound request (the page's own name resolved to 127.0.0.1, so
// its Host header is that name and the page may read the answer). None may
// succeed, and none may answer with CORS headers.
func TestEveryRouteRefusesWebPages(t *testing.T) {
	_, srv, _ := startNode(t)
	base := "http://" + srv.Addr()
	fill := strings.NewReplacer("{digest}", strings.Repeat("ab", 32), "{id}", "x", "{name}", "m")
	do := func(method, path, host string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if method != http.MethodGet {
			body = strings.NewReader(`{"model":"m","prompt":"hi"}`)
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return resp, string(b)
	}
	for _, route := range routesInSource(t) {
		method, path, ok := strings.Cut(route, " ")
		if !ok {
			method, path = http.MethodPost, route
		}
		path = fill.Replace(path)
		origin := map[string]string{"Origin": "http://attacker.example"}
		simple := map[string]string{"Origin": "http://attacker.example", "Content-Type": "text/plain"}
		if method == http.MethodGet {
			simple = origin
		}
		resp, body := do(method, path, "", simple)
		if resp.StatusCode < 400 && path != "/metrics" {
			t.Errorf("%s: a cross-origin simple request without the token: %s %.200s", route, resp.Status, body)
		}
		if h := resp.Header.Get("X-Content-Type-Options"); h != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", route, h)
		}
		if h := resp.Header.Get("Access-Control-Allow-Origin"); h != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", route, h)
		}
		resp, _ = do(http.MethodOptions, path, "", map[string]string{"Origin": "http://attacker.example",
			"Access-Control-Request-Method": method, "Access-Control-Request-Headers": "authorization"})
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: preflight answers %s: %q", route, k, resp.Header.Get(k))
			}
		}
		resp, body = do(method, path, "attacker.example", simple)
		if resp.StatusCode < 400 {
			t.Errorf("%s: a DNS-rebound request (Host attacker.example): %s, the page reads %.200q", route, resp.Status, body)
		}
	}
}

// TestEmptyTokenFile: a token file left empty (its first write failed on a
// full disk, or the node died between creating and writing it) gets a new
// token: it had made the token "", which opened nothing ("Authorization:
// Bearer " cannot carry an empty token: servers trim a header's trailing
// space) but refused every client until the file was removed by hand.
func TestEmptyTokenFile(t *testing.T) {
	n, _, _ := startNode(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(n, Options{DataDir: dir, Addr: "127.0.0.1:0", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tok, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil || len(strings.TrimSpace(string(tok))) != 64 {
		t.Fatalf("token file %q, %v; want a new token", tok, err)
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"Bearer ", http.StatusUnauthorized}, {"Bearer " + strings.TrimSpace(string(tok)), http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/v1/node", nil)
		req.Header.Set("Authorization", tc.auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %.12q…: %s %.200s; want %d", tc.auth, resp.Status, b, tc.want)
		}
	}
}

// TestDashboardHostileStrings: strings hostile peers choose (a
// provider's error, a job's arguments relayed, a client's name in a run,
// an evaluation job's report and the metric names read from it) are put in
// a real node's records and each dashboard page is drawn in Chromium: no
// element of theirs may appear, and their text must show as text.
func TestDashboardHostileStrings(t *testing.T) {
	const (
		tag = `<img data-xss src=x onerror="window.xss=1">`
		esc = `"><b data-xss>'><b data-xss></pre></td></table><svg><b data-xss></svg>`
		bad = tag + esc
	)
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-time.Minute)
	job := &store.Job{ID: wire.NewJobID(), State: store.JobFailed, Created: now, Finished: now, Error: bad,
		Replicas: []store.Replica{{Provider: bad, State: store.ReplicaLost, Error: bad}}}
	job.Announce.Replicas = 1
	job.Announce.Args = []string{bad, "--x=" + bad}
	run := &store.Run{Job: wire.NewJobID(), Client: bad, State: store.RunFailed, Started: now, Finished: now, Error: bad}
	pay := &store.Payment{Job: run.Job, Peer: bad, State: store.PayCanceled, Error: bad, Updated: now}
	train := &store.TrainRun{ID: wire.NewJobID(), State: store.JobFailed, Terms: []byte(`{}`), Error: bad, Created: now, Finished: now,
		Rounds: []store.TrainRound{
			{Report: bad, Metrics: map[string]float64{bad: 1, "__proto__": 2}, Started: now, Finished: now},
			{Report: bad, Metrics: map[string]float64{bad: 3, "__proto__": 4}, Started: now, Finished: now}}}
	for _, err := range []error{db.PutJob(job), db.PutRun(run), db.PutPayment(pay), db.PutTrainRun(train)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	n, srv, _ := serveNodeAt(t, dir, true, nil)
	if js, err := n.Jobs(10); err != nil || len(js) != 1 {
		t.Fatalf("the node's jobs: %d, %v", len(js), err)
	}
	ctx := dashboardtest.Browser(t)
	dashboardtest.Login(t, ctx, loginURL(t, &dashNode{n: n, srv: srv, dir: dir}))
	for _, page := range []string{"status", "peers", "jobs", "runs", "money", "training"} {
		dashboardtest.Page(t, ctx, page)
		if got := dashboardtest.Eval[int](t, ctx, `document.querySelectorAll("[data-xss], main img").length`); got != 0 {
			t.Errorf("%s: %d elements a peer wrote: %s", page, got, dashboardtest.Eval[string](t, ctx, "document.querySelector('main').innerHTML"))
		}
		if dashboardtest.Eval[bool](t, ctx, "window.xss === 1") {
			t.Errorf("%s: a peer's script ran", page)
		}
		text := dashboardtest.Eval[string](t, ctx, "document.querySelector('main').innerText")
		if page != "status" && page != "peers" && !strings.Contains(text, `onerror="window.xss=1"`) {
			t.Errorf("%s: the hostile text is not shown as text:\n%.2000s", page, text)
		}
	}
}

// TestRevision: every answer says the API's revision, and a client is
// told, once, of a node whose revision is later than its own, and not of
// one of its own.
func TestRevision(t *testing.T) {
	n, _, _ := startNode(t)
	dir := t.TempDir()
	srv, err := Serve(n, Options{DataDir: dir, Addr: "127.0.0.1:0", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	told := 0
	c.OnNewer(func(int) { told++ })
	if _, err := c.Node(context.Background()); err != nil || told != 0 {
		t.Fatalf("a node of this revision: told %d, %v", told, err)
	}
	later := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RevisionHeader, strconv.Itoa(Revision+1))
		w.Write([]byte(`{"id": "x"}`))
	}))
	defer later.Close()
	c, err = Dial(dir, strings.TrimPrefix(later.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	var said int
	c.OnNewer(func(rev int) { told++; said = rev })
	for range 2 {
		c.Node(context.Background())
	}
	if told != 1 || said != Revision+1 {
		t.Errorf("a later node: told %d times, of revision %d; want once, of %d", told, said, Revision+1)
	}
}
