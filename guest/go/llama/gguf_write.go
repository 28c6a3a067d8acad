package llama

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"

	"github.com/infernet/infernet/abi"
)

// GGUFWriter writes a GGUF v3 file: metadata set with Set, tensors added
// with AddTensor, then WriteTo. Tensor data is asked for one tensor at a
// time while writing, so a large model need not be held in memory.
type GGUFWriter struct {
	kvs     []KV
	kv      map[string]int
	tensors []ggufTensor
	names   map[string]bool
}

// ggufTensor is a tensor to write and the source of its bytes.
type ggufTensor struct {
	TensorInfo
	data func() ([]byte, error)
}

// NewGGUFWriter returns an empty writer.
func NewGGUFWriter() *GGUFWriter {
	return &GGUFWriter{kv: map[string]int{}, names: map[string]bool{}}
}

// Set sets key to value, which has one of the Go types ReadGGUF returns
// (see ValueType); a key set again keeps its place. general.alignment,
// a uint32, sets the alignment of the tensor data (DefaultAlignment if
// unset).
func (w *GGUFWriter) Set(key string, value any) error {
	if len(key) == 0 || len(key) > maxGGUFKeyLen {
		return fmt.Errorf("llama: gguf key of %d bytes", len(key))
	}
	if _, err := valueType(value, 0); err != nil {
		return fmt.Errorf("llama: gguf key %s: %w", key, err)
	}
	if key == "general.alignment" {
		a, ok := value.(uint32)
		if !ok || a < 8 || a > maxGGUFAlignment || a&(a-1) != 0 {
			return fmt.Errorf("llama: gguf general.alignment %v is not a uint32 power of two of at least 8", value)
		}
	}
	if i, ok := w.kv[key]; ok {
		w.kvs[i].Value = value
		return nil
	}
	w.kv[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{key, value})
	return nil
}

// AddTensor adds the tensor name of dtype (one that GGUF stores:
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K, rows of
// whole blocks) and row-major dims; data returns its bytes (TensorInfo.Bytes)
// when WriteTo reaches it.
func (w *GGUFWriter) AddTensor(name string, dtype abi.DType, dims []int, data func() ([]byte, error)) error {
	t := TensorInfo{Name: name, DType: dtype, Dims: append([]int(nil), dims...)}
	if _, ok := ggmlType(dtype); !ok {
		return fmt.Errorf("llama: gguf tensor %s: type %v", name, dtype)
	}
	if len(name) == 0 || len(name) > maxGGUFNameLen || w.names[name] {
		return fmt.Errorf("llama: gguf tensor name %q empty, too long or taken", name)
	}
	if len(dims) < 1 || len(dims) > maxGGUFDims {
		return fmt.Errorf("llama: gguf tensor %s: dims %v", name, dims)
	}
	if t.Bytes() < 0 {
		return fmt.Errorf("llama: gguf tensor %s: %w", name, t.shapeErr())
	}
	for _, d := range dims {
		if d < 1 || d > maxTensorDim {
			return fmt.Errorf("llama: gguf tensor %s: dims %v", name, dims)
		}
	}
	w.names[name] = true
	w.tensors = append(w.tensors, ggufTensor{t, data})
	return nil
}

// Copy adds g's metadata and tensors to w, the tensors' bytes read from
// src (the file g was read from) when WriteTo reaches them: a file to
// rewrite with keys set (Set, after Copy) or tensors added.
func (w *GGUFWriter) Copy(g *GGUF, src io.ReaderAt) error {
	for _, kv := range g.Metadata {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for _, t := range g.Tensors {
		if err := w.CopyTensor(t, src); err != nil {
			return err
		}
	}
	return nil
}

// CopyTensor adds the tensor t of a file read with ReadGGUF to w, its
// bytes read from src, that file, when WriteTo reaches them.
func (w *GGUFWriter) CopyTensor(t TensorInfo, src io.ReaderAt) error {
	data := io.NewSectionReader(src, t.Offset, t.Bytes())
	return w.AddTensor(t.Name, t.DType, t.Dims, func() ([]byte, error) {
		b := make([]byte, data.Size())
		_, err := data.ReadAt(b, 0)
		return b, err
	})
}

// alignment returns the alignment of the tensor data.
func (w *GGUFWriter) alignment() int64 {
	if i, ok := w.kv["general.alignment"]; ok {
		return int64(w.kvs[i].Value.(uint32))
	}
	return DefaultAlignment
}

// WriteTo writes the file to dst and returns the number of bytes written.
func (w *GGUFWriter) WriteTo(dst io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriterSize(dst, 1<<16)}
	e := ggufEncoder{cw}
	cw.Write(ggufMagic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		t, _ := valueType(kv.Value, 0)
		e.u32(uint32(t))
		e.value(kv.Value)
	}
	align := w.alignment()
	var off int64
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for i := len(t.Dims) - 1; i >= 0; i-- { // fastest first
			e.u64(uint64(t.Dims[i]))
		}
		g, _ := ggmlType(t.DType)
		e.u32(g)
		e.u64(uint64(off))
		off = alignUp(off+t.Bytes(), align)
	}
	cw.pad(align)
	for _, t := range w.tensors {
		b, err := t.data()
		if err != nil {
			return cw.n, fmt.Errorf("llama: gguf tensor %s: %w", t.Name, err)
		}
		if int64(len(b)) != t.Bytes() {
			return cw.n, fmt.Errorf("llama: gguf tensor %s: %d bytes for %v %v (%d)", t.Name, len(b), t.DType, t.Dims, t.Bytes())
		}
		cw.Write(b)
		cw.pad(align)
	}
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	return cw.n, cw.err
}

