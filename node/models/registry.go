// Package models is a node's named language models and the client side of
// the llama runner's protocol (package llama): `infernet models` records a
// model's weights and tokenizer, blobs the node holds, under a name; a
// generation job runs the runner guest on them, its requests as input and
// its events as output.
package models

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// Errors of the Registry.
var (
	// ErrBadName is returned for a model name that is not 1 to 64 letters,
	// digits, '.', '_' or '-', starting with a letter or digit.
	ErrBadName = errors.New("a model name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	// ErrUnknown is returned for a name no model has.
	ErrUnknown = errors.New("no model of that name (infernet models lists them)")
	// ErrExists is returned by Add for a name already taken.
	ErrExists = errors.New("a model of that name exists (remove it first: infernet models rm)")
	// ErrTokenizer is returned for a llama2.c checkpoint without a
	// tokenizer, and (TokenizerGiven) for a GGUF file with one.
	ErrTokenizer = errors.New("a llama2.c checkpoint needs its tokenizer file, the one it was trained with (--tokenizer: llama2.c's tokenizer.bin for Llama 2's vocabulary; stories260K's is tok512.bin)")
	// ErrNoRunner is returned by Runner when this build has no runner guest.
	ErrNoRunner = errors.New("this build of infernet has no llama runner guest")
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName returns an error wrapping ErrBadName unless name may name a
// model. Names have no slashes, so a name is never taken for a path.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("model name %q: %w", name, ErrBadName)
	}
	return nil
}

// Registry is a node's named models, recorded in its store, their blobs in
// its blob store. It is safe for concurrent use.
type Registry struct {
	db    *store.Store
	blobs *blob.Store

	// mu guards held, the reference count of every digest a model names,
	// templates, the chat templates read from model files, and prompts,
	// the registered models' vocabularies (Prompts).
	mu        sync.RWMutex
	held      map[blob.Digest]int
	templates map[blob.Digest]keptTemplate
	prompts   map[promptsKey]*Prompts
	// runnerMu guards runner, the runner guest's blob once Runner
	// stored it.
	runnerMu sync.Mutex
	runner   store.BlobRef
}

// New returns the registry of the models recorded in db, their blobs in
// blobs. Neither is closed by it.
func New(db *store.Store, blobs *blob.Store) (*Registry, error) {
	r := &Registry{db: db, blobs: blobs, held: map[blob.Digest]int{}, templates: map[blob.Digest]keptTemplate{},
		prompts: map[promptsKey]*Prompts{}}
	ms, err := db.Models()
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	for i := range ms {
		r.hold(&ms[i], 1)
	}
	return r, nil
}

// hold adds by to the reference counts of m's blobs.
func (r *Registry) hold(m *store.Model, by int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range []blob.Digest{m.Model.Digest, m.Tokenizer.Digest} {
		if d.IsZero() {
			continue
		}
		if r.held[d] += by; r.held[d] <= 0 {
			delete(r.held, d)
		}
	}
	if r.held[m.Model.Digest] == 0 {
		for k := range r.prompts {
			if k.model == m.Model.Digest {
				delete(r.prompts, k) // a tokenizer is megabytes
			}
		}
	}
}

// Holds reports whether d is a blob of a named model or the runner guest
// (Runner): the node keeps them however old, and the blob quota never
// evicts them. It is quick and never calls the blob store (blob.WithKeep);
// a nil Registry holds nothing.
func (r *Registry) Holds(d blob.Digest) bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.held[d] > 0
}

// TokenizerGiven returns nil if a tokenizer file is given (given) as a
// model of info needs one, else an error that is ErrTokenizer, saying
// which way it is wrong.
func TokenizerGiven(info Info, given bool) error {
	switch needs := info.NeedsTokenizer(); {
	case needs == given:
		return nil
	case needs:
		return ErrTokenizer
	}
	return extraTokenizer{}
}

// extraTokenizer is a tokenizer file given for a model that has its own.
type extraTokenizer struct{}

func (extraTokenizer) Error() string {
	return "a GGUF file has its own tokenizer: give no tokenizer file (--tokenizer)"
}

func (extraTokenizer) Is(target error) bool { return target == ErrTokenizer }

