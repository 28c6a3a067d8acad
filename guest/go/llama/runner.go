//go:build !wasip1

package llama

// Runner returns the runner guest: the WebAssembly module that reads a
// model from the job's data files and answers Requests (see the package
// documentation). It is built from ./runner and embedded in this package.
func Runner() []byte { return runnerWasm }

// runnerWasm is set by the go:embed of the built module.
var runnerWasm []byte
