package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// ErrNoNode is returned by Dial when no node's API can be found.
var ErrNoNode = errors.New("no running node (start one with `infernet node`, or pass --api)")

// Client talks to a node's API. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
	// newer, if set, is told once that the node's API is of a later
	// Revision than this package's (OnNewer).
	newer     func(node int)
	newerOnce sync.Once
}

// OnNewer has f called, once, with the node's API revision when an answer
// says it is later than this package's Revision: this client may then
// read some of its records' fields as zeros (an older CLI against an
// upgraded node).
func (c *Client) OnNewer(f func(node int)) { c.newer = f }

// Dial returns a client for the node whose data directory is dataDir; addr,
// if not empty, overrides the address the node wrote there.
func Dial(dataDir, addr string) (*Client, error) {
	tok, err := os.ReadFile(filepath.Join(dataDir, TokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no API token in %s", ErrNoNode, dataDir)
	}
	if err != nil {
		return nil, err
	}
	if addr == "" {
		b, err := os.ReadFile(filepath.Join(dataDir, AddrFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s in %s", ErrNoNode, AddrFile, dataDir)
		}
		if err != nil {
			return nil, err
		}
		addr = strings.TrimSpace(string(b))
	}
	return &Client{base: "http://" + addr, token: strings.TrimSpace(string(tok)), http: &http.Client{}}, nil
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	if c.newer != nil {
		if v, _ := strconv.Atoi(resp.Header.Get(RevisionHeader)); v > Revision {
			c.newerOnce.Do(func() { c.newer(v) })
		}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e errorBody
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return nil, &statusError{op: method + " " + path, code: resp.StatusCode, status: resp.Status, msg: e.Error.Message}
	}
	return resp, nil
}

// statusError is an answer of the API other than 200 OK.
type statusError struct {
	op     string
	code   int
	status string
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("api %s: %s: %s", e.op, e.status, e.msg) }

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Node returns the node's identity and counters.
func (c *Client) Node(ctx context.Context) (*NodeInfo, error) {
	var v NodeInfo
	return &v, c.getJSON(ctx, "/v1/node", &v)
}

// PutBlob uploads b and returns its digest.
func (c *Client) PutBlob(ctx context.Context, b []byte) (store.BlobRef, error) {
	return c.PutBlobFrom(ctx, bytes.NewReader(b))
}

// PutPublicBlob uploads b and has the node announce it in the DHT, for
// anyone to fetch (PutBlob's blobs are announced only when a job names
// them as its module or data).
func (c *Client) PutPublicBlob(ctx context.Context, b []byte) (store.BlobRef, error) {
	return c.putBlob(ctx, "/v1/blobs?public=1", bytes.NewReader(b))
}

// PutBlobFrom streams the bytes of r to the node as a blob (memory stays
// flat however large it is) and checks the node stored them under their
// digest.
func (c *Client) PutBlobFrom(ctx context.Context, r io.Reader) (store.BlobRef, error) {
	return c.putBlob(ctx, "/v1/blobs", r)
}

func (c *Client) putBlob(ctx context.Context, path string, r io.Reader) (store.BlobRef, error) {
	var v store.BlobRef
	h := sha256.New()
	resp, err := c.do(ctx, http.MethodPost, path, io.TeeReader(r, h))
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&v)
	if err == nil && v.Digest != blob.Digest(h.Sum(nil)) {
		err = errors.New("api: node stored the blob under another digest")
	}
	return v, err
}

// FetchBlob has the node fetch blob d of size bytes from the network (from
// the peers named in from, or those announcing it in the DHT).
func (c *Client) FetchBlob(ctx context.Context, d digest.Digest, size int64, from []string) error {
	body, err := json.Marshal(FetchRequest{Size: size, From: from})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/blobs/"+d.String()+"/fetch", bytes.NewReader(body))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Blob downloads a blob (at most max bytes) and checks its digest.
func (c *Client) Blob(ctx context.Context, d digest.Digest, max int64) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/blobs/"+d.String(), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max || blob.Sum(b) != d {
		return nil, fmt.Errorf("api: blob %s: wrong bytes or over %d bytes", d.Short(), max)
	}
	return b, nil
}

// Submit submits a job and calls onEvent for each progress event as it
// arrives; it returns the final job record.
func (c *Client) Submit(ctx context.Context, req SubmitRequest, onEvent func(jobs.Event)) (*store.Job, error) {
	return c.SubmitStreaming(ctx, req, onEvent, nil)
}

