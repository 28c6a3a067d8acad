package keys

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
)

// StoreDir is the key store's directory inside a node's data directory.
const StoreDir = "keys"

// EntryVersion is the version of the Entry format.
const EntryVersion = 1

var (
	// ErrNotFound is returned when the store holds no key of the asked kind
	// for a circuit.
	ErrNotFound = errors.New("keys: not in the key store")
	// ErrCorrupt is returned when a key file is not the file the store
	// wrote: its size or SHA-256 differs from the one recorded in its entry,
	// or its entry is unreadable.
	ErrCorrupt = errors.New("keys: key file does not match the store's record")
	// ErrIncompatible is returned when the key files were written by
	// another gnark version than this binary's: the raw encoding is not
	// stable across versions.
	ErrIncompatible = errors.New("keys: key files were written by another gnark version")
)

// File describes one key file of an Entry.
type File struct {
	Name   string `json:"name"`   // file name inside the store directory
	Size   int64  `json:"size"`   // bytes
	SHA256 string `json:"sha256"` // hex SHA-256 of the whole file
}

// Entry is the record the store keeps next to the key files of one circuit
// (in <circuit hex>.json): which files hold the keys, their sizes and
// SHA-256, and where the keys came from.
type Entry struct {
	Version      int            `json:"version"`
	Circuit      string         `json:"circuit"`            // hex setup.CircuitDigest
	Template     string         `json:"template,omitempty"` // template name, if known
	Gnark        string         `json:"gnark,omitempty"`    // gnark module version that wrote the files
	ProvingKey   *File          `json:"proving_key,omitempty"`
	VerifyingKey File           `json:"verifying_key"`
	Ceremony     *CeremonyState `json:"ceremony,omitempty"` // the ceremony the keys were verified from
	Installed    time.Time      `json:"installed"`
}

// Info is what Put records besides the keys; every field is optional.
type Info struct {
	Template string         // template name
	Ceremony *CeremonyState // the ceremony the caller verified the keys from
}

// Store is an on-disk cache of Groth16 (BN254) proving and verifying keys,
// indexed by circuit digest (setup.CircuitDigest). A node keeps it in
// DataDir/keys (StoreDir).
//
// Keys are stored in gnark's raw (uncompressed, unchecked) encoding, which
// loads about 40× faster than the checked one (0.19 s vs 8.4 s for a 45 MB
// proving key), so the store records each file's SHA-256 when it writes it
// and refuses a file that no longer matches (ErrCorrupt). That catches
// corruption, partial copies and edits of the key files alone; it is not a
// defence against someone who can rewrite the whole directory, whose keys
// the node must re-verify (Install) instead.
//
// Layout: <circuit hex>.json (the Entry) and the key files it names,
// <circuit hex>-<sha256 prefix>.pk / .vk. Files are written to a temporary
// name, synced and renamed, the entry last, so a reader sees the old keys or
// the new ones, never a mix or a partial file.
//
// NOTE: A Store is safe for concurrent use by goroutines of one process. Two
// processes putting keys for the same circuit at once may leave orphaned key
// files, never a broken entry.
type Store struct {
	dir string
	mu  sync.Mutex // serialises Put
}

// OpenStore opens (creating it if needed) the key store in dir and removes
// temporary files that a crashed writer left more than an hour ago.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("keys: opening store: %w", err)
	}
	if tmps, err := filepath.Glob(filepath.Join(dir, tmpPattern)); err == nil {
		for _, p := range tmps {
			if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(p)
			}
		}
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

const tmpPattern = ".tmp-*"

func circuitHex(circuit [32]byte) string { return hex.EncodeToString(circuit[:]) }

func (s *Store) entryPath(circuit [32]byte) string {
	return filepath.Join(s.dir, circuitHex(circuit)+".json")
}

// gnarkVersion is the version of gnark linked into this binary ("" if the
// binary carries no module information).
var gnarkVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/consensys/gnark" {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
})

