// Package tensor is the Go SDK for infernet jobs: it gives a GOOS=wasip1 guest
// the tensor operations of the "infernet" host module, which run on the
// provider's fastest hardware (or on the bit-exact reference kernel, see
// [Mode]).
//
// The contract with the host is the ABI of package
// github.com/infernet/infernet/abi (abi.Version; guests of earlier versions
// run unchanged); this package declares every function of it with
// //go:wasmimport and wraps them in an idiomatic API.
//
// # Two ways to compute
//
// Tensors named by handles live on the host, so a chain of operations stays on
// the device and only the final result is copied back:
//
//	x, _ := tensor.FromF32(input, batch, 784)
//	w, _ := tensor.FromF32(weights, 784, 10)
//	logits, err := tensor.Gemm(x, w)
//	if err != nil { ... }
//	probs, err := tensor.Softmax(logits)
//	if err != nil { ... }
//	out, err := probs.F32()
//	for _, t := range []*tensor.Tensor{x, w, logits, probs} { t.Free() }
//
// One-shot functions such as [GemmF32] work directly on Go slices, for a
// single operation on data that is already in guest memory:
//
//	c := make([]float32, m*n)
//	err := tensor.GemmF32(m, n, k, a, b, c, 0)
//
// # Errors
//
// Host failures are returned as *[Error], which wraps the host's
// [abi.Errno], so callers can test for a particular code:
//
//	if errors.Is(err, abi.ESHAPE) { ... }
//
// The package checks slice lengths and element types itself before it calls
// the host (the host can only check that a pointer lies inside linear memory);
// such failures are reported the same way, with the code the host would use.
//
// # Building
//
// Jobs are WASI command modules:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o job.wasm .
//
// On any other GOOS the package still compiles (so go build, go vet and unit
// tests of code using it work on a workstation), but every call returns
// [ErrNoHost].
package tensor