// SubmitStreaming is Submit; with onOutput it streams the job
// (SubmitRequest.Stream) and calls onOutput with each stretch of its output
// as the replicas agree on it, in order.
func (c *Client) SubmitStreaming(ctx context.Context, req SubmitRequest, onEvent func(jobs.Event), onOutput func([]byte)) (*store.Job, error) {
	req.Stream = onOutput != nil
	l, err := c.progress(ctx, "/v1/jobs", req, onEvent, onOutput)
	if err != nil {
		return nil, err
	}
	if l.Job == nil {
		return nil, errors.New("api: no job record in the answer")
	}
	return l.Job, nil
}

// SubmitShards submits a sharded job (req.Shards set) and calls onEvent for
// each progress event of every shard as it arrives; it returns the outcome.
func (c *Client) SubmitShards(ctx context.Context, req SubmitRequest, onEvent func(jobs.Event)) (*store.ShardedStatus, error) {
	l, err := c.progress(ctx, "/v1/jobs", req, onEvent, nil)
	if err != nil {
		return nil, err
	}
	if l.Sharded == nil {
		return nil, errors.New("api: no sharded job in the answer")
	}
	return l.Sharded, nil
}

// Train runs a training run in the node, calling onEvent with its
// progress, and returns its record.
func (c *Client) Train(ctx context.Context, req TrainRequest, onEvent func(jobs.Event)) (*store.TrainRun, error) {
	l, err := c.progress(ctx, "/v1/train", req, onEvent, nil)
	if err != nil {
		return nil, err
	}
	if l.Train == nil {
		return nil, errors.New("api: no training run in the answer")
	}
	return l.Train, nil
}

// TrainRuns lists the node's training runs.
func (c *Client) TrainRuns(ctx context.Context) ([]store.TrainRun, error) {
	var v []store.TrainRun
	return v, c.getJSON(ctx, "/v1/train", &v)
}

// TrainRun returns where a training run stands; with wait, once it has
// ended (or ctx is done).
func (c *Client) TrainRun(ctx context.Context, id wire.JobID, wait bool) (*store.TrainRun, error) {
	var v store.TrainRun
	err := c.getJSON(ctx, runPath("/v1/train/", id, wait), &v)
	if notFound(err) {
		return nil, fmt.Errorf("no training run %s in this node (infernet jobs --train lists them): %w", id, store.ErrNotFound)
	}
	return &v, err
}

// runPath is the path of the run id under base, asking to wait for its end.
func runPath(base string, id wire.JobID, wait bool) string {
	if wait {
		return base + id.String() + "?wait"
	}
	return base + id.String()
}

// CancelTrainRun cancels a training run: it ends failed, not resumed.
func (c *Client) CancelTrainRun(ctx context.Context, id wire.JobID) (*store.TrainRun, error) {
	var v store.TrainRun
	return &v, c.deleteJSON(ctx, "/v1/train/"+id.String(), &v)
}

// submit posts req and reads the progress stream until its last line.
// progress posts req to path and reads the progress stream until its last
// line, passing events and output on.
func (c *Client) progress(ctx context.Context, path string, req any, onEvent func(jobs.Event), onOutput func([]byte)) (*Line, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("api: bad progress line: %w", err)
		}
		switch {
		case l.Event != nil:
			if onEvent != nil {
				onEvent(*l.Event)
			}
		case l.Output != nil:
			if onOutput != nil {
				onOutput(l.Output)
			}
		case l.Job != nil || l.Sharded != nil || l.Train != nil:
			return &l, nil
		case l.Error != "":
			return nil, errors.New(l.Error)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		// The node stopped (or was killed) under the command: the job's
		// record stays in its database.
		return nil, fmt.Errorf("api: progress stream: %w: the node went away before the job ended (once it runs again, infernet jobs shows the job)", err)
	} else if err != nil {
		return nil, fmt.Errorf("api: progress stream: %w", err)
	}
	return nil, errors.New("api: node closed the progress stream before the job ended (infernet jobs shows the job)")
}

// Jobs lists the jobs the node submitted.
func (c *Client) Jobs(ctx context.Context) ([]store.Job, error) {
	var v []store.Job
	return v, c.getJSON(ctx, "/v1/jobs", &v)
}

