package tensorhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/tensor"
)

// maxDataName bounds a data file's name (a file name, not a path).
const maxDataName = 255

// openFile is a data file as the session resolved it on first use.
type openFile struct {
	path   string
	size   int64
	digest [32]byte // with a Cache; without, of its name
}

// tensorFromData is tensor_from_data(name_ptr, name_len, off_lo, off_hi,
// dtype, ndim, dims_ptr): a read-only tensor of a region of a data file,
// from the model cache when the session has one.
func tensorFromData(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	if p[1] <= 0 || p[1] > maxDataName {
		return int32(abi.EINVAL)
	}
	name, ok := view(mem, p[0], int64(p[1]), 1)
	if !ok {
		return int32(abi.EFAULT)
	}
	off := uint64(uint32(p[2])) | uint64(uint32(p[3]))<<32
	dt := abi.DType(p[4])
	switch {
	case dt == abi.I8 || dt == abi.I32:
		return int32(abi.EDTYPE) // a type, but no data tensor's
	case dt != abi.F32 && !dt.Weight():
		return int32(abi.EINVAL)
	}
	dims, errno := readDims(mem, p[5], p[6])
	if errno != abi.OK {
		return int32(errno)
	}
	if !wholeBlocks(dt, dims) {
		return int32(abi.ESHAPE)
	}
	n := product(dims)
	size := dt.Bytes(n)
	if s.live >= s.cfg.MaxHandles {
		return int32(abi.ETOOMANY)
	}
	s.preferHost(dt)
	start := time.Now()
	defer func() { s.Stats.DataTime += time.Since(start) }()
	f, errno := s.dataFile(string(name))
	if errno != abi.OK {
		return int32(errno)
	}
	if off > math.MaxInt64 || int64(off) > f.size-size {
		return int32(abi.EINVAL)
	}
	s.charge(n, 0) // deterministic: the same whether the cache had it or not
	e, errno := s.loadData(ctx, f, int64(off), dt, dims, size)
	if errno != abi.OK {
		return int32(errno)
	}
	s.Stats.DataBytes += size
	return s.insert(e)
}

// loadData makes a data tensor of size bytes: from the cache, pinned (and
// on the device, with a DeviceCache, if the device holds weights of dt),
// or without one read for this job alone, one buffer per region. What it
// counts in the job's limits is pinData's either way: a guest sees the
// same ENOMEM on a provider with a cache and one without (a job's model
// had counted in its limit only without one, so a memory-tight model job
// ran on some providers and failed on others, in exact mode a vote
// against honest providers).
func (s *Session) loadData(ctx context.Context, f openFile, off int64, dt abi.DType, dims []int, size int64) (*entry, abi.Errno) {
	e := &entry{dt: dt, shape: dims, readOnly: true}
	key := modelcache.NewKey(f.digest, off, dt, dims)
	if errno := s.pinData(key, f.size, size); errno != abi.OK {
		return nil, errno
	}
	if s.cfg.Cache == nil {
		buf, ok := s.read[key]
		if !ok {
			var err error
			if buf, err = modelcache.Read(f.path, off, dt, product(dims)); err != nil {
				s.unpinData(key)
				return nil, s.loadErrno(ctx, err)
			}
			if s.read == nil {
				s.read = map[modelcache.Key]tensor.Buffer{}
			}
			s.read[key] = buf
			s.Stats.DataLoaded += size
		}
		e.buf, e.key = buf, &key
		return e, abi.OK
	}
	var ref *modelcache.Ref
	var err error
	if s.dataOnDevice() && tensor.HoldsWeights(s.backend, dt) {
		ref, err = s.deviceData(ctx, f, key, size)
	} else {
		ref, err = s.hostData(ctx, f, key, size)
	}
	if err != nil {
		s.unpinData(key)
		return nil, s.loadErrno(ctx, err)
	}
	e.buf, e.unpin, e.key = ref.Buffer(), ref.Release, &key
	return e, abi.OK
}

