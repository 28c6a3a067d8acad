package llama

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/infernet/infernet/abi"
)

// GGUF metadata value types.
type ValueType uint32

// The value types of GGUF v3. A value of each is held in Go as uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64 or
// float64; an array as a slice of those ([]string, []float32, ...), or
// []any of such slices for an array of arrays.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// size returns the encoded size of a scalar of type t, 0 for strings and
// arrays (and unknown types).
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// ggml tensor types (ggml.h's enum ggml_type) that map to ABI types.
const (
	ggmlF32  uint32 = 0
	ggmlF16  uint32 = 1
	ggmlQ4_0 uint32 = 2
	ggmlQ4_1 uint32 = 3
	ggmlQ5_0 uint32 = 6
	ggmlQ5_1 uint32 = 7
	ggmlQ8_0 uint32 = 8
	ggmlQ4_K uint32 = 12
	ggmlQ5_K uint32 = 13
	ggmlQ6_K uint32 = 14
	ggmlBF16 uint32 = 30
)

// ggmlTypes pairs each ggml type the runner reads with its ABI type. The
// quantized types keep ggml's block layout, which the ABI adopted, so a
// tensor's bytes go to the host as they lie in the file.
var ggmlTypes = [...]struct {
	ggml  uint32
	dtype abi.DType
}{
	{ggmlF32, abi.F32}, {ggmlF16, abi.F16}, {ggmlBF16, abi.BF16}, {ggmlQ8_0, abi.Q8_0},
	{ggmlQ4_0, abi.Q4_0}, {ggmlQ4_1, abi.Q4_1}, {ggmlQ5_0, abi.Q5_0}, {ggmlQ5_1, abi.Q5_1},
	{ggmlQ4_K, abi.Q4_K}, {ggmlQ5_K, abi.Q5_K}, {ggmlQ6_K, abi.Q6_K},
}

