package store

import (
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/blob"
)

// bucketModels holds named models by name.
var bucketModels = []byte("models")

// ModelFormat is the file format of a model's weights.
type ModelFormat uint8

// Model formats.
const (
	// ModelLlama2C is a llama2.c checkpoint (.bin): a 7×int32 header, then
	// f32 weights; its vocabulary is a separate tokenizer.bin.
	ModelLlama2C ModelFormat = iota + 1
	// ModelGGUF is a GGUF file, its vocabulary in its metadata.
	ModelGGUF
)

var modelFormatNames = [...]string{"", "llama2c", "gguf"}

// String returns the format's name: llama2c or gguf.
func (f ModelFormat) String() string { return enumName(modelFormatNames[:], f, "ModelFormat") }

// MarshalText implements encoding.TextMarshaler.
func (f ModelFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *ModelFormat) UnmarshalText(b []byte) error { return parseEnum(modelFormatNames[:], b, f) }

// BlobRef is a blob by digest and size.
type BlobRef struct {
	Digest blob.Digest `json:"digest"`
	Size   int64       `json:"size"`
}

// Model is a named model (`infernet models add`): its weights and, for a
// llama2.c checkpoint, its tokenizer, as blobs held by the node.
type Model struct {
	Name   string      `json:"name"`
	Format ModelFormat `json:"format"`
	Model  BlobRef     `json:"model"`
	// Tokenizer is the llama2.c tokenizer.bin (zero for GGUF).
	Tokenizer BlobRef   `json:"tokenizer,omitzero"`
	Added     time.Time `json:"added"`
}

// ErrExists is returned by AddModel for a name already taken.
var ErrExists = errors.New("store: exists")

// AddModel records m under its name, or returns ErrExists if a model of
// that name is recorded.
func (s *Store) AddModel(m *Model) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketModels)
		if b.Get([]byte(m.Name)) != nil {
			return ErrExists
		}
		return b.Put([]byte(m.Name), v)
	})
}

// Model returns the model named name, or ErrNotFound.
func (s *Store) Model(name string) (*Model, error) {
	var m Model
	if err := get(s.db, bucketModels, []byte(name), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Models returns every named model, by name.
func (s *Store) Models() ([]Model, error) {
	var out []Model
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketModels).ForEach(func(_, v []byte) error {
			var m Model
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// DeleteModel removes the model named name and returns it, or ErrNotFound.
func (s *Store) DeleteModel(name string) (*Model, error) {
	var m Model
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketModels)
		v := b.Get([]byte(name))
		if v == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}
