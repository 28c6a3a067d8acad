//go:build !wasip1

package chattemplate

import _ "embed"

// Module returns the guest: the WebAssembly command module built from
// ./renderer (make -C testdata) and embedded in this package.
func Module() []byte { return rendererWasm }

//go:embed renderer.wasm
var rendererWasm []byte
