package circuits

import (
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/std/math/bits"
)

// In-circuit SHA-256 of a 32-byte message on bits, for R1CS: a bitwise AND
// costs one constraint and an addition mod 2^32 one bit decomposition, about
// 25.5k constraints for the block and no in-proof commitment. std/hash/sha2
// (std/math/uints lookup tables) takes about 165k constraints and commits to
// ~150k wires, which costs two more MSMs and field inversions in the solver;
// with it the 256-byte Exchange proved 8× slower (measured side by side).

// word is a 32-bit value as bits, least significant first. A bit is a
// boolean variable, a linear expression of booleans that is itself 0 or 1,
// or a constant 0/1, which gnark folds.
type word [32]frontend.Variable

var sha256IV = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

var sha256K = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

func constWord(v uint32) word {
	var w word
	for i := range w {
		w[i] = int((v >> i) & 1)
	}
	return w
}

// sha256Bits returns SHA-256(msg) for a 32-byte message given as 256 bits
// (msg[8i+k] is bit k of byte i, least significant first; the caller
// constrains them to be boolean). The digest is 8 big-endian words as
// field elements, each constrained to [0, 2^32).
func sha256Bits(api frontend.API, msg []frontend.Variable) [8]frontend.Variable {
	if len(msg) != 8*KeySize {
		panic("sha256Bits: message must be 256 bits")
	}
	// One block: the message words, then the padding 0x80…, length 256.
	var w [64]word
	for j := range 8 {
		for i := range 32 {
			w[j][i] = msg[8*(4*j+3-i/8)+i%8] // big-endian words
		}
	}
	w[8] = constWord(0x80000000)
	for j := 9; j < 15; j++ {
		w[j] = constWord(0)
	}
	w[15] = constWord(8 * KeySize)
	for t := 16; t < 64; t++ {
		s0 := xor3(api, rotr(w[t-15], 7), rotr(w[t-15], 18), shr(w[t-15], 3))
		s1 := xor3(api, rotr(w[t-2], 17), rotr(w[t-2], 19), shr(w[t-2], 10))
		w[t] = addMod32(api, 34, s1, w[t-7], s0, w[t-16])
	}

	var v [8]word
	for i := range v {
		v[i] = constWord(sha256IV[i])
	}
	for t := range 64 {
		a, b, c, d, e, f, g, h := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		s1 := xor3(api, rotr(e, 6), rotr(e, 11), rotr(e, 25))
		s0 := xor3(api, rotr(a, 2), rotr(a, 13), rotr(a, 22))
		var ch, maj word
		for i := range 32 {
			ch[i] = api.Add(g[i], api.Mul(e[i], api.Sub(f[i], g[i])))
			bc := api.Mul(b[i], c[i])
			maj[i] = api.Add(bc, api.Mul(a[i], api.Sub(api.Add(b[i], c[i]), api.Mul(2, bc))))
		}
		k := constWord(sha256K[t])
		// Sums of 6 and 7 words are below 2^35.
		newE := addMod32(api, 35, d, h, s1, ch, k, w[t])
		newA := addMod32(api, 35, h, s1, ch, k, w[t], s0, maj)
		v = [8]word{newA, a, b, c, newE, e, f, g}
	}
	var out [8]frontend.Variable
	for i := range out {
		out[i] = value(api, addMod32(api, 33, constWord(sha256IV[i]), v[i]))
	}
	return out
}

// xor3 returns x ⊕ y ⊕ z bitwise: a ⊕ b = a + b − 2ab, two constraints a bit.
func xor3(api frontend.API, x, y, z word) word {
	var r word
	for i := range r {
		r[i] = xor(api, xor(api, x[i], y[i]), z[i])
	}
	return r
}

func xor(api frontend.API, a, b frontend.Variable) frontend.Variable {
	return api.Sub(api.Add(a, b), api.Mul(2, api.Mul(a, b)))
}

func rotr(x word, n int) word {
	var r word
	for i := range r {
		r[i] = x[(i+n)%32]
	}
	return r
}

func shr(x word, n int) word {
	var r word
	for i := range r {
		if i+n < 32 {
			r[i] = x[i+n]
		} else {
			r[i] = 0
		}
	}
	return r
}

// value returns the integer of a word (a linear combination: no constraint).
func value(api frontend.API, x word) frontend.Variable {
	terms := make([]frontend.Variable, 32)
	for i := range x {
		terms[i] = api.Mul(x[i], pow2(i))
	}
	return sum(api, terms)
}

// addMod32 returns (Σ words) mod 2^32 by decomposing the sum into nbBits
// booleans, which must bound it (nbBits > 32 for the carries).
func addMod32(api frontend.API, nbBits int, words ...word) word {
	terms := make([]frontend.Variable, len(words))
	for i := range words {
		terms[i] = value(api, words[i])
	}
	b := bits.ToBinary(api, sum(api, terms), bits.WithNbDigits(nbBits))
	return word(b[:32])
}
