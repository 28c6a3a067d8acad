// Package circuits holds infernet's fixed-template Groth16 circuits over BN254
// and the native (out-of-circuit) Go functions that produce their witnesses.
//
// Two families are provided:
//
//   - GEMM and CommittedGEMM prove that C = A·B over the integers for n×n
//     int32 matrices with a Freivalds check whose challenge comes from gnark's
//     in-proof commitment. GEMM takes A, B and C as public inputs; CommittedGEMM
//     keeps them private and exposes one Poseidon2 digest per matrix (see
//     MatrixDigest), so that a party without the matrices can verify.
//   - Exchange is a zero-knowledge contingent payment (fair exchange) for
//     small outputs: it proves that a ciphertext decrypts, under the key whose
//     SHA-256 is a Lightning payment hash, to the plaintext with a given
//     commitment.
//
// Each template is identified by its size (n, or the plaintext length in
// bytes); a template's constraint system, and therefore its keys, never change
// for a given gnark version. Groth16 keys must come from an MPC ceremony
// (gnark's backend/groth16/bn254/mpcsetup): whoever runs groth16.Setup alone
// can forge proofs, and in a contingent payment a buyer-run setup can also
// break zero knowledge. groth16.Setup is used by the tests only.
//
// # Encodings
//
// All field elements are BN254 scalars (p ≈ 2^253.6). A Digest is the 32-byte
// big-endian canonical encoding of one. An int32 x enters a witness as the
// offset value x + 2^31 ∈ [0, 2^32); circuits subtract 2^31 in the field, so
// inside them a negative x is p − |x|. Hashes are Poseidon2 in gnark's
// Merkle–Damgård mode (width 2, 6 full and 50 partial rounds, IV 0), the same
// on both sides (gnark-crypto ecc/bn254/fr/poseidon2 and gnark
// std/hash/poseidon2); each hash starts with a domain tag and has a fixed
// number of inputs per template.
//
// NOTE: Everything in this package is safe for concurrent use; circuit values
// returned by the constructors are templates for frontend.Compile and must not
// be shared with a concurrent Compile.
package circuits
