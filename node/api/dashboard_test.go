package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api/dashboardtest"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// dashNode is a node of the dashboard tests' network with its API.
type dashNode struct {
	n   *node.Node
	srv *Server
	dir string
}

// dashboardNetwork starts 3 providers and a client, all on loopback, each
// with its API, and waits until the client has every provider's advert.
func dashboardNetwork(t *testing.T) (client *dashNode, providers []*dashNode) {
	t.Helper()
	start := func(provide bool, boot []string) *dashNode {
		n, srv, dir := serveNode(t, provide, boot)
		return &dashNode{n: n, srv: srv, dir: dir}
	}
	var boot []string
	for range 3 {
		p := start(true, boot)
		boot = []string{p.n.Addrs()[0].String()}
		providers = append(providers, p)
	}
	client = start(false, boot)
	deadline := time.Now().Add(30 * time.Second)
	for adverts := 0; adverts < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the client has %d provider adverts after 30 s, want 3", adverts)
		}
		time.Sleep(50 * time.Millisecond)
		adverts = 0
		for _, p := range client.n.Peers() {
			if p.Advert != nil {
				adverts++
			}
		}
	}
	return client, providers
}

// put stores a file of testdata/jobs (or bytes) in n.
func put(t *testing.T, n *node.Node, b []byte) jobs.ShardInput {
	t.Helper()
	d, err := n.PutBlob(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return jobs.ShardInput{Input: d, InputSize: int64(len(b))}
}

func jobModule(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "jobs", name, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dashboardWork gives the client a job, a sharded job with a reduce and a
// training run of 2 rounds to show, and returns the sharded job.
func dashboardWork(t *testing.T, c *node.Node) *store.ShardedStatus {
	t.Helper()
	ctx := context.Background()
	cat, lines, sum := put(t, c, jobModule(t, "cat")), put(t, c, jobModule(t, "lines")), put(t, c, jobModule(t, "sum"))
	terms := jobs.Spec{Replicas: 2, Terms: wire.Terms{TimeoutMS: 30_000}}
	submit(t, c, cat, []byte("hello dashboard\n"))
	s := terms
	s.Module, s.ModuleSize = lines.Input, lines.InputSize
	in := put(t, c, []byte("a\nbb\nccc\n"))
	sj, err := c.SubmitSharded(ctx, jobs.ShardedSpec{Spec: s, Inputs: []jobs.ShardInput{in, in, in},
		Reduce: &jobs.ReduceSpec{Module: sum.Input, ModuleSize: sum.InputSize}}, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	s.Module, s.ModuleSize = cat.Input, cat.InputSize
	eval := terms
	eval.Module, eval.ModuleSize = sum.Input, sum.InputSize
	first := put(t, c, []byte("1\n"))
	rec, err := c.Train(ctx, jobs.TrainSpec{Spec: s, Shards: 3, Rounds: 2, State: first.Input, StateSize: first.InputSize,
		Reduce: jobs.ReduceSpec{Module: cat.Input, ModuleSize: cat.InputSize}, Eval: &eval}, nil)
	if err != nil || rec.State != store.JobVerified {
		t.Fatalf("training run: %+v, %v", rec, err)
	}
	// A run that fails in its first round (each shard's output over its
	// 1-byte limit) leaves that round unfinished.
	s.MaxOutput = 1
	if rec, err := c.Train(ctx, jobs.TrainSpec{Spec: s, Shards: 1, Rounds: 2, State: first.Input, StateSize: first.InputSize,
		Reduce: jobs.ReduceSpec{Module: cat.Input, ModuleSize: cat.InputSize}}, nil); err != nil || rec.State != store.JobFailed {
		t.Fatalf("a training run that fails: %+v, %v", rec, err)
	}
	return sj
}

// submit runs module on input, 2 replicas, and wants it verified.
func submit(t *testing.T, c *node.Node, module jobs.ShardInput, input []byte) *store.Job {
	t.Helper()
	in := put(t, c, input)
	job, err := c.Submit(context.Background(), jobs.Spec{Terms: wire.Terms{Module: module.Input, ModuleSize: module.InputSize,
		Input: in.Input, InputSize: in.InputSize, TimeoutMS: 30_000},
		Replicas: 2}, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job: %+v, %v", job, err)
	}
	return job
}

// loginURL asks d's API for a one-time dashboard link.
func loginURL(t *testing.T, d *dashNode) string {
	t.Helper()
	c, err := Dial(d.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	url, exp, err := c.DashboardURL(context.Background())
	if err != nil || time.Until(exp) <= 0 || !strings.HasPrefix(url, "http://"+d.srv.Addr()+"/dashboard/login?token=") {
		t.Fatalf("dashboard link %q expiring %v: %v", url, exp, err)
	}
	return url
}

// TestDashboardBrowser drives every dashboard page in headless Chromium
// against a live network of 4 nodes (3 providers and a client): status,
// peers with reputation and why, jobs with per-shard and per-replica
// progress (updated live while the page is open), training rounds with
// their metric charts, earnings and spending (free mode here; the regtest
// test has payments), and a provider's runs for others. Each page's
// screenshot must show its colored parts.
func TestDashboardBrowser(t *testing.T) {
	client, providers := dashboardNetwork(t)
	c := client.n
	sj := dashboardWork(t, c)
	ctx := dashboardtest.Browser(t)
	dashboardtest.Login(t, ctx, loginURL(t, client))

	t.Run("status", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "status")
		text := dashboardtest.Eval[string](t, ctx, "document.body.innerText")
		for _, want := range []string{c.ID().String(), "client only", "free mode", "Peers connected\n3", "Training runs\n2"} {
			if !strings.Contains(text, want) {
				t.Errorf("status page lacks %q:\n%s", want, text)
			}
		}
		if _, distinct := dashboardtest.Screenshot(t, ctx, "status"); distinct < 20 {
			t.Errorf("status screenshot has %d colors: blank?", distinct)
		}
	})

	t.Run("peers", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "peers")
		rows := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll("table.peers tbody tr")].map(r => r.dataset.peer)`)
		if len(rows) != 3 {
			t.Fatalf("peers page lists %d peers, want the 3 providers: %v", len(rows), rows)
		}
		for _, p := range providers {
			if !strings.Contains(strings.Join(rows, " "), p.n.ID().String()) {
				t.Errorf("provider %s is not listed", p.n.ID())
			}
		}
		why := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll("table.peers td.why")].map(td => td.innerText)`)
		for i, w := range why {
			if w == "" {
				t.Errorf("peer %d: no reason given for its reputation", i)
			}
		}
		if near, _ := dashboardtest.Screenshot(t, ctx, "peers", dashboardtest.Accent); near[0] < 50 {
			t.Errorf("peers screenshot: %d pixels of reputation bars", near[0])
		}
	})

	t.Run("jobs", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "jobs")
		shards := dashboardtest.Eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll('.job.sharded[data-id="%s"][data-state=verified] .shards .chip.s-verified').length`, sj.ID))
		if shards != 4 { // 3 shards and the reduce
			t.Errorf("sharded job shows %d verified parts, want 3 shards and the reduce", shards)
		}
		// Newest first: the failed run's round 1, then the verified run's.
		rounds := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll(".job.sharded .round")].map(e => e.innerText)`)
		if len(rounds) != 3 || !strings.HasPrefix(rounds[1], "round 2 of training run") || !strings.HasPrefix(rounds[2], "round 1 of training run") {
			t.Errorf("the training runs' sharded jobs are labelled %q, want the failed run's round 1, then the other's rounds 2 and 1", rounds)
		}
		replicas := dashboardtest.Eval[int](t, ctx, `document.querySelectorAll("table.jobs tr[data-state=verified] td.replicas .chip.s-done").length`)
		jobs := dashboardtest.Eval[int](t, ctx, `document.querySelectorAll("table.jobs tr[data-state=verified]").length`)
		if jobs != 3 || replicas != 2*jobs { // the job and the 2 evaluations
			t.Errorf("jobs table: %d verified jobs with %d done replicas, want 3 with 2 each", jobs, replicas)
		}
		// Live: a job submitted now shows up without a reload, its replicas
		// running (about 3 s of mandelbrot), then verified.
		dashboardtest.Eval[bool](t, ctx, "window.sameDocument = true")
		done := make(chan *store.Job, 1)
		go func() { done <- submit(t, c, put(t, c, jobModule(t, "cpu")), []byte("2000 1000")) }()
		dashboardtest.WaitTrue(t, ctx, `!!document.querySelector('table.jobs tr[data-state=running] td.replicas .chip.s-running')`, "a replica running on the open page")
		job := <-done
		dashboardtest.WaitTrue(t, ctx, fmt.Sprintf(`!!document.querySelector('table.jobs tr[data-job="%s"][data-state=verified]')`, job.ID), "the new job verified on the open page")
		if !dashboardtest.Eval[bool](t, ctx, "window.sameDocument === true") {
			t.Error("the page reloaded to show the new job")
		}
		if near, _ := dashboardtest.Screenshot(t, ctx, "jobs", dashboardtest.Green); near[0] < 300 {
			t.Errorf("jobs screenshot: %d green pixels of verified parts", near[0])
		}
	})

	t.Run("training", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "training")
		if n := dashboardtest.Eval[int](t, ctx, `document.querySelectorAll(".job.training[data-state=verified] table.rounds tbody tr").length`); n != 2 {
			t.Errorf("training run shows %d rounds, want 2", n)
		}
		// The failed run's unfinished round ended with it: not running.
		if got := dashboardtest.Eval[string](t, ctx, `[...document.querySelectorAll(".job.training[data-state=failed] table.rounds tbody tr .chip")].map(c => c.textContent).join(",")`); got != "failed" {
			t.Errorf("the failed run's rounds show %q, want one round, failed", got)
		}
		ys := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll('svg[data-chart=lines] circle')].map(c => c.dataset.y)`)
		if strings.Join(ys, " ") != "3 9" {
			t.Errorf("the lines chart's points are %v, want the 3 and 9 lines of rounds 1 and 2", ys)
		}
		// A metric's axis spans its values, padded, not from 0 (a newcomer's
		// accuracy from 0.948 to 0.964 drew flat).
		ticks := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll('svg[data-chart=lines] text[text-anchor=end]')].map(e => e.textContent)`)
		if len(ticks) != 5 || ticks[0] != "2.4" || ticks[4] != "9.6" {
			t.Errorf("the lines chart's axis reads %q, want 2.4 to 9.6 (3 to 9, padded a tenth)", ticks)
		}
		if near, _ := dashboardtest.Screenshot(t, ctx, "training", dashboardtest.Accent); near[0] < 100 {
			t.Errorf("training screenshot: %d pixels of the metric chart", near[0])
		}
	})

	t.Run("money", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "money")
		if !dashboardtest.Eval[bool](t, ctx, `!!document.querySelector("[data-free=true]")`) {
			t.Error("money page does not say the node runs in free mode")
		}
		if n := dashboardtest.Eval[int](t, ctx, `document.querySelectorAll("svg[data-chart=money] circle").length`); n != 0 {
			t.Errorf("money chart of a free node has %d points", n)
		}
		dashboardtest.Screenshot(t, ctx, "money")
	})

	t.Run("runs", func(t *testing.T) {
		// A provider's dashboard, in a second tab.
		pctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		dashboardtest.Login(t, pctx, loginURL(t, providers[0]))
		dashboardtest.Page(t, pctx, "runs")
		clients := dashboardtest.Eval[[]string](t, pctx, `[...document.querySelectorAll("table.runs tbody tr[data-state=delivered] td:nth-child(3) span")].map(s => s.title)`)
		if len(clients) == 0 {
			t.Fatal("the provider's runs page lists no delivered runs")
		}
		for _, id := range clients {
			if id != c.ID().String() {
				t.Errorf("run for client %s, want %s", id, c.ID())
			}
		}
		if near, _ := dashboardtest.Screenshot(t, pctx, "runs", dashboardtest.Green); near[0] < 100 {
			t.Errorf("runs screenshot: %d green pixels", near[0])
		}
	})
}

