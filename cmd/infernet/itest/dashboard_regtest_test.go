//go:build regtest

package itest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/api/dashboardtest"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments/regtest"
)

// TestLightningDashboard: after paid jobs, the dashboards of the paying
// client and of an earning provider, opened with `infernet dashboard` in
// headless Chromium, chart and total exactly what their ledgers
// (spending, earnings) say was settled, and the provider's runs show what
// each replica was paid.
func TestLightningDashboard(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", "..", "..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	const price = 5000
	p1 := startNode(t, "p1", append(lndFlags(t, env, regtest.Provider1), "--price", fmt.Sprint(price))...)
	startNode(t, "p2", append(lndFlags(t, env, regtest.Provider2), "--price", fmt.Sprint(price), "--bootstrap", p1.addr)...)
	client := startNode(t, "client", append(lndFlags(t, env, regtest.Client), "--no-provide", "--bootstrap", p1.addr)...)
	waitAdverts(t, client, 2)
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	for i := range 3 {
		if _, stderr, code := infernet(t, nil, "submit", filepath.Join(jobs, "cpu", "cpu.wasm"), "--input", filepath.Join(jobs, "cpu", "input.txt"),
			"--replicas", "2", "--max-price", fmt.Sprint(price), "--datadir", client.dataDir); code != 0 {
			t.Fatalf("paid job %d: exit %d: %s", i, code, stderr)
		}
	}
	// settledTotal is what a ledger (spending, earnings) says was settled:
	// how many payments and their sum with routing fees.
	settledTotal := func(dataDir, cmd string) (int, int64) {
		n, msat, fees := settled(ledger(t, dataDir, cmd))
		return n, msat + fees
	}
	link := func(dataDir string) string {
		t.Helper()
		out, stderr, code := infernet(t, nil, "dashboard", "--datadir", dataDir)
		if code != 0 || !strings.HasPrefix(out, "http://127.0.0.1:") {
			t.Fatalf("infernet dashboard: exit %d %q: %s", code, out, stderr)
		}
		return strings.TrimSpace(out)
	}
	ctx := dashboardtest.Browser(t)
	for _, tt := range []struct {
		name, dataDir, ledger, series, card string
	}{
		{"client", client.dataDir, "spending", "spent", "Spent (with routing fees)"},
		{"provider", p1.dataDir, "earnings", "earned", "Earned"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, total := settledTotal(tt.dataDir, tt.ledger)
			if n == 0 || (tt.name == "client" && n != 6) {
				t.Fatalf("%s lists %d settled payments", tt.ledger, n)
			}
			dashboardtest.Login(t, ctx, link(tt.dataDir))
			dashboardtest.Page(t, ctx, "money")
			ys := dashboardtest.Eval[[]float64](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('svg[data-chart=money] circle[data-series=%s]')].map(c => +c.dataset.y)`, tt.series))
			if len(ys) != n || ys[len(ys)-1] != float64(total) {
				t.Errorf("%s chart: %v, want %d points ending at the ledger's %d msat", tt.series, ys, n, total)
			}
			cards := dashboardtest.Eval[string](t, ctx, `document.querySelector(".cards").innerText`)
			if want := fmt.Sprintf("%s\n%s msat", tt.card, commas(total)); !strings.Contains(cards, want) {
				t.Errorf("money cards lack %q:\n%s", want, cards)
			}
			// The stakes its providers paid on the client's replicas, all
			// returned, are collateral, apart from prices, as earnings
			// counts them: none earned.
			if tt.name == "client" {
				collateralAsLedger(t, ctx, client.dataDir)
			}
			if dashboardtest.Eval[bool](t, ctx, `!!document.querySelector("[data-free=true]")`) {
				t.Error("a paid node's money page says free mode")
			}
			if near, _ := dashboardtest.Screenshot(t, ctx, "money-"+tt.name, dashboardtest.Accent); near[0] < 200 {
				t.Errorf("money screenshot: %d pixels of the %s line", near[0], tt.series)
			}
		})
	}
	t.Run("provider runs", func(t *testing.T) {
		dashboardtest.Page(t, ctx, "runs")
		paid := dashboardtest.Eval[[]string](t, ctx, `[...document.querySelectorAll("table.runs td:last-child .chip.s-settled")].map(c => c.innerText)`)
		n, _ := settledTotal(p1.dataDir, "earnings")
		if len(paid) != n {
			t.Errorf("runs page shows %d settled payments, the ledger %d", len(paid), n)
		}
		for _, p := range paid {
			if p != fmt.Sprintf("%s msat", commas(price)) {
				t.Errorf("a run was paid %q, want %d msat", p, price)
			}
		}
	})
}

// collateralAsLedger: the client's dashboard earned nothing, and shows
// the stakes it held as `earnings` lists them (collateral returned, none
// taken). A stake's return is recorded after the verdict, so both are read
// again until they agree, or 30 s.
func collateralAsLedger(t *testing.T, ctx context.Context, dataDir string) {
	t.Helper()
	var want, got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var returned, taken, stakes int64
		for _, p := range ledger(t, dataDir, "earnings") {
			switch {
			case p.Bond && p.State == store.PaySettled:
				taken += p.AmountMsat
			case p.Bond && p.State == store.PayCanceled && p.Error == "":
				returned += p.AmountMsat
			}
			if p.Bond {
				stakes++
			}
		}
		if stakes == 0 {
			t.Fatal("earnings lists no collateral: the providers staked nothing")
		}
		want = fmt.Sprintf("Earned\n0 msat|Collateral taken by you\n%s msat|Collateral returned by you\n%s msat", commas(taken), commas(returned))
		got = dashboardtest.Eval[string](t, ctx, `[".cards:not(.collateral) .card", ".cards.collateral[data-direction=incoming] .card"].flatMap(s => [...document.querySelectorAll(s)]).map(c => c.innerText).filter(x => /^(Earned|Collateral (taken|returned))/.test(x)).join("|")`)
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("the client's money cards read %q, its earnings ledger %q", got, want)
	}
}

// commas writes n as the dashboard does (en-US grouping).
func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
