// Package testkeys makes Groth16 keys for tests with groth16.Setup and
// caches them on disk by circuit digest, so that test runs after the first
// skip setups of a minute or more. Test keys only: whoever ran the setup
// could forge proofs; real keys come from proofs/setup.
package testkeys

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/constraint"

	"github.com/infernet/infernet/proofs/setup"
)

// keyPair is a circuit's keys, held for the life of the test binary.
type keyPair struct {
	pk groth16.ProvingKey
	vk groth16.VerifyingKey
}

var (
	mu   sync.Mutex
	held = map[[32]byte]keyPair{} // by circuit digest; guarded by mu
)

// Setup returns groth16.Setup keys for ccs, kept in
// ${INFERNET_CACHE:-~/.cache/infernet}/testkeys by the circuit's digest and
// in memory once read, so that tests may call it for every use. An
// unreadable cache entry is made again.
func Setup(ccs constraint.ConstraintSystem) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	digest, err := setup.CircuitDigest(ccs)
	if err != nil {
		return nil, nil, err
	}
	mu.Lock()
	defer mu.Unlock() // one setup at a time: each takes every core
	if k, ok := held[digest]; ok {
		return k.pk, k.vk, nil
	}
	dir := os.Getenv("INFERNET_CACHE")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, err
		}
		dir = filepath.Join(home, ".cache", "infernet")
	}
	base := filepath.Join(dir, "testkeys", fmt.Sprintf("%x", digest[:12]))
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return nil, nil, err
	}
	// Test binaries of several packages run at once and want the same
	// keys: one makes them while the others wait, so that nobody reads a
	// proving key of one setup with the verifying key of another.
	lock, err := os.OpenFile(base+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, nil, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	pk, vk := groth16.NewProvingKey(ecc.BN254), groth16.NewVerifyingKey(ecc.BN254)
	if readKey(base+".pk", pk.UnsafeReadFrom) != nil || readKey(base+".vk", vk.UnsafeReadFrom) != nil {
		if pk, vk, err = groth16.Setup(ccs); err != nil {
			return nil, nil, err
		}
		writeKey(base+".pk", pk.WriteRawTo)
		writeKey(base+".vk", vk.WriteRawTo)
	}
	held[digest] = keyPair{pk, vk}
	return pk, vk, nil
}

func readKey(path string, read func(r io.Reader) (int64, error)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = read(f)
	return err
}

// writeKey writes a key file whole or not at all (rename), best effort.
func writeKey(path string, write func(w io.Writer) (int64, error)) {
	f, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return
	}
	if _, err := write(f); err != nil || f.Close() != nil {
		os.Remove(f.Name())
		return
	}
	os.Rename(f.Name(), path)
}
