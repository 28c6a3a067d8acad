package tensorhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// guestMemory returns the memory of a module that has nothing else: one
// page, for the arguments of host functions called directly.
func guestMemory(t *testing.T) api.Memory {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	// (module (memory (export "memory") 1))
	wasm := []byte("\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01\x07\x0a\x01\x06memory\x02\x00")
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod.Memory()
}

// weights is the data file of these tests: 16 f32, 0.5·i.
func weights(t *testing.T) (string, []byte) {
	var b []byte
	for i := range 16 {
		b = append(b, f32bytes(float32(i)/2)...)
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// fromData calls tensor_from_data for file "w" with the name at 0 and the
// dims at 16 of mem.
func fromData(s *Session, mem api.Memory, off int32, dt abi.DType, dims ...int32) int32 {
	mem.Write(0, []byte("w"))
	for i, d := range dims {
		mem.WriteUint32Le(16+4*uint32(i), uint32(d))
	}
	return tensorFromData(context.Background(), s, mem, []int32{0, 1, off, 0, int32(dt), int32(len(dims)), 16})
}

func dataFiles(path string) map[string]DataFile {
	return map[string]DataFile{"w": {Path: path, Digest: func() ([32]byte, error) {
		b, err := os.ReadFile(path)
		return sha256.Sum256(b), err
	}}}
}

// deviceLM is deviceBackend with matmul and swiglu of its own, run on its
// buffers' host copies; it refuses a host buffer (a data tensor), which a
// device cannot read. Its other language-model ops are transformer.Host's,
// which refuse device buffers: they fall back to the reference.
type deviceLM struct {
	*deviceBackend
	transformer.Host
	ran  []string
	lost bool // MatMul fails as a device that is gone
}

func (d *deviceLM) unwrap(op string, bufs ...tensor.Buffer) ([]tensor.Buffer, error) {
	out := make([]tensor.Buffer, len(bufs))
	for i, b := range bufs {
		db, ok := b.(*deviceBuffer)
		if !ok {
			return nil, fmt.Errorf("device %s: %T is not a device buffer", op, b)
		}
		out[i] = db.host
	}
	d.ran = append(d.ran, op)
	return out, nil
}

func (d *deviceLM) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	if d.lost {
		return fmt.Errorf("device: matmul: %w", tensor.ErrDeviceLost)
	}
	h, err := d.unwrap("matmul", x, w, out)
	if err != nil {
		return err
	}
	return d.Host.MatMul(ctx, t, n, k, h[0], h[1], h[2])
}

func (d *deviceLM) SwiGLU(ctx context.Context, a, b, out tensor.Buffer) error {
	h, err := d.unwrap("swiglu", a, b, out)
	if err != nil {
		return err
	}
	return d.Host.SwiGLU(ctx, h[0], h[1], h[2])
}

// TestDataTensorsOnDevice: with a device backend that runs the
// language-model ops and a device cache, a data tensor is copied to the
// device once for all sessions and ops on it run there; ops the device lacks
// run on the reference (the job's tensors copied there and back). Without a
// device cache the session moves to host memory at its first data tensor.
// Either way the results are the reference's, and a data tensor reads back
// its bytes.
func TestDataTensorsOnDevice(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	path, file := weights(t)
	mem := guestMemory(t)
	dev := &deviceLM{deviceBackend: &deviceBackend{ref: ref}, Host: transformer.NewHost(1)}
	devices := modelcache.NewOn(1<<20, dev.Free)
	var shared tensor.Buffer // the device's copy of the data tensor
	results := map[string][][]byte{}
	for _, c := range []struct {
		name      string
		be        tensor.Backend
		devices   *modelcache.Cache
		fallbacks uint64   // matmul on data in host memory, rope
		ran       []string // on the device
		uploaded  int64
	}{
		{"reference", nil, nil, 0, nil, 0},
		{"device without a device cache", dev, nil, 0, nil, 0}, // moved to host memory
		{"device", dev, devices, 1, []string{"matmul", "swiglu"}, 64},
		{"device again", dev, devices, 1, []string{"matmul", "swiglu"}, 0},
	} {
		name := c.name
		dev.ran = nil
		s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: c.be,
			Data: dataFiles(path), Cache: modelcache.New(1 << 20), DeviceCache: c.devices})
		if err != nil {
			t.Fatal(err)
		}
		hw := fromData(s, mem, 0, abi.F32, 4, 4)
		hx, x, _ := s.alloc(context.Background(), abi.F32, []int{2, 4})
		if hw <= 0 || s.backend.Write(x.buf, f32bytes(1, -2, 3, 0.5, 0, 1, 1, -1)) != nil {
			t.Fatalf("%s: tensor_from_data = %d", name, hw)
		}
		read := func(h int32) []byte {
			e, _ := s.get(h)
			b := make([]byte, 4*e.elems())
			if err := s.backend.Read(e.buf, b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		hy := matMul(ctx, s, nil, []int32{hx, hw})
		hz := swiGLU(ctx, s, nil, []int32{hx, hx})
		if hy <= 0 || hz <= 0 {
			t.Fatalf("%s: matmul = %d, swiglu = %d", name, hy, hz)
		}
		if r := rope(ctx, s, nil, []int32{hx, 2, 4, int32(0x461c4000), abi.RoPEHalves}); r != 0 { // θ = 10000
			t.Fatalf("%s: rope = %d", name, r)
		}
		if r := tensorCopy(false)(ctx, s, mem, []int32{hw, 256, 64}); r != 0 {
			t.Fatalf("%s: tensor_read of the data tensor = %d", name, r)
		}
		back, _ := mem.Read(256, 64)
		if string(back) != string(file) {
			t.Errorf("%s: data tensor reads back %x, want %x", name, back, file)
		}
		results[name] = [][]byte{read(hy), read(hz), read(hx)}
		if s.Stats.Fallbacks != c.fallbacks {
			t.Errorf("%s: %d fallbacks, want %d", name, s.Stats.Fallbacks, c.fallbacks)
		}
		if !slices.Equal(dev.ran, c.ran) {
			t.Errorf("%s: ran %v on the device, want %v", name, dev.ran, c.ran)
		}
		if s.Stats.DataUploaded != c.uploaded {
			t.Errorf("%s: uploaded %d bytes, want %d", name, s.Stats.DataUploaded, c.uploaded)
		}
		if c.devices != nil {
			e, _ := s.get(hw)
			if shared == nil {
				shared = e.buf
			}
			if e.buf != shared {
				t.Errorf("%s: the data tensor is not the device's shared copy", name)
			}
		}
		s.Close()
		for i, op := range []string{"matmul", "swiglu", "rope"} {
			if string(results[name][i]) != string(results["reference"][i]) {
				t.Errorf("%s on the %s session: %x, want %x", op, name, results[name][i], results["reference"][i])
			}
		}
	}
	if st := devices.Stats(); st.Misses != 1 || st.Hits != 1 || st.Entries != 1 {
		t.Errorf("device cache %+v, want one entry, one miss, one hit", st)
	}
}

// fillingLM is deviceLM that fills its buffers in place (tensor.Filler,
// as a GPU worker's shared memory does), counting the fills.
type fillingLM struct {
	*deviceLM
	fills, writes int
}

func (d *fillingLM) Fill(t tensor.Buffer, fill func(dst []byte) error) error {
	d.fills++
	b := make([]byte, t.DType().Bytes(t.Len())) // the device's memory, as it were
	if err := fill(b); err != nil {
		return err
	}
	return d.deviceLM.Write(t, b)
}

func (d *fillingLM) Write(t tensor.Buffer, src []byte) error {
	d.writes++
	return d.deviceLM.Write(t, src)
}

// TestDataTensorsFilled: a device that fills its buffers in place gets a
// data tensor's bytes read from the file straight into its buffer, with
// nothing kept in the host's model cache; where the host cache has the
// tensor already (a CPU job read it), it is written from there instead.
// Either way the device's copy holds the file's bytes and ops on it give
// the reference's results.
func TestDataTensorsFilled(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	path, file := weights(t)
	mem := guestMemory(t)
	for _, hostCached := range []bool{false, true} {
		dev := &fillingLM{deviceLM: &deviceLM{deviceBackend: &deviceBackend{ref: ref}, Host: transformer.NewHost(1)}}
		cache := modelcache.New(1 << 20)
		if hostCached { // a session on the reference reads it into the host cache
			s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Data: dataFiles(path), Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			if h := fromData(s, mem, 0, abi.F32, 4, 4); h <= 0 {
				t.Fatalf("tensor_from_data on the reference = %d", h)
			}
			s.Close()
		}
		s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: dev, Data: dataFiles(path),
			Cache: cache, DeviceCache: modelcache.NewOn(1<<20, dev.Free)})
		if err != nil {
			t.Fatal(err)
		}
		hw := fromData(s, mem, 0, abi.F32, 4, 4)
		if hw <= 0 {
			t.Fatalf("host cached %v: tensor_from_data = %d", hostCached, hw)
		}
		e, _ := s.get(hw)
		got := make([]byte, len(file))
		if err := dev.Read(e.buf, got); err != nil || string(got) != string(file) {
			t.Fatalf("host cached %v: the device's copy holds %x (%v), want %x", hostCached, got, err, file)
		}
		wantFills, wantWrites, wantHost := 1, 0, int64(0)
		if hostCached {
			wantFills, wantWrites, wantHost = 0, 1, 64
		}
		if dev.fills != wantFills || dev.writes != wantWrites {
			t.Errorf("host cached %v: %d fills and %d writes, want %d and %d", hostCached, dev.fills, dev.writes, wantFills, wantWrites)
		}
		if st := cache.Stats(); st.Bytes != wantHost {
			t.Errorf("host cached %v: the host cache holds %d bytes, want %d", hostCached, st.Bytes, wantHost)
		}
		if s.Stats.DataUploaded != 64 {
			t.Errorf("host cached %v: uploaded %d bytes, want 64", hostCached, s.Stats.DataUploaded)
		}
		s.Close()
	}
}