// TestDashboardCollateral: the money page keeps collateral (stakes,
// Payment.Bond) out of what was earned, spent and held, and shows it
// apart, in the CLI's categories (infernet earnings and spending: at
// stake, taken, returned, "not staked" left out) and words. On a node
// that holds its providers' stakes and stakes its own as a provider, one
// of each taken (a slashed provider's 250,000 msat had shown as earned on
// its client and as spent on it).
func TestDashboardCollateral(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	const peer = "12D3KooWPeerOfTheCollateralTest"
	start := time.Now().Add(-time.Hour)
	for i, p := range []store.Payment{
		{State: store.PaySettled, AmountMsat: 5000},                                               // a price earned
		{State: store.PayLocked, AmountMsat: 3000},                                                // a price held for this node
		{Bond: true, State: store.PaySettled, AmountMsat: 250_000},                                // a liar's stake taken
		{Bond: true, State: store.PayLocked, AmountMsat: 100_000},                                 // a stake held
		{Bond: true, State: store.PayCanceled, AmountMsat: 60_000},                                // a stake returned
		{Bond: true, State: store.PayCanceled, AmountMsat: 70_000, Error: "replica ended"},        // never staked
		{Outgoing: true, State: store.PaySettled, AmountMsat: 7000, FeeMsat: 10},                  // a price paid
		{Outgoing: true, Bond: true, State: store.PaySettled, AmountMsat: 250_000, FeeMsat: 1000}, // slashed
		{Outgoing: true, Bond: true, State: store.PayLocked, AmountMsat: 40_000, FeeMsat: 5},      // at stake
		{Outgoing: true, Bond: true, State: store.PayCanceled, AmountMsat: 30_000, // returned
			Error: "FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"},
		{Outgoing: true, Bond: true, State: store.PayCanceled, AmountMsat: 20_000, Error: "FAILURE_REASON_NO_ROUTE"}, // never staked
	} {
		p.Job, p.Peer, p.Created = wire.JobID{byte(i + 1)}, peer, start.Add(time.Duration(i)*time.Minute)
		p.Hash = [32]byte{byte(i + 1)}
		if err := db.PutPayment(&p); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, srv, _ := serveNodeAt(t, dir, false, nil)
	ctx := dashboardtest.Browser(t)
	dashboardtest.Login(t, ctx, loginURL(t, &dashNode{srv: srv, dir: dir}))
	dashboardtest.Page(t, ctx, "money")
	cards := func(sel string) map[string]string {
		t.Helper()
		kv := dashboardtest.Eval[[][]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(c => [c.querySelector(".label").innerText, c.querySelector(".value").innerText])`, sel))
		m := map[string]string{}
		for _, c := range kv {
			m[c[0]] = c[1]
		}
		return m
	}
	for _, tt := range []struct {
		sel  string
		want map[string]string
	}{
		{".cards:not(.collateral) .card", map[string]string{"Earned": "5,000 msat", "Spent (with routing fees)": "7,010 msat",
			"Held in escrow for you": "3,000 msat", "Payments": "11"}},
		{`.cards.collateral[data-direction=incoming] .card`, map[string]string{"Collateral at stake with you": "100,000 msat",
			"Collateral taken by you": "250,000 msat", "Collateral returned by you": "60,000 msat"}},
		{`.cards.collateral[data-direction=outgoing] .card`, map[string]string{"Your collateral at stake": "40,000 msat",
			"Collateral taken from you (slashed)": "250,000 msat\n+ 1,000 msat routing fees", "Collateral returned to you": "30,000 msat"}},
	} {
		if got := cards(tt.sel); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s:\n got %v\nwant %v", tt.sel, got, tt.want)
		}
	}
	// The chart is of prices: one settled each way.
	for series, want := range map[string]string{"earned": "5000", "spent": "7010"} {
		ys := dashboardtest.Eval[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('svg[data-chart=money] circle[data-series=%s]')].map(c => c.dataset.y)`, series))
		if strings.Join(ys, " ") != want {
			t.Errorf("%s chart: %v, want %s", series, ys, want)
		}
	}
	// Each stake row says it is collateral, whose, and what became of it.
	rows := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll("table.payments tbody tr[data-kind=collateral]")].map(r => [...r.cells].slice(2).map(c => c.innerText).join("|"))`)
	if len(rows) != 8 {
		t.Fatalf("recent payments list %d collateral rows, want 8: %q", len(rows), rows)
	}
	joined := strings.Join(rows, "\n")
	for _, want := range []string{"stake taken: the provider was caught lying", "stake returned", "not staked: replica ended",
		"not staked: FAILURE_REASON_NO_ROUTE", "staked with you", "staked by you"} {
		if !strings.Contains(joined, want) {
			t.Errorf("collateral rows lack %q:\n%s", want, joined)
		}
	}
	if prices := dashboardtest.Eval[string](t, ctx, `[...document.querySelectorAll("table.payments tbody tr:not([data-kind=collateral]) td:nth-child(4)")].map(c => c.innerText).sort().join(",")`); prices != "earned,earned,paid" {
		t.Errorf("price rows are %q, want earned, earned, paid", prices)
	}
	dashboardtest.Screenshot(t, ctx, "money-collateral")
}

// TestDashboardAccess: the login link works once; the pages, snapshot and
// events need its session; other Host names get nothing; issuing a link
// needs the API token.
func TestDashboardAccess(t *testing.T) {
	_, srv, dir := startNode(t)
	d := &dashNode{srv: srv, dir: dir}
	base := "http://" + srv.Addr()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	get := func(c *http.Client, path string, host string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/dashboard/", "/dashboard/app.js", "/dashboard/snapshot", "/dashboard/events"} {
		if code := get(browser, p, ""); code != http.StatusUnauthorized {
			t.Errorf("%s before login: %d, want 401", p, code)
		}
	}
	link := loginURL(t, d)
	path := strings.TrimPrefix(link, base)
	if code := get(browser, path, "evil.example:80"); code != http.StatusForbidden {
		t.Errorf("login with a foreign Host: %d, want 403", code)
	}
	if code := get(browser, path, ""); code != http.StatusOK { // 303 to the page, followed
		t.Fatalf("login: %d, want the page", code)
	}
	for _, p := range []string{"/dashboard/", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/snapshot"} {
		if code := get(browser, p, ""); code != http.StatusOK {
			t.Errorf("%s after login: %d, want 200", p, code)
		}
	}
	if code := get(browser, "/dashboard/snapshot", "evil.example"); code != http.StatusForbidden {
		t.Errorf("snapshot with a foreign Host and the cookie: %d, want 403", code)
	}
	other, _ := cookiejar.New(nil)
	if code := get(&http.Client{Jar: other}, path, ""); code != http.StatusUnauthorized {
		t.Errorf("a spent login link: %d, want 401", code)
	}
	resp, err := http.Post(base+"/v1/dashboard/login", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a login link without the API token: %d, want 401", resp.StatusCode)
	}
	// The snapshot holds no payment secrets.
	req, _ := http.NewRequest(http.MethodGet, base+"/dashboard/snapshot", nil)
	resp, err = browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"node":{"id":`) || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("snapshot: %s, headers %v", body, resp.Header)
	}
}

