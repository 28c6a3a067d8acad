package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
)

// AddModelRequest is the body of POST /v1/models: a name for a model whose
// weights, and for a llama2.c checkpoint its tokenizer, are blobs already
// stored (POST /v1/blobs).
type AddModelRequest struct {
	Name      string        `json:"name"`
	Model     store.BlobRef `json:"model"`
	Tokenizer store.BlobRef `json:"tokenizer,omitzero"`
}

// modelStatus is the HTTP status of a models.Registry error.
func modelStatus(err error) int {
	switch {
	case errors.Is(err, models.ErrUnknown):
		return http.StatusNotFound
	case errors.Is(err, models.ErrExists):
		return http.StatusConflict
	case errors.Is(err, models.ErrNoRunner):
		return http.StatusNotImplemented
	case errors.Is(err, models.ErrBadName), errors.Is(err, models.ErrBadModel), errors.Is(err, models.ErrTokenizer),
		errors.Is(err, models.ErrBadTokenizer), errors.Is(err, blob.ErrNotFound):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// modelAnswer writes a registry's answer: v as JSON, or its error.
func modelAnswer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		httpError(w, modelStatus(err), err)
		return
	}
	writeJSON(w, v)
}

// ModelList is the answer of GET /v1/models: OpenAI's list of model
// objects, each with the node's record of the model.
type ModelList struct {
	Object string        `json:"object"` // "list"
	Data   []ModelObject `json:"data"`
}

// ModelObject is OpenAI's model object (id: the model's name), with the
// node's record of the model.
type ModelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	store.Model
}

func (s *Server) getModels(w http.ResponseWriter, _ *http.Request) {
	ms, err := s.n.Models().List()
	list := ModelList{Object: "list", Data: []ModelObject{}}
	for _, m := range ms {
		list.Data = append(list.Data, modelObject(m))
	}
	answer(w, list, err)
}

// modelObject is m as OpenAI's model object.
func modelObject(m store.Model) ModelObject {
	return ModelObject{ID: m.Name, Object: "model", Created: m.Added.Unix(), OwnedBy: "infernet", Model: m}
}

func (s *Server) postModel(w http.ResponseWriter, r *http.Request) {
	var req AddModelRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	m, err := s.n.Models().Add(req.Name, store.BlobRef(req.Model), store.BlobRef(req.Tokenizer))
	modelAnswer(w, m, err)
}

// getModel answers OpenAI's model object, with the node's record of the
// model (which Client.Model reads).
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	m, err := s.n.Models().Get(r.PathValue("name"))
	if err != nil {
		modelAnswer(w, nil, err)
		return
	}
	writeJSON(w, modelObject(*m))
}

func (s *Server) deleteModel(w http.ResponseWriter, r *http.Request) {
	m, err := s.n.Models().Remove(r.PathValue("name"))
	modelAnswer(w, m, err)
}

// postRunner stores the runner guest as a blob (once) and answers it.
func (s *Server) postRunner(w http.ResponseWriter, _ *http.Request) {
	ref, err := s.n.Models().Runner()
	modelAnswer(w, store.BlobRef{Digest: ref.Digest, Size: ref.Size}, err)
}

// LocalModel reads the model named name from the database of a node that
// does not run now (one that runs holds the database: ask it through
// Client.Model), with an error wrapping ErrUnknownModel when it has none.
func LocalModel(dataDir, name string) (*store.Model, error) {
	path := filepath.Join(dataDir, "node.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model %s: %w", name, models.ErrUnknown)
	}
	db, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	m, err := db.Model(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("model %s: %w", name, models.ErrUnknown)
	}
	return m, err
}

// LocalPayments are the payments recorded by a node that does not run
// now, on its data directory (none without a database): what `infernet
// earnings` and `spending` list with no node running.
func LocalPayments(dataDir string) ([]store.Payment, error) {
	path := filepath.Join(dataDir, "node.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	db, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Payments(0)
}

// LocalModels is the model registry of a node that does not run now, on
// its data directory: `infernet models` names models with no node
// running, as `infernet generate --local` runs them (LocalModel). The
// database and blob store are the node's own, created if missing; a node
// started on the directory later finds the models there. Close releases
// the database, which a running node would hold.
type LocalModels struct {
	*models.Registry
	db    *store.Store
	blobs *blob.Store
}

// OpenLocalModels opens the model registry of data directory dataDir.
func OpenLocalModels(dataDir string) (*LocalModels, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	db, err := store.Open(filepath.Join(dataDir, "node.db"))
	if err != nil {
		return nil, err
	}
	// No quota here: the node applies its own when it starts, and it
	// never evicts a named model's blobs.
	blobs, err := blob.OpenStore(filepath.Join(dataDir, "blobs"))
	if err == nil {
		var reg *models.Registry
		if reg, err = models.New(db, blobs); err == nil {
			return &LocalModels{Registry: reg, db: db, blobs: blobs}, nil
		}
	}
	db.Close()
	return nil, err
}

// PutFile stores the file at path as a blob.
func (l *LocalModels) PutFile(path string) (store.BlobRef, error) {
	f, err := os.Open(path)
	if err != nil {
		return store.BlobRef{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return store.BlobRef{}, err
	}
	d, size, err := l.blobs.Put(f, st.Size())
	return store.BlobRef{Digest: d, Size: size}, err
}

// Close closes the registry's database.
func (l *LocalModels) Close() error { return l.db.Close() }

// BlobPath is the file that the node of data directory dataDir keeps blob
// d in, whether or not it is there: a process that shares the directory
// reads it in place.
func BlobPath(dataDir string, d digest.Digest) string {
	return blob.PathIn(filepath.Join(dataDir, "blobs"), d)
}
