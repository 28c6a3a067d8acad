package wire

import "github.com/libp2p/go-libp2p/core/protocol"

// Stream protocols of a node (the blob protocol is in package blobnet,
// the GPU challenge's in package challenge).
const (
	// ProtocolBid: a client asks for a bid, or a provider offers one.
	ProtocolBid protocol.ID = "/infernet/bid/1.0.0"
	// ProtocolAssign: a client hands a replica to a provider and reads its
	// updates (accepted, running, alive, result) on the same stream.
	ProtocolAssign protocol.ID = "/infernet/assign/1.0.0"
	// ProtocolResult: a provider delivers a result whose assign stream broke.
	ProtocolResult protocol.ID = "/infernet/result/1.0.0"
	// ProtocolAggregate: a client hands a whole sharded job to an aggregator,
	// which runs the shards on the network as jobs of its own, streams their
	// progress back and ends with every shard's signed results and the merged
	// output.
	ProtocolAggregate protocol.ID = "/infernet/aggregate/1.0.0"
	// ProtocolSettle: a client releases (preimage) or cancels a paid replica.
	ProtocolSettle protocol.ID = "/infernet/settle/1.0.0"
)
