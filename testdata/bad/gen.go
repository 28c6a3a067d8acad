//go:build ignore

// gen writes the bad modules that are not written in WAT, deterministically,
// so that rebuilding them gives the same bytes:
//
//	go run gen.go garbage        > garbage.wasm
//	go run gen.go garbage_header > garbage_header.wasm
//	go run gen.go locals_bomb    > locals_bomb.wasm
//	go run gen.go nesting_bomb   > nesting_bomb.wasm
//
// (truncated.wasm is made by the Makefile with head.)
package main

import (
	"bytes"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run gen.go garbage|garbage_header|locals_bomb|nesting_bomb")
		os.Exit(2)
	}
	var out []byte
	switch os.Args[1] {
	case "garbage":
		// garbage.wasm: 4 KiB of pseudo-random bytes. Not a module at all:
		// the sandbox should refuse it at compile time (bad magic number).
		out = random(1, 4096)
	case "garbage_header":
		// garbage_header.wasm: a valid header ("\0asm", version 1) followed by
		// 4 KiB of pseudo-random bytes, so the decoder gets past the magic
		// number and must cope with nonsense section ids and lengths. The
		// sandbox should refuse it at compile time.
		out = append([]byte("\x00asm\x01\x00\x00\x00"), random(2, 4096)...)
	case "locals_bomb":
		out = localsBomb()
	case "nesting_bomb":
		out = nestingBomb()
	default:
		fmt.Fprintln(os.Stderr, "gen: unknown output", os.Args[1])
		os.Exit(2)
	}
	os.Stdout.Write(out)
}

// random returns n bytes of splitmix64 output for the given seed.
func random(seed uint64, n int) []byte {
	b := make([]byte, 0, n+8)
	for len(b) < n {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		for i := 0; i < 8; i++ {
			b = append(b, byte(z>>(8*i)))
		}
	}
	return b[:n]
}

// nestingBomb returns nesting_bomb.wasm: _start is 100,000 nested empty
// blocks (300 KB), which wazero v1.11.0 takes 30 s to minutes of CPU to
// compile; a byte changed anywhere defeats a cache keyed by digest. The
// sandbox should refuse it before compiling (control nesting over its
// limit), in well under a second.
func nestingBomb() []byte {
	const n = 100_000
	body := []byte{0} // no locals
	body = append(body, bytes.Repeat([]byte{0x02, 0x40}, n)...)
	body = append(body, bytes.Repeat([]byte{0x0b}, n+1)...)
	return commandModule(body)
}

// commandModule returns a module of one page of memory and one function,
// _start, of type [] -> [] with the given body (locals, code and end).
func commandModule(body []byte) []byte {
	var m bytes.Buffer
	m.WriteString("\x00asm\x01\x00\x00\x00")
	section := func(id byte, b ...byte) {
		m.WriteByte(id)
		m.Write(uleb(uint64(len(b))))
		m.Write(b)
	}
	section(1, 1, 0x60, 0, 0) // types: [] -> []
	section(3, 1, 0)          // functions: one, of type 0
	section(5, 1, 0, 1)       // memory: min 1 page
	section(7, 2,             // exports:
		6, '_', 's', 't', 'a', 'r', 't', 0, 0, // "_start" = func 0
		6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0) // "memory" = memory 0
	code := append([]byte{1}, uleb(uint64(len(body)))...)
	section(10, append(code, body...)...) // code: one body
	return m.Bytes()
}

// localsBomb returns locals_bomb.wasm: a tiny module whose _start declares
// 2^32-1 locals of type i64 in one 6-byte entry of its code section (the
// count is run-length encoded). The binary is valid, but compiling it
// naively means allocating and zeroing 32 GiB of locals. The sandbox should
// refuse it at compile time (too many locals) within its time and memory
// limits.
func localsBomb() []byte {
	body := []byte{1}                        // one locals entry:
	body = append(body, uleb(0xFFFFFFFF)...) // 2^32-1 locals
	body = append(body, 0x7E)                // of type i64
	return commandModule(append(body, 0x0B)) // end
}

// uleb returns x in unsigned LEB128.
func uleb(x uint64) []byte {
	var b []byte
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if x != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
