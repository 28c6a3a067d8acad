package api

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// The dashboard is a web page of the node's state, served under
// /dashboard/ by the API server and updated live by server-sent events.
// A browser gets in with a one-time login link that `infernet dashboard`
// asks for with the API token (POST /v1/dashboard/login); the link sets a
// session cookie and is spent. Everything under /dashboard/ is read-only.
//
//go:embed dashboard
var dashboardFiles embed.FS

const (
	// loginTTL is how long a login link is good for.
	loginTTL = 2 * time.Minute
	// sessionTTL is how long a dashboard session lasts.
	sessionTTL = 12 * time.Hour
	// maxLogins and maxSessions bound the tokens kept (the oldest go).
	maxLogins, maxSessions = 16, 64
	sessionCookie          = "infernet_session"
	// snapshotGap is the least time between two snapshots of an event
	// stream: a busy node's writes are sent together.
	snapshotGap = 250 * time.Millisecond
	// refreshEvery is how often an event stream looks again with no write:
	// reputations decay and peers go quiet without one. A stream that sends
	// nothing then sends a comment, so that proxies keep it open.
	refreshEvery = 15 * time.Second
	// Snapshot caps: the newest of each kind.
	snapshotJobs, snapshotSharded, snapshotRuns, snapshotPayments, snapshotTraining = 50, 20, 100, 1000, 20
)

// DashboardLogin is the answer of POST /v1/dashboard/login: the path of a
// one-time login link (to append to the API's address) and when it expires.
type DashboardLogin struct {
	Path    string    `json:"path"`
	Expires time.Time `json:"expires"`
}

// Snapshot is what the dashboard shows: the node's state at Time.
type Snapshot struct {
	Time time.Time `json:"time"`
	Node NodeInfo  `json:"node"`
	// Advert is what the node offers as a provider (nil: it is not one).
	Advert *wire.CapabilityAdvert `json:"advert"`
	// Paid: the node pays and is paid through lnd (else free mode).
	Paid     bool                   `json:"paid"`
	Peers    []Peer                 `json:"peers"`
	Jobs     []store.Job            `json:"jobs"`
	Sharded  []*store.ShardedStatus `json:"sharded"`
	Runs     []store.Run            `json:"runs"`
	Payments []store.Payment        `json:"payments"`
	Training []store.TrainRun       `json:"training"`
	// PaymentsLimit is how many of the newest payments Payments holds at
	// most: the totals shown are theirs.
	PaymentsLimit int `json:"payments_limit"`
}

// tokens are random secrets with expiry times.
type tokens struct {
	mu  sync.Mutex
	max int
	m   map[string]time.Time // guarded by mu
}

// issue returns a new token good for ttl.
func (t *tokens) issue(ttl time.Duration) (string, time.Time) {
	var raw [32]byte
	rand.Read(raw[:])
	tok, exp := hex.EncodeToString(raw[:]), time.Now().Add(ttl)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]time.Time{}
	}
	now := time.Now()
	for k, e := range t.m {
		if now.After(e) {
			delete(t.m, k)
		}
	}
	for len(t.m) >= t.max { // the one closest to expiry goes
		var oldest string
		for k, e := range t.m {
			if oldest == "" || e.Before(t.m[oldest]) {
				oldest = k
			}
		}
		delete(t.m, oldest)
	}
	t.m[tok] = exp
	return tok, exp
}

// valid reports whether tok is a live token; spend also deletes it.
func (t *tokens) valid(tok string, spend bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m { // constant time in the secret
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			if spend || time.Now().After(e) {
				delete(t.m, k)
			}
			return time.Now().Before(e)
		}
	}
	return false
}

// dashboard serves the dashboard of a Server.
type dashboard struct {
	s        *Server
	logins   tokens
	sessions tokens
}

func newDashboard(s *Server) *dashboard {
	return &dashboard{s: s, logins: tokens{max: maxLogins}, sessions: tokens{max: maxSessions}}
}

func (d *dashboard) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/dashboard/login", d.s.auth(d.newLogin))
	mux.HandleFunc("GET /dashboard/login", d.guard(d.login))
	mux.HandleFunc("GET /dashboard/snapshot", d.guard(d.session(d.snapshotJSON)))
	mux.HandleFunc("GET /dashboard/events", d.guard(d.session(d.events)))
	static, _ := fs.Sub(dashboardFiles, "dashboard")
	mux.Handle("GET /dashboard/", d.guard(d.session(http.StripPrefix("/dashboard/", http.FileServerFS(static)).ServeHTTP)))
}

