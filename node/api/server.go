// Package api is a node's local HTTP API, used by the infernet CLI: it
// listens on loopback only and requires the bearer token kept in the node's
// data directory. Job progress is pushed as newline-delimited JSON on the
// submit response, never polled.
//
//	GET  /v1/node              the node: id, addresses, role, counters
//	POST /v1/blobs             store the body as a blob → {"digest","size"}; ?public=1 announces it in the DHT
//	GET  /v1/blobs/{digest}    a blob's bytes
//	POST /v1/blobs/{digest}/fetch  fetch a blob from the network (FetchRequest)
//	POST /v1/jobs              submit (SubmitRequest) → NDJSON of Line
//	GET  /v1/jobs              jobs this node submitted
//	GET  /v1/jobs/{id}         one job
//	GET  /v1/sharded           sharded jobs this node submitted or resumed
//	GET  /v1/sharded/{id}      one sharded job (?wait: once it has ended)
//	DELETE /v1/sharded/{id}    cancel a sharded job
//	GET  /v1/peers             peers this node knows
//	DELETE /v1/peers/{id}/ban  lift a peer's ban, forgiving what it was blamed for → its Peer
//	GET  /v1/runs              replicas this node ran or runs for others
//	GET  /v1/payments          escrowed payments, in and out
//	GET  /v1/models            named models (infernet models), as OpenAI's model list
//	POST /v1/completions       OpenAI's completions, verified by the network (package openai)
//	POST /v1/chat/completions  OpenAI's chat completions, likewise
//	POST /v1/models            name a model whose blobs are stored (AddModelRequest)
//	GET  /v1/models/{name}     one named model
//	DELETE /v1/models/{name}   forget a named model (its blobs age out like others)
//	POST /v1/runner            store the llama runner guest as a blob (once) → {"digest","size"}
//	GET  /metrics              Prometheus metrics (no token needed)
package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/openai"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// Files in the data directory.
const (
	// TokenFile holds the API's bearer token (hex, private to the user).
	TokenFile = "api.token"
	// AddrFile holds the address a running node's API listens on.
	AddrFile = "api.addr"
)

// ErrNotLoopback is returned by Serve for an address outside 127.0.0.0/8 or ::1.
var ErrNotLoopback = errors.New("api: listen address must be loopback")

// NodeInfo is the answer of GET /v1/node.
type NodeInfo struct {
	ID       string     `json:"id"`
	Addrs    []string   `json:"addrs"`
	Provider bool       `json:"provider"`
	Software string     `json:"software"`
	Stats    node.Stats `json:"stats"`
	// Eclipsed says why replica votes verify nothing on this node (all its
	// peers came through one bootstrap network), or is empty; Sources
	// count the peers learned of through each source.
	Eclipsed string   `json:"eclipsed,omitempty"`
	Sources  []string `json:"sources,omitempty"`
	// Reachability is AutoNAT's latest verdict: "unknown", "public" or
	// "private" (behind NAT: Addrs then has the relayed addresses others
	// dial, /p2p-circuit, once a relay holds a slot).
	Reachability string `json:"reachability"`
	// PortMapping is whether the node asks its router for a port (--nat),
	// PublicAddrs its addresses others on the internet could dial, a
	// mapped port's among them once the router gave one.
	PortMapping bool     `json:"nat_port_mapping"`
	PublicAddrs []string `json:"public_addrs,omitempty"`
	// Paid is whether the node pays and is paid over Lightning (lnd); a
	// provider's Price is what a replica costs here and MaxCollateral the
	// most it stakes on one, msat (an operator's walk found none of its
	// terms here).
	Paid          bool   `json:"paid"`
	Price         uint64 `json:"price_msat,omitempty"`
	MaxCollateral uint64 `json:"max_collateral_msat,omitempty"`
}

