// Package datafs is the read-only file system of a job's data blobs: named
// files, each backed by a host file, listed in name order, with the same
// metadata on every provider (mode 0444, modification time zero), so that
// replicas see identical files whatever their disks hold.
package datafs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"
)

// FS maps file names (no slashes) to host paths. It implements fs.FS and
// fs.ReadDirFS; it is safe for concurrent use once built.
type FS struct {
	names []string          // sorted
	paths map[string]string // name -> host path
}

// New returns the file system of files, a map of name to host path. Names
// must be valid, slash-free fs paths.
func New(files map[string]string) (*FS, error) {
	f := &FS{paths: map[string]string{}}
	for name, path := range files {
		if !fs.ValidPath(name) || name == "." || slices.Contains([]byte(name), '/') {
			return nil, &fs.PathError{Op: "datafs", Path: name, Err: fs.ErrInvalid}
		}
		f.paths[name] = path
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	return f, nil
}

// Open implements fs.FS.
func (f *FS) Open(name string) (fs.File, error) {
	if name == "." {
		return &dir{fs: f}, nil
	}
	path, ok := f.paths[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	h, err := os.Open(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	st, err := h.Stat()
	if err != nil {
		h.Close()
		return nil, err
	}
	return &file{File: h, info: info{name: name, size: st.Size()}}, nil
}

// ReadDir implements fs.ReadDirFS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return (&dir{fs: f}).ReadDir(-1)
}

// file is a host file that reports fixed metadata.
type file struct {
	*os.File
	info info
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }

// ReadDir refuses: a data file is not a directory.
func (f *file) ReadDir(int) ([]fs.DirEntry, error) {
	return nil, &fs.PathError{Op: "readdir", Path: f.info.name, Err: errors.New("not a directory")}
}

// dir is the root directory.
type dir struct {
	fs  *FS
	pos int
}

func (d *dir) Stat() (fs.FileInfo, error) { return info{name: ".", dir: true}, nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: errors.New("is a directory")}
}
func (d *dir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	for d.pos < len(d.fs.names) && (n <= 0 || len(out) < n) {
		name := d.fs.names[d.pos]
		d.pos++
		size := int64(0)
		if st, err := os.Stat(d.fs.paths[name]); err == nil {
			size = st.Size()
		}
		out = append(out, fs.FileInfoToDirEntry(info{name: name, size: size}))
	}
	if n > 0 && len(out) == 0 {
		return nil, io.EOF
	}
	return out, nil
}

// info is fixed metadata: read-only, modified at the epoch.
type info struct {
	name string
	size int64
	dir  bool
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return i.size }
func (i info) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i info) ModTime() time.Time { return time.Unix(0, 0).UTC() }
func (i info) IsDir() bool        { return i.dir }
func (i info) Sys() any           { return nil }
