package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A timeIndex orders a bucket of records by a time each record carries (a
// job's creation, a run's start), so that the newest few are read without
// decoding the rest: the dashboard asks for them every second, and a node
// that has run for months holds hundreds of thousands. Its keys are the
// time's big-endian UnixNano followed by the record's key; its values are
// empty. It is written in the transaction that writes the record.
type timeIndex struct {
	records, index []byte
	// timeOf reads the indexed time of an encoded record.
	timeOf func(v []byte) (time.Time, error)
}

var (
	jobsByTime     = timeIndex{bucketJobs, []byte("jobs-by-time"), createdOf}
	runsByTime     = timeIndex{bucketRuns, []byte("runs-by-time"), startedOf}
	paymentsByTime = timeIndex{bucketPayments, []byte("payments-by-time"), createdOf}
	shardedByTime  = timeIndex{bucketSharded, []byte("sharded-by-time"), createdOf}
	// timeIndexes are every index Open keeps (and builds when new).
	timeIndexes = []timeIndex{jobsByTime, runsByTime, paymentsByTime, shardedByTime}
)

func createdOf(v []byte) (time.Time, error) {
	var r struct {
		Created time.Time `json:"created"`
	}
	err := json.Unmarshal(v, &r)
	return r.Created, err
}

func startedOf(v []byte) (time.Time, error) {
	var r struct {
		Started time.Time `json:"started"`
	}
	err := json.Unmarshal(v, &r)
	return r.Started, err
}

// key is the index key of record k at time t; times before 1970 sort
// first, together.
func (x timeIndex) key(t time.Time, k []byte) []byte {
	ik := make([]byte, 8, 8+len(k))
	binary.BigEndian.PutUint64(ik, uint64(max(t.UnixNano(), 0)))
	return append(ik, k...)
}

// put writes v, whose time is t, under k, and indexes it. A record whose
// time changed loses its old index key.
func (x timeIndex) put(tx *bolt.Tx, k, v []byte, t time.Time) error {
	b, idx := tx.Bucket(x.records), tx.Bucket(x.index)
	if old := b.Get(k); old != nil {
		if ot, err := x.timeOf(old); err == nil && !ot.Equal(t) {
			if err := idx.Delete(x.key(ot, k)); err != nil {
				return err
			}
		}
	}
	if err := b.Put(k, v); err != nil {
		return err
	}
	return idx.Put(x.key(t, k), nil)
}

// newest returns the keys and values of the newest limit records (0:
// all), oldest first.
func (x timeIndex) newest(tx *bolt.Tx, limit int) (keys, values [][]byte) {
	b := tx.Bucket(x.records)
	c := tx.Bucket(x.index).Cursor()
	for ik, _ := c.Last(); ik != nil && (limit == 0 || len(keys) < limit); ik, _ = c.Prev() {
		k := ik[8:]
		if v := b.Get(k); v != nil {
			keys, values = append(keys, k), append(values, v)
		}
	}
	for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
		keys[i], keys[j] = keys[j], keys[i]
		values[i], values[j] = values[j], values[i]
	}
	return keys, values
}

// rebuild indexes every record afresh: for a store written before the
// index existed, or written since without it.
func (x timeIndex) rebuild(tx *bolt.Tx) error {
	if tx.Bucket(x.index) != nil {
		if err := tx.DeleteBucket(x.index); err != nil {
			return err
		}
	}
	idx, err := tx.CreateBucket(x.index)
	if err != nil {
		return err
	}
	return tx.Bucket(x.records).ForEach(func(k, v []byte) error {
		t, err := x.timeOf(v)
		if err != nil {
			return fmt.Errorf("store: indexing %s %x: %w", x.records, k, err)
		}
		return idx.Put(x.key(t, k), nil)
	})
}

// newestOf decodes the newest limit records of x (0: all), oldest first.
func newestOf[T any](db *bolt.DB, x timeIndex, limit int) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		keys, values := x.newest(tx, limit)
		out = make([]T, len(values))
		for i, v := range values {
			if err := json.Unmarshal(v, &out[i]); err != nil {
				return fmt.Errorf("store: %s %x: %w", x.records, keys[i], err)
			}
		}
		return nil
	})
	return out, err
}

// putIndexed encodes r and writes it under k, indexed by x at t.
func (s *Store) putIndexed(x timeIndex, k []byte, r any, t time.Time) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error { return x.put(tx, k, v, t) })
}