// SubmitRequest is the body of POST /v1/jobs: the job's terms and how to
// run it. Durations are in milliseconds; zero fields take jobs.Spec's
// defaults. Its JSON names are its tags' and, for the terms, submitTerms's.
type SubmitRequest struct {
	// Terms are the job's terms (jobs.Spec's). Their Shard and Shards are
	// not in its JSON: the shards of a sharded job are Shards below, and
	// each part's place is SubmitSharded's to set.
	wire.Terms `json:"-"`
	Replicas   int    `json:"replicas,omitempty"`
	DeadlineMS int64  `json:"deadline_ms,omitempty"`
	Require    string `json:"require,omitempty"`
	Price      uint64 `json:"price,omitempty"`
	// Collateral is jobs.Spec's: each provider's stake per replica, msat
	// (0: the default in a paid job, negative: none).
	Collateral int64 `json:"collateral,omitempty"`
	// Adaptive, Audit, SameBackend, MixedBackends and Settle are
	// jobs.Spec's.
	Adaptive      bool    `json:"adaptive,omitempty"`
	Audit         float64 `json:"audit,omitempty"`
	SameBackend   bool    `json:"same_backend,omitempty"`
	MixedBackends bool    `json:"mixed_backends,omitempty"`
	Settle        uint8   `json:"settle,omitempty"`
	// Stream, for a job that is not sharded, streams its output: Output
	// lines carry the bytes the replicas agree on as they agree
	// (jobs.Spec.Output).
	Stream bool `json:"stream,omitempty"`
	// Shards, when set, make a sharded job (node.SubmitShards) of one job
	// per shard input (Input is then unused), Parallel of them at once (0:
	// all); the answer's last line is Sharded.
	Shards   []jobs.ShardInput `json:"shards,omitempty"`
	Parallel int               `json:"parallel,omitempty"`
	// Reduce, with Shards, runs a module on the shards' outputs
	// concatenated in order, as one more job (jobs.ReduceSpec).
	Reduce *jobs.ReduceSpec `json:"reduce,omitempty"`
	// Via, with Shards, hands the job to this aggregator (a peer ID):
	// node.SubmitVia, with SpotChecks shards run again here and at most
	// MaxFeePercent of fee.
	Via           string  `json:"via,omitempty"`
	SpotChecks    int     `json:"spot_checks,omitempty"`
	MaxFeePercent float64 `json:"max_fee_percent,omitempty"`
}

// Line is one line of the submit response: progress events, then the final
// job record, or an error that kept the job from being recorded.
type Line struct {
	Event *jobs.Event `json:"event,omitempty"`
	// Output is a streamed job's next verified bytes of stdout.
	Output  []byte               `json:"output,omitempty"`
	Job     *store.Job           `json:"job,omitempty"`
	Sharded *store.ShardedStatus `json:"sharded,omitempty"`
	Train   *store.TrainRun      `json:"train,omitempty"`
	Error   string               `json:"error,omitempty"`
}

// TrainRequest is the body of POST /v1/train: a training run
// (jobs.TrainSpec). Job is the shards' module and terms, with its Reduce
// (required) and Parallel; its Input and Shards are unused.
type TrainRequest struct {
	Job    SubmitRequest `json:"job"`
	Shards int           `json:"shards"`
	Rounds int           `json:"rounds"`
	// State is the first state, a blob already put (none: the module's
	// own); StateData hands it to the shards as that data blob.
	State     blob.Digest `json:"state,omitzero"`
	StateSize int64       `json:"state_size"`
	StateData string      `json:"state_data,omitempty"`
	// Eval is the evaluation job run on each round's state (its input).
	Eval *SubmitRequest `json:"eval,omitempty"`
}

// Server serves a node's API.
type Server struct {
	n     *node.Node
	token []byte
	log   *slog.Logger
	srv   *http.Server
	ln    net.Listener
	dir   string
	wg    sync.WaitGroup
	// openai serves the OpenAI endpoints.
	openai *openai.Service
}

