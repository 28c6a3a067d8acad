package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
)

// FuzzAPI feeds the API's handler arbitrary methods, paths and bodies,
// with and without the token, on one real node. Every answer must be a
// known status; API errors must be JSON with a message, submit lines
// JSON Lines; and a request without the token never reaches a handler.
func FuzzAPI(f *testing.F) {
	d := blob.Sum([]byte("x")).String()
	for _, s := range []struct {
		method, path, body string
	}{
		{"GET", "/v1/node", ""},
		{"POST", "/v1/blobs", "a module"},
		{"GET", "/v1/blobs/" + d, ""},
		{"GET", "/v1/blobs/zz", ""},
		{"POST", "/v1/blobs/" + d + "/fetch", `{"size":1,"from":["12D3KooWnotapeer"]}`},
		{"POST", "/v1/blobs/" + d + "/fetch", `{"size":-1}`},
		{"POST", "/v1/jobs", `{"module":"` + d + `","module_size":1,"timeout_ms":1}`},
		{"POST", "/v1/jobs", `{"require":"cores >"}`},
		{"POST", "/v1/jobs", `[1,2`},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/00112233445566778899aabbccddeeff", ""},
		{"GET", "/v1/jobs/nope", ""},
		{"GET", "/v1/peers", ""},
		{"GET", "/v1/runs", ""},
		{"GET", "/v1/payments", ""},
		{"GET", "/metrics", ""},
		{"DELETE", "/v1/node", ""},
		{"GET", "/v1/../v1/node", ""},
		{"GET", "/%2e%2e/x", ""},
		{"POST", "/v1/completions", `{"model": "stories", "prompt": "Once", "max_tokens": 4, "stream": true}`},
		{"POST", "/v1/completions", `{"model": "stories", "prompt": ["a", "b"], "n": 2, "stop": "\n"}`},
		{"POST", "/v1/chat/completions", `{"model": "stories", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`},
		{"POST", "/v1/chat/completions", `{"model": "stories", "messages": [{"role": "tool", "content": 3}], "max_completion_tokens": -1}`},
	} {
		f.Add(s.method, s.path, []byte(s.body), true)
		f.Add(s.method, s.path, []byte(s.body), false)
	}
	_, srv, dir := startNode(f)
	tok, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		f.Fatal(err)
	}
	h := srv.srv.Handler
	f.Fuzz(func(t *testing.T, method, path string, body []byte, auth bool) {
		// Submits and fetches would wait on a network that is not there.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1"+path, bytes.NewReader(body))
		if err != nil || req.URL.Host != "127.0.0.1" {
			return // not a request a client could send
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		switch code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound,
			http.StatusMethodNotAllowed, http.StatusMovedPermanently, http.StatusTemporaryRedirect,
			http.StatusRequestEntityTooLarge, http.StatusBadGateway, http.StatusInsufficientStorage:
		default:
			t.Fatalf("%s %q: status %d: %s", method, path, code, rec.Body)
		}
		isAPI := rec.Header().Get("Content-Type") == "application/json"
		if code >= 400 && isAPI {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("%s %q: status %d, error body %q: %v", method, path, code, rec.Body, err)
			}
		}
		if code == http.StatusOK && isAPI && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: invalid JSON %q", method, path, rec.Body)
		}
		if rec.Header().Get("Content-Type") == "application/x-ndjson" {
			for _, l := range bytes.Split(bytes.TrimSpace(rec.Body.Bytes()), []byte("\n")) {
				var line Line
				if err := json.Unmarshal(l, &line); err != nil || (line.Event == nil && line.Job == nil && line.Error == "") {
					t.Fatalf("%s %q: submit line %q: %v", method, path, l, err)
				}
			}
		}
		if !auth && code == http.StatusOK && req.URL.Path != "/metrics" {
			t.Fatalf("%s %q served without the token", method, path)
		}
	})
}
