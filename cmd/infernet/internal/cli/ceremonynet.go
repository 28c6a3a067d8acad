package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/proofs/keys"
)

// ceremonyIndex lists the files of a published ceremony directory, each a
// blob by SHA-256: what `ceremony fetch` downloads. Its own digest and size
// are the ceremony's address.
type ceremonyIndex struct {
	Files []indexFile `json:"files"`
}

type indexFile struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// maxIndexBytes and maxIndexFiles bound what fetch accepts from a peer.
const (
	maxIndexBytes = 1 << 20
	maxIndexFiles = 4096
)

// ceremonyFile reports whether name belongs in a ceremony directory: the
// state file or a blob named by its SHA-256.
func ceremonyFile(name string) bool {
	if name == keys.CeremonyFile {
		return true
	}
	b, err := hex.DecodeString(name)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == name
}

// runCeremonyPublish stores every file of a ceremony directory as a blob in
// the local node (which announces them in the DHT) and prints the address
// another party fetches it by.
func runCeremonyPublish(ctx context.Context, o *CeremonyOptions) error {
	if _, err := keys.OpenCeremony(o.Dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return err
	}
	c, err := dialNode(o.IO.Err, o.DataDir, "")
	if err != nil {
		return err
	}
	var idx ceremonyIndex
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() || !ceremonyFile(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(o.Dir, e.Name()))
		if err != nil {
			return err
		}
		info, err := c.PutPublicBlob(ctx, b)
		if err != nil {
			return err
		}
		idx.Files = append(idx.Files, indexFile{Name: e.Name(), Digest: info.Digest, Size: info.Size})
		total += info.Size
	}
	ib, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	info, err := c.PutPublicBlob(ctx, ib)
	if err != nil {
		return err
	}
	n, err := c.Node(ctx)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("%s:%d", info.Digest, info.Size)
	fmt.Fprintln(o.IO.Out, addr)
	fmt.Fprintf(o.IO.Err, "published %d files (%s) through node %s; the next party runs:\n  infernet ceremony fetch %s DIR --from %s\n",
		len(idx.Files), humanBytes(total), n.ID, addr, n.ID)
	return nil
}

// runCeremonyFetch downloads a published ceremony through the local node
// into a new directory, checking every file against its digest.
func runCeremonyFetch(ctx context.Context, o *CeremonyOptions) error {
	d, size, err := parseCeremonyAddress(o.Address)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.Dir); err == nil {
		return fmt.Errorf("%s exists: fetch into a new directory", o.Dir)
	}
	c, err := dialNode(o.IO.Err, o.DataDir, "")
	if err != nil {
		return err
	}
	get := func(d digest.Digest, size int64) ([]byte, error) {
		if err := c.FetchBlob(ctx, d, size, o.From); err != nil {
			return nil, err
		}
		return c.Blob(ctx, d, size)
	}
	ib, err := get(d, size)
	if err != nil {
		return fmt.Errorf("ceremony index: %w", err)
	}
	var idx ceremonyIndex
	dec := json.NewDecoder(bytes.NewReader(ib))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil || len(idx.Files) > maxIndexFiles {
		return fmt.Errorf("ceremony index: malformed (%d files): %v", len(idx.Files), err)
	}
	state := false
	for _, f := range idx.Files {
		// Blob files are named by their own digest; nothing else may land in DIR.
		if !ceremonyFile(f.Name) || (f.Name != keys.CeremonyFile && f.Name != f.Digest.String()) || f.Size < 0 {
			return fmt.Errorf("ceremony index: bad entry %q", f.Name)
		}
		state = state || f.Name == keys.CeremonyFile
	}
	if !state {
		return fmt.Errorf("ceremony index: no %s", keys.CeremonyFile)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.Dir)), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var total int64
	for _, f := range idx.Files {
		b, err := get(f.Digest, f.Size)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f.Name), b, 0o644); err != nil {
			return err
		}
		total += f.Size
	}
	if err := os.Rename(tmp, o.Dir); err != nil { // whole, or not at all
		return err
	}
	cer, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	next := "contribute"
	if cer.Stage() == keys.StageSealed {
		next = "install" // a sealed ceremony takes no more contributions
	}
	fmt.Fprintf(o.IO.Out, "fetched %d files (%s) of the %s ceremony into %s (%s): verify, then %s\n",
		len(idx.Files), humanBytes(total), cer.State().Template, o.Dir, cer.Stage(), next)
	return nil
}

// parseCeremonyAddress parses DIGEST:SIZE, as publish prints it.
func parseCeremonyAddress(s string) (digest.Digest, int64, error) {
	ds, ss, ok := strings.Cut(s, ":")
	d, err := digest.Parse(ds)
	size, serr := strconv.ParseInt(ss, 10, 64)
	if !ok || err != nil || serr != nil || size <= 0 || size > maxIndexBytes {
		return d, 0, errors.New("ceremony address: want DIGEST:SIZE, as `infernet ceremony publish` prints it")
	}
	return d, size, nil
}