// Add names a model whose weights (and tokenizer, for a llama2.c
// checkpoint) are blobs already stored here: it checks their format
// (Sniff, CheckTokenizer) and records them under name. The name must be
// new (ErrExists).
func (r *Registry) Add(name string, model, tokenizer store.BlobRef) (*store.Model, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	info, err := r.sniff(model)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	if err := TokenizerGiven(info, !tokenizer.Digest.IsZero()); err != nil {
		return nil, fmt.Errorf("model %s is %s: %w", name, info.Format, err)
	}
	if info.NeedsTokenizer() {
		if err := r.checkTokenizer(tokenizer, info.Config.VocabSize); err != nil {
			return nil, fmt.Errorf("model %s: tokenizer: %w", name, err)
		}
	}
	m := &store.Model{Name: name, Format: info.Format, Model: model, Tokenizer: tokenizer, Added: time.Now().UTC()}
	// Held before it is recorded: a blob GC between the two keeps it.
	r.hold(m, 1)
	if err := r.db.AddModel(m); err != nil {
		r.hold(m, -1)
		if errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("model %s: %w", name, ErrExists)
		}
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	return m, nil
}

// sniff tells the format of the stored blob ref.
func (r *Registry) sniff(ref store.BlobRef) (Info, error) {
	f, size, err := r.blobs.Open(ref.Digest)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	if size != ref.Size {
		return Info{}, fmt.Errorf("blob %s has %d bytes, not %d", ref.Digest.Short(), size, ref.Size)
	}
	return Sniff(f, size)
}

// checkTokenizer checks the stored blob ref is a tokenizer of vocab tokens.
func (r *Registry) checkTokenizer(ref store.BlobRef, vocab int) error {
	f, size, err := r.blobs.Open(ref.Digest)
	if err != nil {
		return err
	}
	defer f.Close()
	if size != ref.Size {
		return fmt.Errorf("blob %s has %d bytes, not %d", ref.Digest.Short(), size, ref.Size)
	}
	return CheckTokenizer(f, vocab)
}

// Get returns the model named name, or an error wrapping ErrUnknown.
func (r *Registry) Get(name string) (*store.Model, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	m, err := r.db.Model(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("model %s: %w", name, ErrUnknown)
	}
	return m, err
}

// List returns every named model, by name.
func (r *Registry) List() ([]store.Model, error) { return r.db.Models() }

// Remove forgets the model named name and returns its record; its blobs
// are then kept like any other (the blob retention and quota apply).
func (r *Registry) Remove(name string) (*store.Model, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	m, err := r.db.DeleteModel(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("model %s: %w", name, ErrUnknown)
	}
	if err != nil {
		return nil, err
	}
	r.hold(m, -1)
	return m, nil
}

// Runner stores the runner guest (llama.Runner) in the blob store, unless
// it is there, and returns its blob, which Holds keeps from the first call
// on. It returns ErrNoRunner for a build without it.
func (r *Registry) Runner() (store.BlobRef, error) {
	r.runnerMu.Lock()
	defer r.runnerMu.Unlock()
	if !r.runner.Digest.IsZero() {
		if _, ok := r.blobs.Has(r.runner.Digest); ok {
			return r.runner, nil
		}
	}
	wasm := llama.Runner()
	if len(wasm) == 0 {
		return store.BlobRef{}, ErrNoRunner
	}
	if r.runner.Digest.IsZero() {
		r.runner = store.BlobRef{Digest: blob.Sum(wasm), Size: int64(len(wasm))}
		r.hold(&store.Model{Model: r.runner}, 1)
	}
	if _, err := r.blobs.PutBytes(wasm); err != nil {
		return store.BlobRef{}, fmt.Errorf("runner: %w", err)
	}
	return r.runner, nil
}

// JobData returns m's blobs as a runner job's data files (llama.DataModel
// and, for a llama2.c checkpoint, llama.DataTokenizer), in name order.
func JobData(m *store.Model) []wire.DataBlob {
	data := []wire.DataBlob{{Name: llama.DataModel, Digest: m.Model.Digest, Size: m.Model.Size}}
	if !m.Tokenizer.Digest.IsZero() {
		data = append(data, wire.DataBlob{Name: llama.DataTokenizer, Digest: m.Tokenizer.Digest, Size: m.Tokenizer.Size})
	}
	return data
}