// Options are where and how the API serves.
type Options struct {
	// DataDir holds the token file (created if missing) and the address
	// file.
	DataDir string
	// Addr is a loopback host:port; port 0 picks one.
	Addr string
	Log  *slog.Logger
	// OpenAI are the terms of the OpenAI API's jobs (zero fields: defaults).
	OpenAI openai.Config
	// Listener, where not nil, is where the API serves (Listen's, bound
	// before the node started so that a taken port fails at once); Addr is
	// then unused.
	Listener net.Listener
}

// Listen binds addr, a loopback host:port (port 0 picks one), for the API:
// the error of a taken port says what to do.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: %s", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("api: %w (is another infernet node's API there? give this one --api 127.0.0.1:0, or another port)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return ln, nil
}

// Serve starts the API of n as o says. Close stops it.
func Serve(n *node.Node, o Options) (*Server, error) {
	dataDir, log, ln := o.DataDir, o.Log, o.Listener
	token, err := LoadToken(dataDir)
	if err == nil && ln == nil {
		ln, err = Listen(o.Addr)
	}
	if err != nil {
		return nil, err
	}
	oa, err := openai.New(o.OpenAI, openai.Node{Models: n.Models(), PutBlob: n.PutBlob, Blob: n.Blob, Submit: n.Submit}, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{n: n, token: token, log: log, ln: ln, dir: dataDir, openai: oa}
	s.srv = &http.Server{Handler: loopbackHost(s.routes()), ReadHeaderTimeout: 10 * time.Second}
	if err := os.WriteFile(filepath.Join(dataDir, AddrFile), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr returns the address the API listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the API, ending open submit streams, and removes the address file.
func (s *Server) Close() error {
	os.Remove(filepath.Join(s.dir, AddrFile))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	s.wg.Wait()
	return err
}

// LoadToken reads the API token of a data directory, creating it the first time.
func LoadToken(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, TokenFile)
	b, err := os.ReadFile(path)
	if tok := strings.TrimSpace(string(b)); err == nil && tok != "" {
		return []byte(tok), nil
	}
	if err == nil {
		// Empty: a first write failed (a full disk). Every client was
		// refused until the file was removed by hand; a new token now.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("api token: %w", err)
		}
		return LoadToken(dataDir)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("api token: %w", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	// Written whole, then linked into place: a file created empty and
	// written after was, in between, an empty token to another LoadToken,
	// which removed it and made its own, while this one's was unlinked
	// (TestLoadTokenConcurrent: a node's token not the file's).
	f, err := os.CreateTemp(dataDir, TokenFile+".*")
	if err != nil {
		return nil, fmt.Errorf("api token: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("api token: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("api token: %w", err)
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return LoadToken(dataDir)
	} else if err != nil {
		return nil, fmt.Errorf("api token: %w", err)
	}
	return []byte(tok), nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node", s.auth(s.getNode))
	mux.HandleFunc("POST /v1/blobs", s.auth(s.postBlob))
	mux.HandleFunc("GET /v1/blobs/{digest}", s.auth(s.getBlob))
	mux.HandleFunc("POST /v1/blobs/{digest}/fetch", s.auth(s.fetchBlob))
	mux.HandleFunc("POST /v1/jobs", s.auth(s.postJob))
	mux.HandleFunc("GET /v1/jobs", s.auth(s.getJobs))
	mux.HandleFunc("GET /v1/jobs/{id}", s.auth(s.getJob))
	mux.HandleFunc("GET /v1/sharded", s.auth(s.getShardedJobs))
	mux.HandleFunc("GET /v1/sharded/{id}", s.auth(s.getShardedJob))
	mux.HandleFunc("DELETE /v1/sharded/{id}", s.auth(s.cancelShardedJob))
	mux.HandleFunc("POST /v1/train", s.auth(s.postTrain))
	mux.HandleFunc("GET /v1/train", s.auth(s.getTrainRuns))
	mux.HandleFunc("GET /v1/train/{id}", s.auth(s.getTrainRun))
	mux.HandleFunc("DELETE /v1/train/{id}", s.auth(s.cancelTrainRun))
	mux.HandleFunc("GET /v1/peers", s.auth(s.getPeers))
	mux.HandleFunc("DELETE /v1/peers/{id}/ban", s.auth(s.forgivePeer))
	mux.HandleFunc("GET /v1/runs", s.auth(s.getRuns))
	mux.HandleFunc("GET /v1/payments", s.auth(s.getPayments))
	mux.HandleFunc("POST /v1/completions", s.auth(s.openai.Completions))
	mux.HandleFunc("POST /v1/chat/completions", s.auth(s.openai.Chat))
	mux.HandleFunc("GET /v1/models", s.auth(s.getModels))
	mux.HandleFunc("POST /v1/models", s.auth(s.postModel))
	mux.HandleFunc("GET /v1/models/{name}", s.auth(s.getModel))
	mux.HandleFunc("DELETE /v1/models/{name}", s.auth(s.deleteModel))
	mux.HandleFunc("POST /v1/runner", s.auth(s.postRunner))
	// Anything else under /v1 (a route of OpenAI's this node lacks, or a
	// method a route does not take) answers OpenAI's error object too.
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		openai.WriteError(w, http.StatusNotFound, "", "unknown_url", fmt.Sprintf("unknown request URL: %s %s", r.Method, r.URL.Path))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry(), promhttp.HandlerOpts{}))
	newDashboard(s).routes(mux)
	return mux
}

// Revision is the revision of the local API's records: it goes up when a
// record's JSON names or meaning change, so that a client older than its
// node can say so rather than read the new names as zeros. 2: the wire
// types' names are snake_case (1: they were Go's; 0: a node too old to
// say).
const Revision = 2

// RevisionHeader carries Revision on every answer.
const RevisionHeader = "Infernet-Api-Revision"

var revision = strconv.Itoa(Revision)

// loopbackHost refuses every request whose Host is not a loopback address
// (DNS rebinding): a page of another site that rebinds its name to
// 127.0.0.1 is same-origin with the API and reads its answers. The token
// keeps it out of /v1, the session cookie (another host's) out of the
// dashboard, but not out of a tokenless route (/metrics).
//
// Every answer is also nosniff: no browser reads a blob or a job's output
// (peer-chosen bytes) as a page or a script of the API's origin; and it
// says the API's Revision (RevisionHeader).
func loopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set(RevisionHeader, revision)
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			w.Header().Set("Cache-Control", "no-store")
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				httpError(w, http.StatusForbidden, errors.New("the API answers on a loopback address only"))
			} else {
				dashboardError(w, http.StatusForbidden, "The node's API and dashboard answer on a loopback address only.")
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), s.token) != 1 {
			httpError(w, http.StatusUnauthorized, errors.New("missing or wrong API token"))
			return
		}
		h(w, r)
	}
}