// Put stores the keys of circuit (its setup.CircuitDigest), replacing any
// keys stored for it. pk may be nil to store a verifying key only (a node
// that only verifies). The caller vouches for the keys: put only keys that
// came out of a verified ceremony (Install does that).
func (s *Store) Put(circuit [32]byte, pk groth16.ProvingKey, vk groth16.VerifyingKey, info Info) (*Entry, error) {
	if vk == nil {
		return nil, errors.New("keys: put: nil verifying key")
	}
	if vk.CurveID() != ecc.BN254 || (pk != nil && pk.CurveID() != ecc.BN254) {
		return nil, errors.New("keys: put: keys are not BN254 keys")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, _ := s.Entry(circuit) // replaced files are removed at the end
	e := &Entry{
		Version:   EntryVersion,
		Circuit:   circuitHex(circuit),
		Template:  info.Template,
		Gnark:     gnarkVersion(),
		Ceremony:  info.Ceremony,
		Installed: time.Now().UTC().Truncate(time.Second),
	}
	var written []string
	fail := func(err error) (*Entry, error) {
		for _, name := range written {
			if old == nil || !old.names(name) {
				os.Remove(filepath.Join(s.dir, name))
			}
		}
		return nil, fmt.Errorf("keys: put %s: %w", e.Circuit[:16], err)
	}
	if pk != nil {
		f, err := s.writeKey(e.Circuit, ".pk", pk.WriteRawTo)
		if err != nil {
			return fail(fmt.Errorf("proving key: %w", err))
		}
		written = append(written, f.Name)
		e.ProvingKey = &f
	}
	f, err := s.writeKey(e.Circuit, ".vk", vk.WriteRawTo)
	if err != nil {
		return fail(fmt.Errorf("verifying key: %w", err))
	}
	written = append(written, f.Name)
	e.VerifyingKey = f
	js, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fail(err)
	}
	if _, err := writeAtomic(s.dir, filepath.Base(s.entryPath(circuit)), func(w io.Writer) (int64, error) {
		n, err := w.Write(append(js, '\n'))
		return int64(n), err
	}); err != nil {
		return fail(fmt.Errorf("entry: %w", err))
	}
	if old != nil { // best effort: the old entry's files nobody names any more
		for _, name := range old.files() {
			if !e.names(name) {
				os.Remove(filepath.Join(s.dir, name))
			}
		}
	}
	return e, nil
}

func (e *Entry) files() []string {
	names := []string{e.VerifyingKey.Name}
	if e.ProvingKey != nil {
		names = append(names, e.ProvingKey.Name)
	}
	return names
}

func (e *Entry) names(name string) bool { return slices.Contains(e.files(), name) }

// writeKey writes one key file under a content-addressed name.
func (s *Store) writeKey(circuit, ext string, write func(io.Writer) (int64, error)) (File, error) {
	h := sha256.New()
	tmp, err := writeTemp(s.dir, func(w io.Writer) (int64, error) { return write(io.MultiWriter(w, h)) })
	if err != nil {
		return File{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	f := File{Name: circuit + "-" + sum[:16] + ext, SHA256: sum}
	fi, err := os.Stat(tmp)
	if err == nil {
		f.Size = fi.Size()
		err = os.Rename(tmp, filepath.Join(s.dir, f.Name))
	}
	if err != nil {
		os.Remove(tmp)
		return File{}, err
	}
	return f, nil
}

// writeTemp writes a temporary file in dir through write, syncs and closes
// it, and returns its path; on error nothing is left behind.
func writeTemp(dir string, write func(io.Writer) (int64, error)) (string, error) {
	f, err := os.CreateTemp(dir, tmpPattern)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// writeAtomic writes dir/name whole or not at all (temporary file + rename).
func writeAtomic(dir, name string, write func(io.Writer) (int64, error)) (string, error) {
	tmp, err := writeTemp(dir, write)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return p, nil
}

// Entry returns the record of circuit's keys, or an error wrapping
// ErrNotFound.
func (s *Store) Entry(circuit [32]byte) (*Entry, error) {
	return s.readEntry(s.entryPath(circuit), circuitHex(circuit))
}

func (s *Store) readEntry(path, want string) (*Entry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: circuit %s", ErrNotFound, want)
	}
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: entry %s: %v", ErrCorrupt, filepath.Base(path), err)
	}
	if e.Version != EntryVersion {
		return nil, fmt.Errorf("keys: entry %s has version %d, want %d", filepath.Base(path), e.Version, EntryVersion)
	}
	if e.Circuit != want {
		return nil, fmt.Errorf("%w: entry %s names circuit %s", ErrCorrupt, filepath.Base(path), e.Circuit)
	}
	for _, name := range e.files() {
		if name == "" || name != filepath.Base(name) || !strings.HasPrefix(name, want+"-") {
			return nil, fmt.Errorf("%w: entry %s names file %q", ErrCorrupt, filepath.Base(path), name)
		}
	}
	return &e, nil
}

// List returns the entries of every circuit in the store, sorted by
// template name then circuit digest. Unreadable entries are skipped.
func (s *Store) List() ([]*Entry, error) {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	var out []*Entry
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if raw, err := hex.DecodeString(name); err != nil || len(raw) != 32 {
			continue
		}
		if e, err := s.readEntry(p, name); err == nil {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Entry) int {
		if c := strings.Compare(a.Template, b.Template); c != 0 {
			return c
		}
		return strings.Compare(a.Circuit, b.Circuit)
	})
	return out, nil
}

