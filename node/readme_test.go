package node

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/infernet/infernet/node/reputation"
)

// TestREADMEConstants: the numbers the README gives for verification and
// reputation are the code's defaults (they once said 10 agreements and 20 %
// where the code had 20 and 15 %).
func TestREADMEConstants(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.setDefaults()
	rep := reputation.Defaults
	days := func(d time.Duration) string { return strconv.Itoa(int(d / (24 * time.Hour))) }
	pct := func(f float64) string { return strconv.Itoa(int(f*100 + 0.5)) }
	for _, c := range []struct{ pattern, want string }{
		{`a provider with (\d+) agreed results in a row`, strconv.Itoa(rep.TrustStreak)},
		{`(\d+) % of such jobs are spot-checked`, pct(cfg.SpotCheck)},
		{`after (\d+) % a canary`, pct(cfg.Canary)},
		{`an outvoted result weighs (\d+) agreements`, fmt.Sprint(rep.LieWeight)},
		{`decaying with a (\d+)-day half-life`, days(rep.HalfLife)},
		{`score under ([0-9.]+) bans the peer`, fmt.Sprint(rep.BanBelow)},
		{`bans the peer for (\d+) days`, days(rep.BanFor)},
	} {
		m := regexp.MustCompile(c.pattern).FindSubmatch(b)
		switch {
		case m == nil:
			t.Errorf("README no longer says %q", c.pattern)
		case string(m[1]) != c.want:
			t.Errorf("README: %q gives %s, the code %s", c.pattern, m[1], c.want)
		}
	}
}
