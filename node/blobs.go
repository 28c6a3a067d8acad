package node

import (
	"context"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
)

// PutBlob stores b in the node's blob store. It is not announced in the
// DHT until a job names it as its module or a data blob (Submit): it may
// be an input, which stays private.
func (n *Node) PutBlob(ctx context.Context, b []byte) (blob.Digest, error) {
	return n.blobs.PutBytes(b)
}

// PutBlobFrom stores the bytes of r, at most max of them, streamed to disk
// (a data blob may be larger than memory), and returns its digest and
// size; like PutBlob, it announces nothing. More than max bytes is an
// error wrapping blob.ErrTooLarge, and nothing is stored.
func (n *Node) PutBlobFrom(ctx context.Context, r io.Reader, max int64) (blob.Digest, int64, error) {
	return n.blobs.Put(r, max)
}

// Publish makes local blob d public for good (a module, data blob or a
// file meant for anyone) and announces it in the DHT.
func (n *Node) Publish(d blob.Digest) {
	n.access.Publish(d)
	n.provideAsync(d)
}

// provideAsync announces a local blob in the DHT in the background: nobody
// waits for it, and providers that need the blob find it there. A private
// blob (an input) is never announced.
func (n *Node) provideAsync(d blob.Digest) {
	if n.access.Hidden(d) {
		return
	}
	n.roles.Go(func() { // an API call's: it may come as the node closes
		ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
		defer cancel()
		if err := n.blobSvc.Provide(ctx, d); err != nil && n.ctx.Err() == nil {
			n.log.Debug("provide", "blob", d.Short(), "err", err)
		}
	})
}

// FetchBlob makes the blob d of size bytes local, from hints or the peers
// that announce it in the DHT, and announces it in turn; an input here
// (private, Access.Input) comes from hints alone and is not announced:
// looked up in the DHT, its digest had gone to every server on the way
// (a large blob's spare fetch workers asked even while a hint served it).
func (n *Node) FetchBlob(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error {
	if _, ok := n.blobs.Has(d); ok {
		return nil
	}
	fetch := n.blobSvc.Fetch
	if n.access.Hidden(d) {
		fetch = n.blobSvc.FetchDirect
	}
	if err := fetch(ctx, d, size, hints); err != nil {
		return err
	}
	n.provideAsync(d)
	return nil
}

// Blob returns a stored blob's bytes (at most max).
func (n *Node) Blob(d blob.Digest, max int64) ([]byte, error) { return n.blobs.Bytes(d, max) }

// BlobSpace is the blob store's accounting against --blob-quota: what an
// operator watches the disk by (/metrics).
func (n *Node) BlobSpace() blob.Space { return n.blobs.Space() }
