package peers

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/wire"
)

// SignResult sets res's Provider to key's peer and signs the result with it.
func SignResult(res *wire.Result, key crypto.PrivKey) error {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return err
	}
	res.Provider = []byte(id)
	b, err := res.SignedBytes()
	if err != nil {
		return err
	}
	res.Sig, err = key.Sign(b)
	return err
}

// VerifyResult checks that res's Provider signed it and that its inline
// output, when present, is the output signed for; each failure wraps
// wire.ErrBadSignature.
func VerifyResult(res *wire.Result) error {
	id, err := peer.IDFromBytes(res.Provider)
	if err != nil {
		return fmt.Errorf("%w: provider: %v", wire.ErrBadSignature, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("%w: %v", wire.ErrBadSignature, err)
	}
	b, err := res.SignedBytes()
	if err != nil {
		return err
	}
	if ok, err := pub.Verify(b, res.Sig); err != nil || !ok {
		return wire.ErrBadSignature
	}
	if len(res.Stderr) > wire.MaxResultStderr { // unsigned: a sender's word, within bounds
		return fmt.Errorf("%w: stderr of %d bytes, over %d", wire.ErrMalformed, len(res.Stderr), wire.MaxResultStderr)
	}
	return res.CheckInline()
}