// errorBody is every error response.
// errorBody is an error answer of the API: OpenAI's error object, so that
// OpenAI's client libraries read the answers of its endpoints.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

func httpError(w http.ResponseWriter, code int, err error) {
	openai.WriteError(w, code, "", "", err.Error())
}

// storeStatus is 507 for a blob the node's disk quota, or its disk, has
// no room for, otherwise code.
func storeStatus(err error, code int) int {
	switch {
	case errors.Is(err, blob.ErrQuota), errors.Is(err, blob.ErrWrite):
		return http.StatusInsufficientStorage
	case errors.Is(err, blob.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return code
}

// answer writes a lookup's result: v as JSON, or its error as a 500.
func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) getNode(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.nodeInfo())
}

func (s *Server) nodeInfo() NodeInfo {
	info := NodeInfo{ID: s.n.ID().String(), Provider: s.n.Provider(), Software: node.Software(), Stats: s.n.Stats(),
		Eclipsed: s.n.Eclipsed(), Sources: s.n.Sources(), Reachability: s.n.Reachability(),
		PortMapping: s.n.PortMapping(), Paid: s.n.Paid(), MaxCollateral: s.n.MaxCollateral()}
	for _, a := range s.n.PublicAddrs() {
		info.PublicAddrs = append(info.PublicAddrs, a.String())
	}
	if a := s.n.Capabilities(); a != nil {
		info.Price = a.Price
	}
	for _, a := range s.n.Addrs() {
		info.Addrs = append(info.Addrs, a.String())
	}
	return info
}