// ggmlNames are the names of ggml's other tensor types (the GGUF
// specification's), so that a file of one says which it is.
var ggmlNames = map[uint32]string{9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
	18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
	26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0"}

// ggmlName names ggml type gt.
func ggmlName(gt uint32) string {
	if n, ok := ggmlNames[gt]; ok {
		return n
	}
	return fmt.Sprintf("ggml type %d", gt)
}

// ggmlType returns the ggml type code of an ABI type.
func ggmlType(d abi.DType) (uint32, bool) {
	for _, t := range ggmlTypes {
		if t.dtype == d {
			return t.ggml, true
		}
	}
	return 0, false
}

// abiType returns the ABI type of a ggml type code.
func abiType(g uint32) (abi.DType, bool) {
	for _, t := range ggmlTypes {
		if t.ggml == g {
			return t.dtype, true
		}
	}
	return 0, false
}

// Limits of the GGUF reader, beyond the file's size.
const (
	maxGGUFTensors   = 1 << 16
	maxGGUFKVs       = 1 << 16
	maxGGUFKeyLen    = 1<<16 - 1 // the spec's limit
	maxGGUFNameLen   = 256       // tensor names (the spec says 64)
	maxGGUFString    = 1 << 26   // one string value (a chat template, a tokenizer JSON)
	maxGGUFArray     = 1 << 24   // elements of one array
	maxGGUFDepth     = 3         // arrays of arrays of ...
	maxGGUFDims      = 4
	maxGGUFAlignment = 1 << 16
)

// DefaultAlignment is GGUF's alignment of tensor data when the file does
// not set general.alignment.
const DefaultAlignment = 32

// KV is one metadata key-value pair.
type KV struct {
	Key   string
	Value any
}

// GGUF is the header of a GGUF file: its metadata and tensor infos.
type GGUF struct {
	Version  uint32
	Metadata []KV // in file order
	// Tensors are in file order, with dims row-major (GGUF's fastest-first
	// dims reversed) and offsets from the start of the file.
	Tensors    []TensorInfo
	Alignment  int64
	DataOffset int64 // where tensor data starts
	Size       int64 // the file's size

	kv      map[string]int
	tensors map[string]int
}

// Get returns the value of key.
func (g *GGUF) Get(key string) (any, bool) {
	i, ok := g.kv[key]
	if !ok {
		return nil, false
	}
	return g.Metadata[i].Value, true
}

// Tensor returns the tensor named name.
func (g *GGUF) Tensor(name string) (TensorInfo, bool) {
	i, ok := g.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	return g.Tensors[i], true
}

// Uint returns the value of key, an integer of any GGUF type, if it is
// present, non-negative and at most max.
func (g *GGUF) Uint(key string, max uint64) (v uint64, ok bool, err error) {
	x, ok := g.Get(key)
	if !ok {
		return 0, false, nil
	}
	var neg bool
	switch x := x.(type) {
	case uint8:
		v = uint64(x)
	case uint16:
		v = uint64(x)
	case uint32:
		v = uint64(x)
	case uint64:
		v = x
	case int8:
		v, neg = uint64(x), x < 0
	case int16:
		v, neg = uint64(x), x < 0
	case int32:
		v, neg = uint64(x), x < 0
	case int64:
		v, neg = uint64(x), x < 0
	default:
		return 0, true, formatErr("gguf %s is a %T, not an integer", key, x)
	}
	if neg || v > max {
		return 0, true, formatErr("gguf %s = %d not in [0, %d]", key, int64(v), max)
	}
	return v, true, nil
}

// Float returns the value of key, a float32 or float64.
func (g *GGUF) Float(key string) (v float64, ok bool, err error) {
	x, ok := g.Get(key)
	switch x := x.(type) {
	case nil:
		return 0, false, nil
	case float32:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, true, formatErr("gguf %s is a %T, not a float", key, x)
}

// String returns the value of key, a string.
func (g *GGUF) String(key string) (v string, ok bool, err error) {
	x, ok := g.Get(key)
	if !ok {
		return "", false, nil
	}
	if s, isStr := x.(string); isStr {
		return s, true, nil
	}
	return "", true, formatErr("gguf %s is a %T, not a string", key, x)
}

// ggufReader reads the header of a GGUF file, counting its position so
// that every length can be checked against what is left of the file.
type ggufReader struct {
	r    *bufio.Reader
	pos  int64
	size int64
	buf  [8]byte
}

func (d *ggufReader) read(n int) ([]byte, error) {
	if int64(n) > d.size-d.pos {
		return nil, formatErr("gguf: truncated at byte %d", d.pos)
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, formatErr("gguf at byte %d: %w", d.pos, err)
	}
	d.pos += int64(n)
	return b, nil
}

func (d *ggufReader) u32() (uint32, error) {
	b, err := d.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *ggufReader) u64() (uint64, error) {
	b, err := d.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a u64 count of items of at least unit bytes each, at most
// limit, and no more than the rest of the file can hold.
func (d *ggufReader) count(what string, limit uint64, unit int64) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	switch {
	case n > limit:
		return 0, formatErr("gguf: %s %d over the limit of %d", what, n, limit)
	case unit > 0 && n > uint64((d.size-d.pos)/unit):
		return 0, formatErr("gguf: %s %d, and only %d bytes of the file left (is it cut short?)", what, n, d.size-d.pos)
	}
	return int(n), nil
}

func (d *ggufReader) str(what string, limit uint64) (string, error) {
	n, err := d.count(what+" length", limit, 1)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return "", formatErr("gguf %s at byte %d: %w", what, d.pos, err)
	}
	d.pos += int64(n)
	return string(b), nil
}

// value reads a value of type t; depth counts enclosing arrays.
func (d *ggufReader) value(t ValueType, depth int) (any, error) {
	if t == TypeArray {
		if depth >= maxGGUFDepth {
			return nil, formatErr("gguf: arrays nested deeper than %d", maxGGUFDepth)
		}
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		return d.array(ValueType(et), depth+1)
	}
	if t == TypeString {
		return d.str("string", maxGGUFString)
	}
	if t.size() == 0 {
		return nil, formatErr("gguf: unknown value type %d", t)
	}
	b, err := d.read(t.size())
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, formatErr("gguf: bool %d", b[0])
		}
		return b[0] == 1, nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	default: // TypeFloat64
		return math.Float64frombits(le.Uint64(b)), nil
	}
}

