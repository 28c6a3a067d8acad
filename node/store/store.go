// Package store keeps a node's state in bbolt: the jobs it submitted, the
// replicas it ran for others, and the peers it knows. Records are small
// (digests, never module or input bytes) and JSON-encoded, one bbolt bucket
// per kind. Every write is one durable transaction: callers record a step
// before they act on it.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketJobs  = []byte("jobs")
	bucketRuns  = []byte("runs")
	bucketPeers = []byte("peers")
)

// buckets are every bucket Open creates.
var buckets = [][]byte{bucketJobs, bucketRuns, bucketPeers, bucketPayments, bucketOpenPayments, bucketSharded, bucketShardParts, bucketTrain, bucketModels}

// ErrNotFound is returned for a record the store does not hold.
var ErrNotFound = errors.New("store: not found")

// Store is a node's database. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
	// onWrite, when set, is called after each committed write.
	onWrite func()
}

// OnWrite sets f to be called after each committed write, so that what
// shows the store's state (the dashboard) waits for a change instead of
// reading it on a timer. Call it before the store is shared.
func (s *Store) OnWrite(f func()) { s.onWrite = f }

// update runs fn in a read-write transaction and, when it commits, calls
// the OnWrite function.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	if err := s.db.Update(fn); err != nil {
		return err
	}
	if s.onWrite != nil {
		s.onWrite()
	}
	return nil
}

// Open opens (creating if needed) the database at path. Only one process
// may hold it: a second Open waits up to a second, then fails.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("store: %s is held by another process (an infernet node with this --datadir, or a command using it): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		indexed := tx.Bucket(bucketOpenPayments) != nil
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if !indexed {
			if err := indexOpenPayments(tx); err != nil {
				return err
			}
		}
		if err := rekeyRuns(tx); err != nil {
			return err
		}
		// A store written before its time indexes (or by a build without
		// them since) has them built again.
		for _, x := range timeIndexes {
			if idx := tx.Bucket(x.index); idx != nil && idx.Stats().KeyN == tx.Bucket(x.records).Stats().KeyN {
				continue
			}
			if err := x.rebuild(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: init %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// rekeyRuns moves runs recorded under job and replica alone to keys that
// also name their client (runKey). Records stay as they are.
func rekeyRuns(tx *bolt.Tx) error {
	b := tx.Bucket(bucketRuns)
	var old [][]byte
	err := b.ForEach(func(k, _ []byte) error {
		if len(k) == legacyRunKeyLen {
			old = append(old, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range old {
		v := append([]byte(nil), b.Get(k)...)
		var r Run
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("store: run %x: %w", k, err)
		}
		if err := b.Put(runKey(r.Client, r.Job, r.Replica), v); err != nil {
			return err
		}
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) put(bucket, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, b) })
}

func get(db *bolt.DB, bucket, key []byte, v any) error {
	return db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Get(key)
		if b == nil {
			return ErrNotFound
		}
		return json.Unmarshal(b, v)
	})
}

// list decodes every record of bucket, newest key last, keeping at most the
// last limit (0: all).
func list[T any](db *bolt.DB, bucket []byte, limit int) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Last(); k != nil && (limit == 0 || len(out) < limit); k, v = c.Prev() {
			var r T
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("store: record %x: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}