// VerifyingKey loads circuit's verifying key, checking the file's size and
// SHA-256 against its entry first. Errors wrap ErrNotFound, ErrCorrupt or
// ErrIncompatible.
func (s *Store) VerifyingKey(circuit [32]byte) (groth16.VerifyingKey, error) {
	e, err := s.Entry(circuit)
	if err != nil {
		return nil, err
	}
	vk := groth16.NewVerifyingKey(ecc.BN254)
	if err := s.load(e, &e.VerifyingKey, vk.UnsafeReadFrom); err != nil {
		return nil, err
	}
	return vk, nil
}

// ProvingKey loads circuit's proving key, checking the file's size and
// SHA-256 against its entry first. Errors wrap ErrNotFound, ErrCorrupt or
// ErrIncompatible. Proving keys are big (tens of MB for the GEMM templates, 8.3 MB for exchange-256):
// load one once and keep it.
func (s *Store) ProvingKey(circuit [32]byte) (groth16.ProvingKey, error) {
	e, err := s.Entry(circuit)
	if err != nil {
		return nil, err
	}
	if e.ProvingKey == nil {
		return nil, fmt.Errorf("%w: circuit %s has a verifying key only", ErrNotFound, e.Circuit)
	}
	pk := groth16.NewProvingKey(ecc.BN254)
	if err := s.load(e, e.ProvingKey, pk.UnsafeReadFrom); err != nil {
		return nil, err
	}
	return pk, nil
}

// load checks file f of entry e, then decodes it with read. The file is
// hashed in full before it is decoded: the raw decoder trusts its input.
func (s *Store) load(e *Entry, f *File, read func(io.Reader) (int64, error)) error {
	if v := gnarkVersion(); e.Gnark != "" && v != "" && e.Gnark != v {
		return fmt.Errorf("%w: %s (this binary has %s): install them again", ErrIncompatible, e.Gnark, v)
	}
	fh, err := os.Open(filepath.Join(s.dir, f.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s is missing", ErrCorrupt, f.Name)
	}
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, bufio.NewReaderSize(fh, 1<<20))
	if err != nil {
		return fmt.Errorf("keys: reading %s: %w", f.Name, err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%w: %s (%d bytes) has changed since it was written (%d bytes, sha256 %s)",
			ErrCorrupt, f.Name, n, f.Size, f.SHA256)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	read2, err := read(bufio.NewReaderSize(fh, 1<<20))
	if err != nil {
		return fmt.Errorf("keys: decoding %s: %w", f.Name, err)
	}
	if read2 != f.Size {
		return fmt.Errorf("%w: %s decodes from %d of its %d bytes", ErrCorrupt, f.Name, read2, f.Size)
	}
	return nil
}