// ShardedJobs lists the sharded jobs the node submitted or resumed.
func (c *Client) ShardedJobs(ctx context.Context) ([]store.ShardedStatus, error) {
	var v []store.ShardedStatus
	return v, c.getJSON(ctx, "/v1/sharded", &v)
}

// ShardedJob returns where a sharded job stands; with wait, once it has
// ended (or ctx is done).
func (c *Client) ShardedJob(ctx context.Context, id wire.JobID, wait bool) (*store.ShardedStatus, error) {
	var v store.ShardedStatus
	return &v, c.getJSON(ctx, runPath("/v1/sharded/", id, wait), &v)
}

// CancelShardedJob cancels a sharded job: it ends failed, not resumed.
func (c *Client) CancelShardedJob(ctx context.Context, id wire.JobID) (*store.ShardedStatus, error) {
	var v store.ShardedStatus
	return &v, c.deleteJSON(ctx, "/v1/sharded/"+id.String(), &v)
}

// deleteJSON sends DELETE path and decodes the answer into v.
func (c *Client) deleteJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// DashboardURL asks the node for a one-time login link to its dashboard.
func (c *Client) DashboardURL(ctx context.Context) (string, time.Time, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/dashboard/login", nil)
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	var l DashboardLogin
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return "", time.Time{}, err
	}
	return c.base + l.Path, l.Expires, nil
}

// Peers lists the peers the node knows.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var v []Peer
	return v, c.getJSON(ctx, "/v1/peers", &v)
}

// Forgive lifts the ban on peer id and clears the lies, lost replicas and
// unpaid results on its record (node.Node.Forgive), and returns the peer.
func (c *Client) Forgive(ctx context.Context, id string) (Peer, error) {
	var v Peer
	return v, c.deleteJSON(ctx, "/v1/peers/"+url.PathEscape(id)+"/ban", &v)
}

// Runs lists the replicas the node ran or runs for others.
func (c *Client) Runs(ctx context.Context) ([]store.Run, error) {
	var v []store.Run
	return v, c.getJSON(ctx, "/v1/runs", &v)
}

// Payments lists the node's escrowed payments, in and out.
func (c *Client) Payments(ctx context.Context) ([]store.Payment, error) {
	var v []store.Payment
	return v, c.getJSON(ctx, "/v1/payments", &v)
}

// AddModel names a model whose weights (and tokenizer, for a llama2.c
// checkpoint) the node already stores as blobs (PutBlobFrom).
func (c *Client) AddModel(ctx context.Context, req AddModelRequest) (*store.Model, error) {
	var m store.Model
	return &m, c.sendJSON(ctx, http.MethodPost, "/v1/models", req, &m)
}

// Models lists the node's named models, by name.
func (c *Client) Models(ctx context.Context) ([]store.Model, error) {
	var v ModelList
	err := c.getJSON(ctx, "/v1/models", &v)
	ms := make([]store.Model, len(v.Data))
	for i, o := range v.Data {
		ms[i] = o.Model
	}
	return ms, err
}

// Model returns the model named name; an error wrapping
// models.ErrUnknown if the node has none of that name.
func (c *Client) Model(ctx context.Context, name string) (*store.Model, error) {
	var m store.Model
	return &m, modelError(name, c.getJSON(ctx, "/v1/models/"+url.PathEscape(name), &m))
}

// RemoveModel forgets the model named name and returns its record; an
// error wrapping models.ErrUnknown if the node has none of that name.
func (c *Client) RemoveModel(ctx context.Context, name string) (*store.Model, error) {
	var m store.Model
	return &m, modelError(name, c.deleteJSON(ctx, "/v1/models/"+url.PathEscape(name), &m))
}

// modelError turns the API's 404 for the model name into models.ErrUnknown.
func modelError(name string, err error) error {
	if notFound(err) {
		return fmt.Errorf("model %s: %w", name, models.ErrUnknown)
	}
	return err
}

// notFound reports whether err is the API's 404.
func notFound(err error) bool {
	se := (*statusError)(nil)
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

// Runner has the node store its llama runner guest as a blob (once) and
// returns it: the module of generation jobs.
func (c *Client) Runner(ctx context.Context) (store.BlobRef, error) {
	var v store.BlobRef
	return v, c.sendJSON(ctx, http.MethodPost, "/v1/runner", nil, &v)
}

// sendJSON sends body (none when nil) as JSON and decodes the answer into v.
func (c *Client) sendJSON(ctx context.Context, method, path string, body, v any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