// array reads the length and elements of an array of et. Arrays of strings
// and of numbers are read in bulk: an element at a time, each boxed in an
// any and each string its own allocation, took ~110 ms for a 32,000-token
// vocabulary's tokens, scores and types in WebAssembly, at every job's
// start.
func (d *ggufReader) array(et ValueType, depth int) (any, error) {
	unit := int64(et.size())
	switch et {
	case TypeString:
		unit = 8
	case TypeArray:
		unit = 12
	}
	if unit == 0 {
		return nil, formatErr("gguf: array of unknown type %d", et)
	}
	n, err := d.count("array length", maxGGUFArray, unit)
	if err != nil {
		return nil, err
	}
	switch et {
	case TypeUint8:
		return scalars[uint8](d, n, 1)
	case TypeInt8:
		return scalars[int8](d, n, 1)
	case TypeUint16:
		return scalars[uint16](d, n, 2)
	case TypeInt16:
		return scalars[int16](d, n, 2)
	case TypeUint32:
		return scalars[uint32](d, n, 4)
	case TypeInt32:
		return scalars[int32](d, n, 4)
	case TypeFloat32:
		return scalars[float32](d, n, 4)
	case TypeBool:
		return scalars[bool](d, n, 1)
	case TypeString:
		return d.strings(n)
	case TypeUint64:
		return scalars[uint64](d, n, 8)
	case TypeInt64:
		return scalars[int64](d, n, 8)
	case TypeFloat64:
		return scalars[float64](d, n, 8)
	default: // TypeArray
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.value(et, depth); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
}

// scalars reads n little-endian numbers or bools of size bytes each, in
// one read, with the errors reading them one by one would give.
func scalars[T uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | uint64 | int64 | float64](d *ggufReader, n, size int) ([]T, error) {
	if int64(n)*int64(size) > d.size-d.pos { // count's check makes this unreachable
		return nil, formatErr("gguf: truncated at byte %d", d.pos)
	}
	b := make([]byte, n*size)
	m, err := io.ReadFull(d.r, b)
	a := make([]T, n)
	if _, isBool := any(a).([]bool); isBool {
		for _, c := range b[:m] {
			if c > 1 {
				return nil, formatErr("gguf: bool %d", c)
			}
		}
	}
	if err != nil {
		if m%size == 0 && err == io.ErrUnexpectedEOF {
			err = io.EOF // the element that failed had no byte
		}
		return nil, formatErr("gguf at byte %d: %w", d.pos+int64(m/size*size), err)
	}
	switch a := any(a).(type) {
	case []float32: // a vocabulary's scores
		decodeF32(a, b)
	case []int32: // and its token types
		decodeI32(a, b)
	default:
		// binary.Decode calls its ByteOrder, an interface, per element,
		// which costs in WebAssembly.
		if _, err := binary.Decode(b, binary.LittleEndian, a); err != nil {
			return nil, formatErr("gguf array: %w", err) // cannot happen: b is the size of a
		}
	}
	d.pos += int64(len(b))
	return a, nil
}

func decodeF32(a []float32, b []byte) {
	for i := range a {
		a[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func decodeI32(a []int32, b []byte) {
	for i := range a {
		a[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// strings reads n strings into one buffer, then makes it one string and
// each a substring of it, with str's checks and errors. The strings wholly
// in the reader's buffer are parsed there and copied together.
func (d *ggufReader) strings(n int) ([]string, error) {
	starts, ends := make([]int, n), make([]int, n) // of each string in buf
	// Room for Llama 2's tokens (8+7 bytes each), as much as the file has.
	buf := make([]byte, 0, min(int64(n)*16, d.size-d.pos))
	for i := 0; i < n; {
		window, _ := d.r.Peek(d.r.Buffered())
		next, used := scanStrings(window, i, starts, ends, len(buf), d.size-d.pos)
		buf = append(buf, window[:used]...)
		d.r.Discard(used)
		d.pos += int64(used)
		if i = next; i == n {
			break
		}
		// String i is not whole in the buffer, or bad: read it, or say why.
		m, err := d.count("string length", maxGGUFString, 1)
		if err != nil {
			return nil, err
		}
		starts[i] = len(buf)
		buf = slices.Grow(buf, m)
		if _, err := io.ReadFull(d.r, buf[len(buf):len(buf)+m]); err != nil {
			return nil, formatErr("gguf string at byte %d: %w", d.pos, err)
		}
		buf = buf[:len(buf)+m]
		d.pos += int64(m)
		ends[i] = len(buf)
		i++
	}
	all := string(buf)
	a := make([]string, n)
	for i := range a {
		a[i] = all[starts[i]:ends[i]]
	}
	return a, nil
}

// scanStrings finds the strings from string i that are whole in window and
// pass count's checks (left is what the file has from the window on),
// setting where they will be once window is appended to a buffer at base;
// it returns the next string and the bytes of window used.
func scanStrings(window []byte, i int, starts, ends []int, base int, left int64) (int, int) {
	off := 0
	for ; i < len(ends) && len(window)-off >= 8; i++ {
		m, rest := binary.LittleEndian.Uint64(window[off:]), left-int64(off)-8
		if m > maxGGUFString || rest < 0 || m > uint64(rest) || uint64(len(window)-off-8) < m {
			break
		}
		starts[i] = base + off + 8
		off += 8 + int(m)
		ends[i] = base + off
	}
	return i, off
}

// ReadGGUF reads the header of the GGUF file r of size bytes (version 2 or
// 3, little-endian): its metadata and tensor infos, every tensor of a type
// in ggmlTypes (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or
// Q6_K; each tensor its own), its rows whole blocks of its type, and lying
// within the file. It reads no tensor data.
func ReadGGUF(r io.ReaderAt, size int64) (*GGUF, error) {
	d := &ggufReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	magic, err := d.read(4)
	if err != nil {
		return nil, err
	}
	if string(magic) != string(ggufMagic) {
		return nil, formatErr("not a GGUF file (magic %q)", magic)
	}
	g := &GGUF{Alignment: DefaultAlignment, Size: size, kv: map[string]int{}, tensors: map[string]int{}}
	if g.Version, err = d.u32(); err != nil {
		return nil, err
	}
	if g.Version != 2 && g.Version != 3 {
		return nil, formatErr("gguf version %d (2 and 3 are read)", g.Version)
	}
	// A tensor info takes at least 8+4+8+4+8 bytes, a KV 8+4+1.
	nt, err := d.count("tensor count", maxGGUFTensors, 32)
	if err != nil {
		return nil, err
	}
	nkv, err := d.count("metadata count", maxGGUFKVs, 13)
	if err != nil {
		return nil, err
	}
	g.Metadata = make([]KV, 0, nkv)
	for range nkv {
		key, err := d.str("key", maxGGUFKeyLen)
		if err != nil {
			return nil, err
		}
		if _, dup := g.kv[key]; dup {
			return nil, formatErr("gguf: key %q twice", key)
		}
		t, err := d.u32()
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return nil, fmt.Errorf("%w, in key %q", err, key)
		}
		g.kv[key] = len(g.Metadata)
		g.Metadata = append(g.Metadata, KV{key, v})
	}
	if a, ok, err := g.Uint("general.alignment", maxGGUFAlignment); err != nil {
		return nil, err
	} else if ok {
		if a == 0 || a%8 != 0 || a&(a-1) != 0 {
			return nil, formatErr("gguf general.alignment %d is not a power of two of at least 8", a)
		}
		g.Alignment = int64(a)
	}
	g.Tensors = make([]TensorInfo, 0, nt)
	rel := make([]uint64, 0, nt)
	for range nt {
		t, off, err := d.tensorInfo()
		if err != nil {
			return nil, err
		}
		if _, dup := g.tensors[t.Name]; dup {
			return nil, formatErr("gguf: tensor %q twice", t.Name)
		}
		g.tensors[t.Name] = len(g.Tensors)
		g.Tensors = append(g.Tensors, t)
		rel = append(rel, off)
	}
	g.DataOffset = alignUp(d.pos, g.Alignment)
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if rel[i]%uint64(g.Alignment) != 0 || rel[i] > uint64(size) {
			return nil, formatErr("gguf tensor %s: offset %d not aligned to %d or past the file", t.Name, rel[i], g.Alignment)
		}
		t.Offset = g.DataOffset + int64(rel[i])
		n := t.Bytes()
		if n < 0 {
			return nil, formatErr("gguf tensor %s: %v", t.Name, t.shapeErr())
		}
		if t.Offset > size || n > size-t.Offset {
			return nil, formatErr("gguf tensor %s: %v %v at %d does not fit the file of %d bytes", t.Name, t.DType, t.Dims, t.Offset, size)
		}
	}
	return g, nil
}

// tensorInfo reads one tensor info; the offset is relative to the data.
func (d *ggufReader) tensorInfo() (TensorInfo, uint64, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str("tensor name", maxGGUFNameLen); err != nil {
		return t, 0, err
	}
	nd, err := d.u32()
	if err != nil {
		return t, 0, err
	}
	if nd < 1 || nd > maxGGUFDims {
		return t, 0, formatErr("gguf tensor %s: %d dims (1 to %d)", t.Name, nd, maxGGUFDims)
	}
	t.Dims = make([]int, nd)
	elems := uint64(1)
	for i := range t.Dims {
		n, err := d.u64()
		if err != nil {
			return t, 0, err
		}
		// Its bytes are checked once the type is known; here, that it could
		// fit the file at all: block types hold under 2 values a byte.
		if n < 1 || n > maxTensorDim || elems > 2*uint64(d.size)/n {
			return t, 0, formatErr("gguf tensor %s: dim %d of %d", t.Name, i, n)
		}
		elems *= n
		t.Dims[int(nd)-1-i] = int(n) // GGUF lists the fastest dim first
	}
	gt, err := d.u32()
	if err != nil {
		return t, 0, err
	}
	var ok bool
	if t.DType, ok = abiType(gt); !ok {
		return t, 0, formatErr("gguf tensor %s is %s, which the runner does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K: a Q4_K_M, Q5_K_M, Q6_K or Q8_0 file of the model)", t.Name, ggmlName(gt))
	}
	off, err := d.u64()
	return t, off, err
}

// alignUp rounds n up to a multiple of a.
func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
