// Package dashboardtest drives the node dashboard in a real browser for
// tests: headless Chromium (Debian chromium-headless-shell, which
// scripts/deps.sh installs) through chromedp. It is imported by tests
// only, so the infernet binary does not link chromedp.
package dashboardtest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is the headless browser the tests drive.
const Chromium = "/usr/bin/chromium-headless-shell"

// Width is the browser window's width in pixels.
const Width = 1280

// The dashboard's colors (style.css, app.js), for screenshot checks.
var (
	Green  = RGB{0x2e, 0x7d, 0x32} // verified, done, settled
	Accent = RGB{0x34, 0x51, 0xb2} // reputation bars, a chart's first series
	Orange = RGB{0xe8, 0x59, 0x0c} // a chart's second series
)

// RGB is a pixel's color.
type RGB [3]uint8

// Browser starts a headless Chromium tab, closed when the test ends.
func Browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("%s: %v (scripts/deps.sh installs chromium-headless-shell)", Chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(Chromium), chromedp.NoSandbox,
		chromedp.WindowSize(Width, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Login opens a dashboard login link in ctx's tab and waits for the first
// page drawn from a snapshot.
func Login(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="true"]`))); err != nil {
		t.Fatalf("dashboard login: %v", err)
	}
	if got := Eval[string](t, ctx, "location.pathname"); got != "/dashboard/" {
		t.Fatalf("after login the browser is at %s, want /dashboard/", got)
	}
}

// Page shows a page of the dashboard open in ctx and waits until it is
// drawn from a snapshot.
func Page(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = '#/%s'", name)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`main[data-page=%q][data-ready="true"]`, name))),
	); err != nil {
		t.Fatalf("page %s: %v", name, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// WaitTrue polls a JavaScript condition until it holds, or 30 s.
func WaitTrue(t *testing.T, ctx context.Context, cond, what string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Screenshot captures the viewport, saves it as dashboard-NAME.png (in
// $INFERNET_SCREENSHOTS when set, else the test's temporary directory)
// and returns how many of its pixels are near each color given, and how
// many distinct colors it has.
func Screenshot(t *testing.T, ctx context.Context, name string, colors ...RGB) (near []int, distinct int) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("INFERNET_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", name, err)
	}
	if r := img.Bounds(); r.Dx() != Width || r.Dy() < 600 {
		t.Errorf("screenshot of %s is %v, want %d wide", name, r, Width)
	}
	near = make([]int, len(colors))
	seen := map[RGB]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			px := pixel(img, x, y)
			seen[px] = true
			for i, c := range colors {
				if px.near(c) {
					near[i]++
				}
			}
		}
	}
	return near, len(seen)
}

func pixel(img image.Image, x, y int) RGB {
	r, g, b, _ := img.At(x, y).RGBA()
	return RGB{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

// near reports whether every channel is within 8 of c's (anti-aliasing).
func (a RGB) near(c RGB) bool {
	d := 0
	for i := range a {
		d = max(d, int(a[i])-int(c[i]), int(c[i])-int(a[i]))
	}
	return d <= 8
}