// TestDataTensorPins: a session's data tensors stay pinned in the cache
// until freed or the session closes; a tensor the cache cannot hold, a
// full handle table, a file gone and a digest that cannot be had are
// refused without loading anything.
func TestDataTensorPins(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	path, _ := weights(t)
	mem := guestMemory(t)
	cache := modelcache.New(32) // one 8-element f32 tensor
	session := func(cfg Config) *Session {
		cfg.Reference, cfg.Cache = ref, cache
		if cfg.Data == nil {
			cfg.Data = dataFiles(path)
		}
		s, err := NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := session(Config{}), session(Config{})
	h := fromData(s1, mem, 0, abi.F32, 8)
	if h <= 0 {
		t.Fatalf("tensor_from_data = %d", h)
	}
	if r := fromData(s2, mem, 32, abi.F32, 8); r != int32(abi.ENOMEM) {
		t.Fatalf("with the cache pinned full: %d, want ENOMEM", r)
	}
	if s1.release(h) != abi.OK {
		t.Fatal("tensor_free")
	}
	if r := fromData(s2, mem, 32, abi.F32, 8); r <= 0 {
		t.Fatalf("after tensor_free: %d", r)
	}
	s2.Close()
	if r := fromData(s1, mem, 0, abi.F32, 8); r <= 0 {
		t.Fatalf("after Close: %d", r)
	}
	if st := cache.Stats(); st.Evictions != 2 || st.Misses != 4 || st.Hits != 0 {
		t.Errorf("cache %+v, want 4 misses and 2 evictions", st)
	}
	s1.Close()

	misses := cache.Stats().Misses
	gone := map[string]DataFile{"w": {Path: path, Digest: func() ([32]byte, error) { return [32]byte{}, fs.ErrNotExist }}}
	noDigest := map[string]DataFile{"w": {Path: path}}
	for _, tt := range []struct {
		name string
		cfg  Config
		want abi.Errno
	}{
		{"handle table full", Config{MaxHandles: 1}, abi.ETOOMANY},
		{"file gone", Config{Data: map[string]DataFile{"w": {Path: path + ".gone"}}}, abi.ENOENT},
		{"file gone while hashed", Config{Data: gone}, abi.ENOENT},
		{"no digest", Config{Data: noDigest}, abi.EBACKEND},
		{"too large for the cache", Config{}, abi.ENOMEM},
	} {
		s := session(tt.cfg)
		if tt.want == abi.ETOOMANY {
			s.alloc(context.Background(), abi.F32, []int{1})
		}
		n := int32(8)
		if tt.want == abi.ENOMEM {
			n = 16
		}
		if r := fromData(s, mem, 0, abi.F32, n); r != int32(tt.want) {
			t.Errorf("%s: %d, want %v", tt.name, r, tt.want)
		}
		s.Close()
	}
	if got := cache.Stats().Misses - misses; got != 1 { // only the tensor too large asked
		t.Errorf("%d cache misses for refused tensors, want 1", got)
	}
}

// TestDataTensorsWithoutCache: without a cache a data tensor counts in the
// job's limits as with one (pinData: nothing up to its file's size, the
// bytes past it), so that a guest sees the same on both; a region held
// twice is one read.
func TestDataTensorsWithoutCache(t *testing.T) {
	path, _ := weights(t) // 64 bytes
	mem := guestMemory(t)
	b := &countingBudget{limit: 100}
	s, err := NewSession(Config{Reference: reference.New(reference.Config{}), Budget: b,
		Data: map[string]DataFile{"w": {Path: path}}}) // no Digest: not needed
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := fromData(s, mem, 0, abi.F32, 16), fromData(s, mem, 0, abi.F32, 16)
	if h1 <= 0 || h2 <= 0 || b.used != 0 || s.Stats.DataLoaded != 64 {
		t.Fatalf("tensor_from_data %d, %d; budget used %d, loaded %d; want two handles, 0, one read", h1, h2, b.used, s.Stats.DataLoaded)
	}
	if e, _ := s.get(h1); e.buf.(*tensor.HostBuffer).F32[3] != 1.5 {
		t.Errorf("element 3 is %v, want 1.5", e.buf.(*tensor.HostBuffer).F32[3])
	}
	// The same bytes as another shape: past the file's 64, counted; a
	// third past the limit (100), ENOMEM, as a provider with a cache says.
	h3 := fromData(s, mem, 0, abi.F32, 4, 4)
	h4 := fromData(s, mem, 0, abi.F32, 2, 8)
	if h3 <= 0 || h4 != int32(abi.ENOMEM) || b.used != 64 || s.Stats.DataLoaded != 128 {
		t.Fatalf("more regions: %d, %d; budget used %d, loaded %d; want a handle, ENOMEM, 64, 128", h3, h4, b.used, s.Stats.DataLoaded)
	}
	s.Close()
	if b.used != 0 {
		t.Errorf("after Close the budget holds %d", b.used)
	}
}

// TestPreferHost: a job on a backend without the language-model ops moves
// to host memory at its first data tensor when it holds no tensors of its
// own yet, so its v3 ops run without copies; a job that already holds a
// device tensor stays where it is. Either way Backend names the backend
// the job was given.
func TestPreferHost(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	path, _ := weights(t)
	mem := guestMemory(t)
	for _, tt := range []struct {
		name      string
		ownFirst  bool // allocate a job tensor before the data tensor
		wantMoved bool
	}{
		{name: "data tensor first", wantMoved: true},
		{name: "own tensor first", ownFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dev := &deviceBackend{ref: ref}
			s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: dev,
				Data: dataFiles(path), Cache: modelcache.New(1 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tt.ownFirst {
				if h, _, errno := s.alloc(context.Background(), abi.F32, []int{4}); errno != abi.OK || h <= 0 {
					t.Fatalf("alloc: %v", errno)
				}
			}
			hw := fromData(s, mem, 0, abi.F32, 4, 4)
			if hw <= 0 {
				t.Fatalf("tensor_from_data = %d", hw)
			}
			hx, _, _ := s.alloc(context.Background(), abi.F32, []int{2, 4})
			if hy := matMul(context.Background(), s, nil, []int32{hx, hw}); hy <= 0 {
				t.Fatalf("matmul = %d", hy)
			}
			if moved := s.backend == tensor.Backend(ref); moved != tt.wantMoved {
				t.Errorf("moved to host memory: %v, want %v", moved, tt.wantMoved)
			}
			if wantFallbacks := map[bool]uint64{true: 0, false: 1}[tt.wantMoved]; s.Stats.Fallbacks != wantFallbacks {
				t.Errorf("%d fallbacks, want %d", s.Stats.Fallbacks, wantFallbacks)
			}
			if s.Backend() != tensor.Backend(dev) {
				t.Errorf("Backend() = %s, want the device backend", s.Backend().Name())
			}
		})
	}
}

// TestDeviceLostPurgesTheDeviceCache: a lost device stops the job with a
// cause wrapping ErrDeviceLost and empties the device cache, whose copies
// went with the device; the job's own copy is given back when it ends.
func TestDeviceLostPurgesTheDeviceCache(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	path, _ := weights(t)
	mem := guestMemory(t)
	dev := &deviceLM{deviceBackend: &deviceBackend{ref: ref}, Host: transformer.NewHost(1)}
	var freed int
	devices := modelcache.NewOn(1<<20, func(tensor.Buffer) { freed++ })
	var cause error
	s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: dev,
		Data: dataFiles(path), Cache: modelcache.New(1 << 20), DeviceCache: devices,
		Abort: func(_ context.Context, c error) { cause = c }})
	if err != nil {
		t.Fatal(err)
	}
	hw := fromData(s, mem, 0, abi.F32, 4, 4)
	hx, _, _ := s.alloc(ctx, abi.F32, []int{2, 4})
	if hw <= 0 || devices.Stats().Entries != 1 {
		t.Fatalf("tensor_from_data = %d, %d device cache entries", hw, devices.Stats().Entries)
	}
	dev.lost = true
	if r := matMul(ctx, s, nil, []int32{hx, hw}); r != int32(abi.EBACKEND) {
		t.Fatalf("matmul on a lost device = %d, want EBACKEND", r)
	}
	if !errors.Is(cause, tensor.ErrDeviceLost) {
		t.Errorf("the job stopped with %v, want ErrDeviceLost", cause)
	}
	if st := devices.Stats(); st.Entries != 0 || freed != 0 {
		t.Errorf("after the loss: %d entries, %d freed; want 0 and 0 (the job still holds its copy)", st.Entries, freed)
	}
	s.Close()
	if freed != 1 {
		t.Errorf("%d buffers given back after the job, want 1", freed)
	}
}

