//go:build !wasip1

package llama

import _ "embed"

// Runner returns the runner guest: the WebAssembly module that reads a
// model from the job's data files and answers Requests (see the package
// documentation). It is built from ./runner (make -C testdata) and
// embedded in this package.
func Runner() []byte { return runnerWasm }

//go:embed runner.wasm
var runnerWasm []byte
