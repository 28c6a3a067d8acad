// Package keys provides the Groth16 keys of infernet's fixed circuit
// templates: a registry of the templates by name (Templates, Compile), an
// on-disk key store indexed by circuit digest (Store, in a node's
// DataDir/keys), and multi-party ceremonies kept as directories of
// content-addressed blobs (Ceremony) whose keys a node installs only after
// verifying the whole transcript itself.
//
// # Flow
//
//	c, _ := keys.StartCeremony(dir, "gemm-64", nil) // nil: phase 1 runs in the ceremony
//	d1, _ := c.Contribute()                          // each party, on its own copy of dir
//	_ = c.SealPhase1(ctx, beacon1)                   // opens phase 2 (costly: see below)
//	d2, _ := c.Contribute()                          // each party again
//	store, _ := keys.OpenStore(filepath.Join(dataDir, keys.StoreDir))
//	_, _ = c.Finalize(ctx, beacon2, store, nil)      // seals, verifies, installs
//	// other parties: keys.OpenCeremony(copy).Install(ctx, store, report)
//	pk, _ := store.ProvingKey(circuit.Digest)        // load once, keep
//
// With a snarkjs .ptau file (a public powers-of-tau ceremony, pinned by
// its hash) phase 1 is that file and phase 2 opens at StartCeremony. The
// repository's proofs/setup/testdata/pot8_final.ptau holds 2^8 powers: too
// few for every real template (gemm-16 already needs 2^10); it serves tests.
//
// # Costs
//
// Opening phase 2 (setup.NewPhase2Start) is the costly step, and every
// verifier repeats it: gnark's Phase2.Initialize transforms the phase-1
// powers into the Lagrange basis with four FFTs over curve points (three in
// G1, one in G2), about (n/2)·log₂n full scalar multiplications each for a
// domain of n points: about 35 s of CPU at 2^14 (gemm-64) and 80–90 s at
// 2^15 (exchange-256, committed-gemm-16), growing as n·log n.
package keys