// countingWriter counts the bytes written and keeps the first error.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// pad writes zeros up to a multiple of align.
func (c *countingWriter) pad(align int64) {
	c.Write(make([]byte, alignUp(c.n, align)-c.n))
}

// ggufEncoder writes GGUF's little-endian fields.
type ggufEncoder struct{ w io.Writer }

func (e ggufEncoder) u32(v uint32) { e.w.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (e ggufEncoder) u64(v uint64) { e.w.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (e ggufEncoder) str(s string) { e.u64(uint64(len(s))); io.WriteString(e.w, s) }

// value writes v, whose type valueType accepted.
func (e ggufEncoder) value(v any) {
	le := binary.LittleEndian
	switch v := v.(type) {
	case uint8:
		e.w.Write([]byte{v})
	case int8:
		e.w.Write([]byte{byte(v)})
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		e.w.Write([]byte{b})
	case uint16:
		e.w.Write(le.AppendUint16(nil, v))
	case int16:
		e.w.Write(le.AppendUint16(nil, uint16(v)))
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	case string:
		e.str(v)
	case []uint8:
		array(e, TypeUint8, v)
	case []int8:
		array(e, TypeInt8, v)
	case []bool:
		array(e, TypeBool, v)
	case []uint16:
		array(e, TypeUint16, v)
	case []int16:
		array(e, TypeInt16, v)
	case []uint32:
		array(e, TypeUint32, v)
	case []int32:
		array(e, TypeInt32, v)
	case []float32:
		array(e, TypeFloat32, v)
	case []uint64:
		array(e, TypeUint64, v)
	case []int64:
		array(e, TypeInt64, v)
	case []float64:
		array(e, TypeFloat64, v)
	case []string:
		array(e, TypeString, v)
	case []any:
		array(e, TypeArray, v)
	}
}

func array[T any](e ggufEncoder, t ValueType, a []T) {
	e.u32(uint32(t))
	e.u64(uint64(len(a)))
	for _, x := range a {
		e.value(x) // an inner array brings its own type and length
	}
}

// valueType returns the GGUF type of a Go value (see ValueType), checking
// the elements of nested arrays; depth counts enclosing arrays.
func valueType(v any, depth int) (ValueType, error) {
	switch v := v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		if len(v) > maxGGUFString {
			return 0, fmt.Errorf("string of %d bytes", len(v))
		}
		return TypeString, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []uint64, []int64, []float64, []string, []any:
		if depth >= maxGGUFDepth {
			return 0, fmt.Errorf("arrays nested deeper than %d", maxGGUFDepth)
		}
		if n := reflect.ValueOf(v).Len(); n > maxGGUFArray {
			return 0, fmt.Errorf("array of %d elements", n)
		}
		if a, ok := v.([]any); ok {
			for _, x := range a {
				if t, err := valueType(x, depth+1); err != nil {
					return 0, err
				} else if t != TypeArray {
					return 0, fmt.Errorf("an []any holds a %T: only arrays go in an array of arrays", x)
				}
			}
		}
		if a, ok := v.([]string); ok {
			for _, s := range a {
				if len(s) > maxGGUFString {
					return 0, fmt.Errorf("string of %d bytes", len(s))
				}
			}
		}
		return TypeArray, nil
	}
	return 0, fmt.Errorf("%T is not a GGUF value", v)
}
