// Package client is the role that hands jobs to the network and decides
// what their results are worth: a node's jobs as their submitter sees them.
//
// A job (Client.Submit) is announced, its replicas drawn from the
// providers whose adverts match its terms (one replica per operator,
// weighted by reputation, newcomers on probation), assigned over a stream
// each (client.go), and the results they sign compared (verify.go): bit for
// bit in exact mode, within a tolerance otherwise. A vote counts only where
// an established provider anchors it; where none does, the client runs the
// job itself (audit.go) and convicts whoever signed anything else. Streamed
// jobs show their output as the replicas' streams agree on it, or as the
// client's own run writes it (streamvote.go); check jobs verify a
// generation by prefill, GEMM proofs and GPU challenges what a provider
// claims (proofs.go, gpuchallenge.go); escrow.go and fair.go are the paid
// and the fair-exchange settlements of a job's replicas.
//
// The role reaches the rest of the node through Config: its settings and
// the node's parts it uses (libp2p host, peer book, blob store and service,
// database, ledger), never the whole node.
package client
