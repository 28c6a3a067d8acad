package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// IdentityFile is the node's Ed25519 key inside its data directory.
const IdentityFile = "identity.key"

// LoadIdentity reads the node's private key from dir, creating the directory
// and a new Ed25519 key the first time. The key file is private (0600).
func LoadIdentity(dir string) (crypto.PrivKey, peer.ID, error) {
	path := filepath.Join(dir, IdentityFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createIdentity(dir, path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	key, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, "", fmt.Errorf("identity %s: %w", path, err)
	}
	id, err := peer.IDFromPrivateKey(key)
	return key, id, err
}

func createIdentity(dir, path string) (crypto.PrivKey, peer.ID, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, "", err
	}
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	// Write then link: two processes starting at once end up with one key.
	tmp, err := os.CreateTemp(dir, ".identity-*")
	if err != nil {
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadIdentity(dir)
		}
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	id, err := peer.IDFromPrivateKey(key)
	return key, id, err
}