// maxBlob is the largest blob a job may name: a module, an input, or a
// data blob (the largest).
const maxBlob = max(wire.MaxModuleBytes, wire.MaxInputBytes, wire.MaxDataBytes)

// postBlob streams the body to the blob store: uploads of data blobs
// (model weights) may be larger than memory.
func (s *Server) postBlob(w http.ResponseWriter, r *http.Request) {
	d, size, err := s.n.PutBlobFrom(r.Context(), r.Body, maxBlob)
	if err != nil {
		httpError(w, storeStatus(err, http.StatusInternalServerError), err)
		return
	}
	if r.URL.Query().Get("public") == "1" {
		// Stored blobs are otherwise announced only as a job's module or
		// data: one may be an input, which stays private.
		s.n.Publish(d)
	}
	writeJSON(w, store.BlobRef{Digest: d, Size: size})
}

// FetchRequest is the body of POST /v1/blobs/{digest}/fetch: the blob's
// size, and peers (IDs) known to hold it besides those in the DHT.
type FetchRequest struct {
	Size int64    `json:"size"`
	From []string `json:"from,omitempty"`
}

// fetchBlob makes a blob of the network local (GET /v1/blobs/{digest}
// then reads it).
func (s *Server) fetchBlob(w http.ResponseWriter, r *http.Request) {
	d, err := blob.ParseDigest(r.PathValue("digest"))
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	var req FetchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.Size < 0 || req.Size > maxBlob {
		httpError(w, http.StatusBadRequest, fmt.Errorf("fetch request: size %d, %v", req.Size, err))
		return
	}
	var hints []peer.ID
	for _, f := range req.From {
		id, err := peer.Decode(f)
		if err != nil {
			httpError(w, http.StatusBadRequest, fmt.Errorf("from: %w", err))
			return
		}
		hints = append(hints, id)
	}
	if err := s.n.FetchBlob(r.Context(), d, req.Size, hints); err != nil {
		httpError(w, storeStatus(err, http.StatusBadGateway), err)
		return
	}
	writeJSON(w, store.BlobRef{Digest: d, Size: req.Size})
}

