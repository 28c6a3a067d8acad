package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLoopbackHostForms: loopbackHost lets through a loopback IP
// literal or localhost only; the other spellings of loopback a page's
// name could be, and names that end up there, are refused (held). A
// port that is not a number passes ("127.0.0.1:80@evil"), but no browser
// sends one: a page's Host is its URL's host and port.
func TestLoopbackHostForms(t *testing.T) {
	h := loopbackHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "[::1]:8080": 200, "localhost:8080": 200, "127.9.9.9": 200,
		"127.1": 403, "0x7f.1": 403, "0x7f000001": 403, "2130706433": 403, "localhost.": 403,
		"127.0.0.1.": 403, "LOCALHOST": 403, "a.localhost": 403, "0.0.0.0:8080": 403, "[::]:80": 403,
		"": 403, ":8080": 403, "evil.example:8080": 403, "127.0.0.1.nip.io": 403, "[::1%25lo]:80": 403,
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}
