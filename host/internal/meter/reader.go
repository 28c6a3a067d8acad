package meter

import (
	"fmt"
	"unicode/utf8"
)

// offsetError is a decoding failure at an absolute byte offset of the input
// module. Instrument wraps it with the section and function it occurred in.
type offsetError struct {
	offset int
	msg    string
}

func (e *offsetError) Error() string { return fmt.Sprintf("offset %#x: %s", e.offset, e.msg) }

// reader decodes a window of the input module. Errors are sticky: after the
// first one every read returns zero values and the reader looks exhausted, so
// callers check err once per loop iteration instead of after every read.
type reader struct {
	buf  []byte
	pos  int
	base int // absolute offset of buf[0] in the module, for error messages
	err  error
}

func newReader(buf []byte, base int) *reader { return &reader{buf: buf, base: base} }

// fail records the first error at the current position.
func (r *reader) fail(format string, args ...any) {
	r.failAt(r.pos, format, args...)
}

func (r *reader) failAt(pos int, format string, args ...any) {
	if r.err == nil {
		r.err = &offsetError{offset: r.base + pos, msg: fmt.Sprintf(format, args...)}
	}
	r.pos = len(r.buf)
}

func (r *reader) remaining() int { return len(r.buf) - r.pos }

func (r *reader) byte() byte {
	if p := r.pos; p < len(r.buf) {
		r.pos = p + 1
		return r.buf[p]
	}
	return r.eof()
}

// eof fails with "unexpected end".
func (r *reader) eof() byte {
	r.fail("unexpected end")
	return 0
}

// bytes returns the next n bytes without copying.
func (r *reader) bytes(n int) []byte {
	if n < 0 || n > r.remaining() {
		r.fail("unexpected end: need %d bytes, have %d", n, r.remaining())
		return nil
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b
}

// u32 reads an unsigned LEB128 value of at most 5 bytes whose unused high
// bits are zero, as the spec requires. The common one-byte case comes first.
func (r *reader) u32() uint32 {
	if p := r.pos; p < len(r.buf) && r.buf[p] < 0x80 {
		r.pos = p + 1
		return uint32(r.buf[p])
	}
	return r.u32Slow()
}

func (r *reader) u32Slow() uint32 {
	start := r.pos
	var v uint32
	for i := 0; i < 5; i++ {
		if r.pos >= len(r.buf) {
			r.fail("unexpected end in LEB128")
			return 0
		}
		b := r.buf[r.pos]
		r.pos++
		v |= uint32(b&0x7f) << (7 * i)
		if b < 0x80 {
			if i == 4 && b > 0x0f {
				r.failAt(start, "u32 LEB128 overflows 32 bits")
				return 0
			}
			return v
		}
	}
	r.failAt(start, "u32 LEB128 longer than 5 bytes")
	return 0
}

// signed reads a signed LEB128 value of the given bit width (32, 33 or 64),
// rejecting encodings that are too long or whose unused bits in the last
// byte are not a sign extension. The common one-byte case comes first.
func (r *reader) signed(bits int) int64 {
	if p := r.pos; p < len(r.buf) && r.buf[p] < 0x80 {
		r.pos = p + 1
		return int64(int8(r.buf[p]<<1) >> 1) // sign-extend 7 bits
	}
	return r.signedSlow(bits)
}

func (r *reader) signedSlow(bits int) int64 {
	start := r.pos
	maxLen := (bits + 6) / 7
	var v int64
	for i := 0; i < maxLen; i++ {
		if r.pos >= len(r.buf) {
			r.fail("unexpected end in LEB128")
			return 0
		}
		b := r.buf[r.pos]
		r.pos++
		v |= int64(b&0x7f) << (7 * i)
		if b >= 0x80 {
			continue
		}
		shift := 7 * (i + 1)
		if shift < 64 && b&0x40 != 0 {
			v |= -1 << shift // sign-extend
		}
		if i == maxLen-1 {
			// Bits of the last byte beyond the value's width must all
			// equal the sign bit.
			used := bits - 7*i // value bits carried by this byte
			unused := (b & 0x7f) >> (used - 1)
			if unused != 0 && unused != 0x7f>>(used-1) {
				r.failAt(start, "s%d LEB128 overflows", bits)
				return 0
			}
		}
		return v
	}
	r.failAt(start, "s%d LEB128 longer than %d bytes", bits, maxLen)
	return 0
}

// count reads a vector length and checks that at least minSize bytes per
// element remain, so hostile counts cannot drive allocation or long loops.
func (r *reader) count(minSize int) int {
	start := r.pos
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(r.remaining()) {
		r.failAt(start, "vector length %d exceeds remaining %d bytes", n, r.remaining())
		return 0
	}
	return int(n)
}

// name reads a length-prefixed UTF-8 name.
func (r *reader) name() []byte {
	start := r.pos
	n := r.u32()
	b := r.bytes(int(min(n, uint32(len(r.buf)+1))))
	if r.err == nil && !utf8.Valid(b) {
		r.failAt(start, "name is not valid UTF-8")
		return nil
	}
	return b
}

// beginSized reserves room for a u32 size prefix in front of what is
// appended next; endSized fills it in.
func beginSized(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0, 0), len(b) + 5
}

// endSized writes the minimal size prefix of b[start:] and moves the
// content up against it.
func endSized(b []byte, start int) []byte {
	n := len(b) - start
	var tmp [5]byte
	size := appendU32(tmp[:0], uint32(n))
	at := start - 5
	copy(b[at+len(size):], b[start:])
	copy(b[at:], size)
	return b[:at+len(size)+n]
}

// appendU32 appends v as minimal unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendS64 appends v as minimal signed LEB128.
func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// sizeU32 is the length of v as minimal unsigned LEB128.
func sizeU32(v uint32) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
