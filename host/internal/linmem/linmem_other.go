//go:build !unix

package linmem

import "github.com/tetratelabs/wazero/experimental"

func allocate(capacity, _ uint64) experimental.LinearMemory {
	return &sliceMemory{buf: make([]byte, 0, capacity)}
}
