// Package setup runs and verifies a multi-party Groth16 trusted setup
// ("ceremony") for BN254 circuits, on top of gnark v0.16.3's
// backend/groth16/bn254/mpcsetup package (the BGM17 protocol,
// https://eprint.iacr.org/2017/1050).
//
// # Why
//
// A Groth16 proving/verifying key pair is derived from secret field elements
// (τ, α, β, δ and one σ per in-circuit commitment: the "toxic waste").
// Whoever knows them can forge proofs. groth16.Setup draws them in a single
// process, so that process's owner can forge. In this ceremony every
// contributor multiplies fresh secrets of its own into the public parameters
// and publishes a proof of knowledge; the resulting keys are unforgeable as
// long as at least ONE contributor of each phase erased its secrets. A party
// that wants to rely on the keys (for example both the client and the provider
// of a contingent payment) therefore contributes itself, and checks that its
// own contribution is part of a transcript that verifies.
//
// # Flow
//
// Phase 1 ("powers of tau") is circuit independent and is sized by a domain
// size N, a power of two no smaller than the constraint count of the largest
// circuit it will serve:
//
//	s0, _ := InitialPhase1(N)         // deterministic, anyone can recompute it
//	c1, _ := ContributePhase1(s0)     // party 1, on its own machine
//	_ = VerifyPhase1Step(s0, c1)      // anyone
//	c2, _ := ContributePhase1(c1)     // party 2
//	_ = VerifyPhase1Step(c1, c2)
//	commons, _ := FinalizePhase1(N, beacon1, [][]byte{c1, c2})
//
// Phase 2 is per circuit (per compiled R1CS):
//
//	start, _ := NewPhase2Start(ccs, commons)  // deterministic, expensive, cacheable
//	d1, _ := ContributePhase2(start.Bytes())  // e.g. the client
//	d2, _ := ContributePhase2(d1)             // e.g. the provider
//	pk, vk, _ := start.Finalize(beacon2, [][]byte{d1, d2})
//
// Every contribution is an opaque byte string: the full serialised state after
// that contribution, in gnark's canonical compressed encoding. Each
// contribution embeds, as its "challenge", the SHA-256 of the blob it was built
// on, and its proofs of knowledge are bound to that challenge. The blobs can
// thus be stored content addressed by SHA-256 (see Digest and Manifest) and
// form a hash chain that starts at the deterministic initial state. This
// package rejects non-canonical encodings so that a blob's SHA-256 is exactly
// the challenge the next contributor signs over.
//
// VerifyTranscript re-checks a complete ceremony from the R1CS, the beacons
// and the blobs alone, and returns the proving and verifying keys, which are
// ordinary gnark keys for groth16.Prove / groth16.Verify.
//
// # Beacons
//
// gnark requires each phase to be finalised ("sealed") with a public random
// beacon: a value that nobody could predict before the last contribution of
// the phase was published. It is hashed together with the last contribution
// into one more, publicly reproducible, contribution. It adds no secrecy; it
// stops the last contributor from grinding its contribution to bias the final
// parameters, which is what the BGM17 security proof needs. This package
// recommends (see BitcoinBlockBeacon) the hash of a Bitcoin block at a height
// announced before the phase starts and reached only after its contribution
// deadline: infernet nodes already follow the Bitcoin chain through their
// Lightning node, so every verifier can check the value without trusting a
// new party, and biasing it costs a miner a block reward per try. A drand
// (League of Entropy) round number fixed in advance is the other usual choice.
//
// # Phase 1 from a public ceremony
//
// A real network should not run its own phase 1: ReadPtau imports the
// circuit-independent parameters from a snarkjs ".ptau" file (for example the
// Perpetual Powers of Tau / Hermez "powersOfTau28_hez_final_NN.ptau" files,
// BN254, up to 2^28), truncated to the domain size needed, checks that they
// are well formed, and returns them in the form phase 2 uses
// (mpcsetup.SrsCommons). VerifyPhase2Transcript then verifies a ceremony whose
// phase 1 is such a file, pinned by its SHA-256.
package setup