// pinData counts a handle of cached data tensor key, of size bytes, of a
// file of fileSize bytes. Cached tensors are outside the job's memory
// limit, but each region of a file (offset, type, shape) is a key of its
// own: one small file read at overlapping regions pinned the whole model
// cache, and other jobs' weights then did not fit (ErrModelCache, their
// providers' failure). So the distinct keys a job holds of a file are free
// up to the file's size, and what they hold past it (the same bytes read
// again as another type or shape) is counted in the job's memory limit,
// as a data tensor is without a cache; ENOMEM if it does not fit. A
// model's weights, which do not overlap, always fit their file. The count
// depends on the job's calls alone, as every replica makes them.
func (s *Session) pinData(key modelcache.Key, fileSize, size int64) abi.Errno {
	if s.pins[key] == 0 {
		p := s.pinned[key.Digest]
		over := min(size, max(0, p.bytes-p.counted+size-fileSize))
		if over > 0 {
			if errno := s.reserve(over); errno != abi.OK {
				return errno
			}
		}
		if s.pins == nil {
			s.pins, s.pinned, s.counted = map[modelcache.Key]int{}, map[[32]byte]pinnedFile{}, map[modelcache.Key]int64{}
		}
		s.pinned[key.Digest] = pinnedFile{p.bytes + size, p.counted + over}
		if over > 0 {
			s.counted[key] = over
		}
	}
	s.pins[key]++
	return abi.OK
}

// pinnedFile is what a job's cached data tensors of one file hold: bytes,
// of which counted are in its memory limit (pinData).
type pinnedFile struct{ bytes, counted int64 }

// unpinData gives back a count of pinData.
func (s *Session) unpinData(key modelcache.Key) {
	if s.pins[key]--; s.pins[key] > 0 {
		return
	}
	delete(s.pins, key)
	over := s.counted[key]
	delete(s.counted, key)
	p := s.pinned[key.Digest]
	p.bytes -= key.DType.Bytes(product(key.Dims[:key.NDim]))
	p.counted -= over
	if p.bytes > 0 {
		s.pinned[key.Digest] = p
	} else {
		delete(s.pinned, key.Digest)
	}
	delete(s.read, key) // without a cache: the region's buffer, held no more
	if over > 0 {
		s.unreserve(over)
	}
}

// hostData returns the data tensor key from the model cache, pinned,
// reading it on a miss.
func (s *Session) hostData(ctx context.Context, f openFile, key modelcache.Key, size int64) (*modelcache.Ref, error) {
	ref, loaded, err := s.cfg.Cache.Get(ctx, key, size, func() (tensor.Buffer, error) {
		return modelcache.Read(f.path, key.Offset, key.DType, product(key.Dims[:key.NDim]))
	})
	if loaded {
		s.Stats.DataLoaded += size
	}
	return ref, err
}

// deviceData returns the data tensor key in the backend's memory, pinned:
// from the DeviceCache, or copied there on a miss. A backend that fills
// its buffers in place (tensor.Filler: a GPU worker's shared memory) gets
// the file's bytes read straight into that memory, unless the model cache
// has them already; otherwise they go through the model cache, whose copy
// is unpinned once uploaded, to be evicted when memory is short.
func (s *Session) deviceData(ctx context.Context, f openFile, key modelcache.Key, size int64) (*modelcache.Ref, error) {
	be := s.backend
	dkey := key
	dkey.Backend = be.Name()
	ref, loaded, err := s.cfg.DeviceCache.Get(ctx, dkey, size, func() (tensor.Buffer, error) {
		buf, err := be.Alloc(key.DType, product(key.Dims[:key.NDim]))
		if err != nil && !errors.Is(err, tensor.ErrDeviceLost) {
			// The device is full: the provider's limit, as for the cache.
			return nil, fmt.Errorf("%w: %w", modelcache.ErrTooLarge, err)
		} else if err != nil {
			return nil, err
		}
		if err := s.upload(ctx, f, key, size, buf); err != nil {
			be.Free(buf)
			return nil, err
		}
		return buf, nil
	})
	if err != nil {
		return nil, err
	}
	if loaded {
		s.Stats.DataUploaded += size
	}
	if s.onDevice == nil {
		s.onDevice = map[tensor.Buffer]bool{}
	}
	s.onDevice[ref.Buffer()] = true
	return ref, nil
}