// newLogin issues a one-time login link.
func (d *dashboard) newLogin(w http.ResponseWriter, _ *http.Request) {
	tok, exp := d.logins.issue(loginTTL)
	writeJSON(w, DashboardLogin{Path: "/dashboard/login?token=" + tok, Expires: exp})
}

// login spends a login link's token for a session cookie.
func (d *dashboard) login(w http.ResponseWriter, r *http.Request) {
	if !d.logins.valid(r.URL.Query().Get("token"), true) {
		dashboardError(w, http.StatusUnauthorized, "This login link is spent or expired. Run `infernet dashboard` for a new one.")
		return
	}
	tok, exp := d.sessions.issue(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: tok, Path: "/dashboard/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
}

// guard sets the dashboard's security headers. (Requests whose Host is not
// a loopback address, a page of another site that rebinds its name to
// 127.0.0.1, are refused before any route: loopbackHost.)
func (d *dashboard) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// session lets through requests with a live session cookie.
func (d *dashboard) session(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err != nil || !d.sessions.valid(c.Value, false) {
			dashboardError(w, http.StatusUnauthorized, "Not logged in. Run `infernet dashboard` and open the link it prints.")
			return
		}
		h(w, r)
	}
}

func dashboardError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

func (d *dashboard) snapshotJSON(w http.ResponseWriter, _ *http.Request) {
	snap, err := d.snapshot()
	answer(w, snap, err)
}

// events streams a snapshot whenever the node's state changes (server-sent
// events, "snapshot"): at each write of its records (Node.Changed), at most
// one every snapshotGap, and every refreshEvery without one.
func (d *dashboard) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	var last []byte
	for {
		changed := d.s.n.Changed() // before the read: a write during it wakes the next wait
		taken := time.Now()
		sent, err := d.sendChanges(w, &last)
		if err != nil {
			return
		}
		if !sent {
			fmt.Fprint(w, ": keep-alive\n\n") // nothing new since the last look
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-changed:
			select { // let a burst of writes end
			case <-ctx.Done():
				return
			case <-time.After(time.Until(taken.Add(snapshotGap))):
			}
		case <-time.After(refreshEvery):
		}
	}
}

// sendChanges writes a snapshot event when the state differs from *last,
// and says whether it did.
func (d *dashboard) sendChanges(w http.ResponseWriter, last *[]byte) (bool, error) {
	snap, err := d.snapshot()
	if err != nil {
		d.s.log.Warn("dashboard snapshot", "err", err)
		return false, nil
	}
	at := snap.Time
	snap.Time = time.Time{} // the state, not when it was read
	state, err := json.Marshal(snap)
	if err != nil || bytes.Equal(state, *last) {
		return false, err
	}
	*last = state
	snap.Time = at
	b, err := json.Marshal(snap)
	if err != nil {
		return false, err
	}
	_, err = fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b)
	return err == nil, err
}

// snapshot reads the node's state, the newest records of each kind.
func (d *dashboard) snapshot() (*Snapshot, error) {
	n := d.s.n
	snap := &Snapshot{Time: time.Now(), Node: d.s.nodeInfo(), Advert: n.Capabilities(), Paid: n.Paid(),
		Peers: mapSlice(n.Peers(), peerOf), PaymentsLimit: snapshotPayments}
	if snap.Advert != nil {
		snap.Advert.Time = 0
	}
	jobs, err := n.Jobs(snapshotJobs)
	if err != nil {
		return nil, err
	}
	sharded, err := n.ShardedJobs(snapshotSharded)
	if err != nil {
		return nil, err
	}
	runs, err := n.Runs(snapshotRuns)
	if err != nil {
		return nil, err
	}
	payments, err := n.Payments(snapshotPayments)
	if err != nil {
		return nil, err
	}
	snap.Jobs, snap.Sharded, snap.Runs, snap.Payments = jobs, sharded, runs, payments
	for i := range snap.Payments { // secrets stay in the node
		p := &snap.Payments[i]
		p.Preimage, p.Offer, p.Invoice = [32]byte{}, nil, ""
	}
	train, err := n.TrainRuns()
	if err != nil {
		return nil, err
	}
	if len(train) > snapshotTraining {
		train = train[len(train)-snapshotTraining:]
	}
	// The page reads lists, not nulls.
	snap.Training, snap.Peers, snap.Jobs = nonNil(train), nonNil(snap.Peers), nonNil(snap.Jobs)
	snap.Sharded, snap.Runs, snap.Payments = nonNil(snap.Sharded), nonNil(snap.Runs), nonNil(snap.Payments)
	return snap, nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