// TestWholeBlocks: a block-quantized data tensor's rows are whole blocks,
// 32 values or 256 for the K types (else ESHAPE); other types take any
// shape.
func TestWholeBlocks(t *testing.T) {
	for _, tt := range []struct {
		dt   abi.DType
		dims []int
		want bool
	}{
		{abi.F32, []int{3, 7}, true},
		{abi.F16, []int{5}, true},
		{abi.Q8_0, []int{2, 32}, true},
		{abi.Q8_0, []int{4, 16}, false},
		{abi.Q4_0, []int{64}, true},
		{abi.Q5_1, []int{2, 48}, false},
		{abi.Q4_K, []int{2, 256}, true},
		{abi.Q4_K, []int{4, 128}, false},
		{abi.Q5_K, []int{1, 2, 512}, true},
		{abi.Q6_K, []int{288}, false},
		{abi.Q6_K, []int{256, 1}, false},
		{abi.DType(99), []int{256}, false},
	} {
		if got := wholeBlocks(tt.dt, tt.dims); got != tt.want {
			t.Errorf("wholeBlocks(%v, %v) = %v, want %v", tt.dt, tt.dims, got, tt.want)
		}
	}
}

// quantWeights writes the data file of the v4 tests: 16 f32 (0.5·i), then
// a q4_k [2, 256] at offset 64, random blocks with scales about 2⁻⁶.
func quantWeights(t *testing.T) string {
	b, _ := os.ReadFile(func() string { p, _ := weights(t); return p }())
	r := rand.New(rand.NewPCG(1, 2))
	q := make([]byte, abi.Q4_K.Bytes(512))
	for i := range q {
		q[i] = byte(r.Uint32())
	}
	for blk := range 2 {
		binary.LittleEndian.PutUint16(q[144*blk:], 0x2400)   // d
		binary.LittleEndian.PutUint16(q[144*blk+2:], 0x2000) // dmin
	}
	path := filepath.Join(t.TempDir(), "q.bin")
	if err := os.WriteFile(path, append(b, q...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUnheldWeightsStayInHost: weights of a type the device does not hold
// (q4_k on a device backend that holds none but f32, as CUDA holds no v4
// block type) are never uploaded. A job whose first data tensor is one
// moves to host memory; a job that already uses the device keeps it, and
// its ops on such weights fall back to the reference. Either way matmul,
// embed and rmsnorm (a q4_k g) give the reference's bits.
func TestUnheldWeightsStayInHost(t *testing.T) {
	ctx := context.Background()
	ref := reference.New(reference.Config{Threads: 1})
	path := quantWeights(t)
	mem := guestMemory(t)
	dev := &deviceLM{deviceBackend: &deviceBackend{ref: ref}, Host: transformer.NewHost(1)}
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i%13) - 6
	}
	var want [][]byte
	for _, c := range []struct {
		name      string
		be        tensor.Backend
		f32First  bool // an f32 data tensor, uploaded, before the q4_k
		moved     bool
		uploaded  int64
		fallbacks uint64
	}{
		{name: "reference"},
		{name: "q4_k first", be: dev, moved: true},
		{name: "f32 on the device first", be: dev, f32First: true, uploaded: 64, fallbacks: 3},
	} {
		s, err := NewSession(Config{Mode: abi.ModeTolerance, Reference: ref, Backend: c.be,
			Data: dataFiles(path), Cache: modelcache.New(1 << 20), DeviceCache: modelcache.NewOn(1<<20, dev.Free)})
		if err != nil {
			t.Fatal(err)
		}
		if c.f32First && fromData(s, mem, 0, abi.F32, 4, 4) <= 0 {
			t.Fatalf("%s: f32 tensor_from_data", c.name)
		}
		hq := fromData(s, mem, 64, abi.Q4_K, 2, 256)
		if r := fromData(s, mem, 64, abi.Q4_K, 4, 128); r != int32(abi.ESHAPE) {
			t.Errorf("%s: q4_k rows of half blocks: %d, want ESHAPE", c.name, r)
		}
		hx, ex, _ := s.alloc(ctx, abi.F32, []int{1, 256})
		if hq <= 0 || s.backend.Write(ex.buf, f32bytes(x...)) != nil {
			t.Fatalf("%s: tensor_from_data = %d", c.name, hq)
		}
		mem.WriteUint32Le(8, 1) // ids 1, 0
		mem.WriteUint32Le(12, 0)
		hy := matMul(ctx, s, nil, []int32{hx, hq})
		he := embed(ctx, s, mem, []int32{hq, 8, 2})
		for _, r := range []struct {
			dims []uint32
			want int32
		}{{[]uint32{4, 128}, int32(abi.ESHAPE)}, {[]uint32{1, 512}, 0}, {[]uint32{2, 256}, 0}} {
			mem.WriteUint32Le(16, r.dims[0])
			mem.WriteUint32Le(20, r.dims[1])
			if got := tensorReshape(ctx, s, mem, []int32{hq, 2, 16}); got != r.want {
				t.Errorf("%s: reshape of q4_k [2, 256] to %v: %d, want %d", c.name, r.dims, got, r.want)
			}
		}
		hg := fromData(s, mem, 64, abi.Q4_K, 256) // the first row as g
		hn := rmsNorm(ctx, s, nil, []int32{hx, hg, int32(math.Float32bits(1e-5))})
		if hy <= 0 || he <= 0 || hg <= 0 || hn <= 0 {
			t.Fatalf("%s: matmul %d, embed %d, tensor_from_data %d, rmsnorm %d", c.name, hy, he, hg, hn)
		}
		var got [][]byte
		for _, h := range []int32{hy, he, hn} {
			e, _ := s.get(h)
			b := make([]byte, 4*e.elems())
			if err := s.backend.Read(e.buf, b); err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
		}
		if want == nil {
			want = got
		}
		for i, op := range []string{"matmul", "embed", "rmsnorm"} {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: %s differs from the reference's", c.name, op)
			}
		}
		if moved := c.be != nil && s.backend == tensor.Backend(ref); moved != c.moved {
			t.Errorf("%s: moved to host memory: %v, want %v", c.name, moved, c.moved)
		}
		if s.Stats.DataUploaded != c.uploaded || s.Stats.Fallbacks != c.fallbacks {
			t.Errorf("%s: uploaded %d bytes with %d fallbacks, want %d and %d", c.name, s.Stats.DataUploaded, s.Stats.Fallbacks, c.uploaded, c.fallbacks)
		}
		s.Close()
	}
}