// upload writes data tensor key's bytes into buf, on the device.
func (s *Session) upload(ctx context.Context, f openFile, key modelcache.Key, size int64, buf tensor.Buffer) error {
	if fl, ok := s.backend.(tensor.Filler); ok && !s.cfg.Cache.Has(key) {
		err := fl.Fill(buf, func(dst []byte) error { return modelcache.ReadInto(f.path, key.Offset, dst) })
		if err == nil {
			s.Stats.DataLoaded += size
		}
		return err
	}
	host, err := s.hostData(ctx, f, key, size)
	if err != nil {
		return err
	}
	defer host.Release()
	return s.backend.Write(buf, host.Buffer().(*tensor.HostBuffer).Stored())
}

// wholeBlocks reports whether a tensor of dt may have shape dims: a
// block-quantized tensor's rows (its last dim) are whole blocks (32 values,
// 256 for the K types: abi.DType.Block), so that each row can be
// dequantized on its own.
func wholeBlocks(dt abi.DType, dims []int) bool {
	k := dt.Block()
	return k > 0 && dims[len(dims)-1]%k == 0
}

// dataFile resolves a data file's name: its size, and its digest when the
// session has a Cache. A name the job does not have, or whose host file is
// gone, is ENOENT.
func (s *Session) dataFile(name string) (openFile, abi.Errno) {
	if f, ok := s.files[name]; ok {
		return f, abi.OK
	}
	df, ok := s.cfg.Data[name]
	if !ok {
		return openFile{}, abi.ENOENT
	}
	st, err := os.Stat(df.Path)
	if err != nil || !st.Mode().IsRegular() {
		return openFile{}, fileErrno(err)
	}
	f := openFile{path: df.Path, size: st.Size()}
	// Without a cache the file needs no digest: a name of its own in this
	// job keys its regions (pinData).
	f.digest = sha256.Sum256([]byte("data file " + name))
	if s.cfg.Cache != nil {
		if df.Digest == nil {
			return openFile{}, abi.EBACKEND // the host did not say how to name the file
		}
		if f.digest, err = df.Digest(); err != nil {
			return openFile{}, fileErrno(err)
		}
	}
	if s.files == nil {
		s.files = map[string]openFile{}
	}
	s.files[name] = f
	return f, abi.OK
}

// fileErrno is a host file's error as the guest sees it: ENOENT when the
// file is not there (or is not a file), else EBACKEND (the provider's
// trouble; the job may retry).
func fileErrno(err error) abi.Errno {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return abi.ENOENT
	}
	return abi.EBACKEND
}

// loadErrno is a failed load's errno. A tensor the model cache cannot hold
// stops the job with ErrModelCache: how large a provider's cache is, and
// what other jobs hold in it, must not change what the guest sees, or
// replicas would disagree. A load cut short by the job's end stops it too.
func (s *Session) loadErrno(ctx context.Context, err error) abi.Errno {
	switch {
	case errors.Is(err, tensor.ErrDeviceLost):
		return s.failed(ctx, err)
	case errors.Is(err, modelcache.ErrTooLarge):
		if s.cfg.Abort != nil {
			s.cfg.Abort(ctx, fmt.Errorf("%w: %v", ErrModelCache, err))
		}
		return abi.ENOMEM
	case ctx.Err() != nil && s.cfg.Abort != nil:
		s.cfg.Abort(ctx, ctx.Err())
	case errors.Is(err, fs.ErrNotExist):
		return abi.ENOENT
	}
	return abi.EBACKEND
}