// TestTokens: tokens expire, are spent once, and at most max are kept.
func TestTokens(t *testing.T) {
	ts := tokens{max: 3}
	a, _ := ts.issue(time.Hour)
	gone, _ := ts.issue(-time.Second)
	if !ts.valid(a, false) || !ts.valid(a, true) || ts.valid(a, false) {
		t.Error("a token is not valid until spent")
	}
	if ts.valid(gone, false) {
		t.Error("an expired token is valid")
	}
	var kept []string
	for range 5 {
		tok, _ := ts.issue(time.Hour)
		kept = append(kept, tok)
	}
	if len(ts.m) != 3 || !ts.valid(kept[4], false) {
		t.Errorf("%d tokens kept, want 3 with the newest", len(ts.m))
	}
}

// TestDashboardEventsPush: the event stream sends a snapshot at once, then
// nothing while the node's records do not change (it waits for a write,
// not a timer), and a new snapshot when one does: here a job recorded.
func TestDashboardEventsPush(t *testing.T) {
	n, srv, dir := startNode(t)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(loginURL(t, &dashNode{srv: srv, dir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.Addr()+"/dashboard/events", nil)
	resp, err = browser.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v, %v", resp, err)
	}
	defer resp.Body.Close()
	snaps := make(chan Snapshot, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var s Snapshot
				if json.Unmarshal([]byte(data), &s) == nil {
					snaps <- s
				}
			}
		}
		close(snaps)
	}()
	first := <-snaps
	if first.Node.ID != n.ID().String() || len(first.Jobs) != 0 {
		t.Fatalf("first snapshot: %+v", first)
	}
	select {
	case s := <-snaps:
		t.Fatalf("a snapshot with no write: %+v", s)
	case <-time.After(2 * time.Second):
	}
	module := put(t, n, jobModule(t, "cat"))
	go n.Submit(context.Background(), jobs.Spec{Terms: wire.Terms{Module: module.Input, ModuleSize: module.InputSize,
		TimeoutMS: 1000}, Replicas: 1}, nil)
	select {
	case s := <-snaps:
		if len(s.Jobs) != 1 {
			t.Errorf("snapshot after the job was recorded: %d jobs", len(s.Jobs))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no snapshot after a write")
	}
}