func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) {
	d, err := blob.ParseDigest(r.PathValue("digest"))
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	b, err := s.n.Blob(d, maxBlob)
	if errors.Is(err, blob.ErrNotFound) {
		httpError(w, http.StatusNotFound, err)
		return
	} else if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

func (s *Server) postJob(w http.ResponseWriter, r *http.Request) {
	var req SubmitRequest
	// Room for the digests of wire.MaxShards shards.
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	spec := req.spec()
	send := progressStream(w)
	events := eventSender(send)
	if req.Via != "" {
		agg, err := peer.Decode(req.Via)
		if err != nil {
			send(Line{Error: fmt.Sprintf("via: %q is no peer ID (an aggregator's, as `infernet id` prints it on that node)", req.Via)})
			return
		}
		ss := jobs.ShardedSpec{Spec: spec, Inputs: req.Shards, Parallel: req.Parallel, Reduce: req.Reduce}
		sj, err := s.n.SubmitVia(r.Context(), agg, ss, req.SpotChecks, req.MaxFeePercent, events)
		switch {
		case err != nil:
			send(Line{Error: err.Error()})
		default:
			send(Line{Sharded: sj})
		}
		return
	}
	if len(req.Shards) > 0 {
		sj, err := s.n.SubmitSharded(r.Context(), jobs.ShardedSpec{Spec: spec, Inputs: req.Shards, Parallel: req.Parallel, Reduce: req.Reduce}, events)
		switch {
		case sj != nil:
			send(Line{Sharded: sj})
		case err != nil:
			send(Line{Error: err.Error()})
		}
		return
	}
	if req.Stream {
		spec.Output = func(b []byte) { send(Line{Output: b}) }
	}
	job, err := s.n.Submit(r.Context(), spec, events)
	switch {
	case job != nil:
		send(Line{Job: job})
	case err != nil:
		send(Line{Error: err.Error()})
	}
}

// spec is the jobs.Spec of req: its terms, and how to run them.
func (req *SubmitRequest) spec() jobs.Spec {
	return jobs.Spec{
		Terms: req.Terms, Replicas: req.Replicas, Deadline: time.Duration(req.DeadlineMS) * time.Millisecond,
		Require: req.Require, Price: req.Price, Collateral: req.Collateral, Adaptive: req.Adaptive, Audit: req.Audit,
		SameBackend: req.SameBackend, MixedBackends: req.MixedBackends, Settle: req.Settle,
	}
}

// progressStream starts an answer of progress lines (NDJSON) and returns
// the function that sends one, safe for concurrent use.
func progressStream(w http.ResponseWriter) func(Line) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(l Line) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// eventSender is the node's event callback that sends each event as a
// progress line.
func eventSender(send func(Line)) func(jobs.Event) {
	return func(e jobs.Event) { send(Line{Event: &e}) }
}

// postTrain runs a training run (node.Train) and streams its progress;
// the last line is the run's record, or an error.
func (s *Server) postTrain(w http.ResponseWriter, r *http.Request) {
	var req TrainRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	ts := jobs.TrainSpec{Spec: req.Job.spec(), Shards: req.Shards, Parallel: req.Job.Parallel, Rounds: req.Rounds,
		State: req.State, StateSize: req.StateSize, StateData: req.StateData}
	if req.Job.Reduce != nil {
		ts.Reduce = *req.Job.Reduce
	}
	if req.Eval != nil {
		e := req.Eval.spec()
		ts.Eval = &e
	}
	send := progressStream(w)
	rec, err := s.n.Train(r.Context(), ts, eventSender(send))
	if err != nil {
		send(Line{Error: err.Error()})
		return
	}
	send(Line{Train: rec})
}

func (s *Server) getTrainRuns(w http.ResponseWriter, _ *http.Request) {
	v, err := s.n.TrainRuns()
	answer(w, v, err)
}

// getTrainRun answers one training run; with ?wait, once it has ended (or
// the request is cancelled).
func (s *Server) getTrainRun(w http.ResponseWriter, r *http.Request) {
	byIDWait(w, r, s.n.TrainRun, s.n.WaitTrainRun)
}

func (s *Server) cancelTrainRun(w http.ResponseWriter, r *http.Request) {
	byID(w, r, s.n.CancelTrainRun)
}

func (s *Server) getShardedJobs(w http.ResponseWriter, _ *http.Request) {
	v, err := s.n.ShardedJobs(0)
	answer(w, v, err)
}

// getShardedJob answers one sharded job; with ?wait, once it has ended (or
// the request is cancelled).
func (s *Server) getShardedJob(w http.ResponseWriter, r *http.Request) {
	byIDWait(w, r, s.n.ShardedJob, s.n.WaitShardedJob)
}

func (s *Server) cancelShardedJob(w http.ResponseWriter, r *http.Request) {
	byID(w, r, s.n.CancelShardedJob)
}

// byIDWait answers what get returns for the id in the path, or with
// ?wait what wait returns once the run has ended.
func byIDWait[T any](w http.ResponseWriter, r *http.Request, get func(wire.JobID) (T, error), wait func(context.Context, wire.JobID) (T, error)) {
	byID(w, r, func(id wire.JobID) (T, error) {
		if r.URL.Query().Has("wait") {
			return wait(r.Context(), id)
		}
		return get(id)
	})
}

// byID answers what get returns for the id in the path.
func byID[T any](w http.ResponseWriter, r *http.Request, get func(wire.JobID) (T, error)) {
	id, err := wire.ParseJobID(r.PathValue("id"))
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	v, err := get(id)
	if errors.Is(err, store.ErrNotFound) {
		httpError(w, http.StatusNotFound, err)
		return
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, v)
}

func (s *Server) getJobs(w http.ResponseWriter, _ *http.Request) {
	v, err := s.n.Jobs(0)
	answer(w, v, err)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	byID(w, r, s.n.Job)
}

func (s *Server) getPeers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, mapSlice(s.n.Peers(), peerOf))
}

// forgivePeer lifts a peer's ban at the operator's word (node.Forgive).
func (s *Server) forgivePeer(w http.ResponseWriter, r *http.Request) {
	id, err := peer.Decode(r.PathValue("id"))
	if err != nil {
		httpError(w, http.StatusBadRequest, fmt.Errorf("peer ID %q: %w", r.PathValue("id"), err))
		return
	}
	p, err := s.n.Forgive(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		httpError(w, http.StatusNotFound, err)
	case err != nil:
		httpError(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, peerOf(p))
	}
}

func (s *Server) getRuns(w http.ResponseWriter, _ *http.Request) {
	v, err := s.n.Runs(0)
	answer(w, v, err)
}

func (s *Server) getPayments(w http.ResponseWriter, _ *http.Request) {
	v, err := s.n.Payments(0)
	answer(w, v, err)
}

// registry exposes the node's counters to Prometheus.
func (s *Server) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	counter := func(name, help string, f func(node.Stats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "infernet", Name: name, Help: help},
			func() float64 { return float64(f(s.n.Stats())) }))
	}
	counter("stream_frames_sent_total", "Stream frames written (bids, assigns, updates, results, blob requests).", func(st node.Stats) uint64 { return st.Frames })
	counter("bids_refused_total", "Bids this provider refused for its terms (price, limits, collateral; busy aside): each kind is logged.", func(st node.Stats) uint64 { return st.BidsRefused })
	counter("gossip_published_total", "Gossip messages this node originated.", func(st node.Stats) uint64 { return st.Gossip.Published })
	counter("gossip_delivered_total", "Valid gossip messages received from others.", func(st node.Stats) uint64 { return st.Gossip.Delivered })
	counter("gossip_rejected_total", "Malformed gossip messages rejected.", func(st node.Stats) uint64 { return st.Gossip.Rejected })
	counter("gossip_ignored_total", "Gossip messages ignored (rate limit, skew, stale).", func(st node.Stats) uint64 { return st.Gossip.Ignored })
	counter("gossip_dropped_rpcs_total", "Outbound gossip RPCs dropped on full queues.", func(st node.Stats) uint64 { return st.Gossip.Dropped })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "infernet", Name: "peers_connected", Help: "Connected peers."},
		func() float64 { return float64(len(s.n.Host().Network().Peers())) }))
	gauge := func(name, help string, f func(blob.Space) int64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "infernet", Name: name, Help: help},
			func() float64 { return float64(f(s.n.BlobSpace())) }))
	}
	gauge("blob_bytes", "Bytes of blobs held on disk (modules, inputs, outputs, model weights).", func(sp blob.Space) int64 { return sp.Used })
	gauge("blob_quota_bytes", "The blob store's cap, --blob-quota (0: none); the least recently used blobs go past it.", func(sp blob.Space) int64 { return sp.Quota })
	gauge("blobs", "Blobs held on disk.", func(sp blob.Space) int64 { return int64(sp.Blobs) })
	return reg
}
