package datafs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"
)

func TestFS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := New(map[string]string{"weights.bin": write("a", "0123456789"), "vocab.txt": write("b", "hello\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(f, "vocab.txt", "weights.bin"); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(f, "vocab.txt")
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("vocab.txt: %q, %v", b, err)
	}
	st, err := fs.Stat(f, "weights.bin")
	if err != nil || st.Size() != 10 || st.Mode() != 0o444 || !st.ModTime().Equal(time.Unix(0, 0)) {
		t.Fatalf("weights.bin: %v, %v; want 10 bytes, 0444, the epoch", st, err)
	}
	h, _ := f.Open("weights.bin")
	defer h.Close()
	buf := make([]byte, 4)
	if n, err := h.(io.ReaderAt).ReadAt(buf, 6); n != 4 || string(buf) != "6789" {
		t.Fatalf("ReadAt: %q, %v", buf[:n], err)
	}
	if _, err := f.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	for _, bad := range []string{"a/b", "..", ".", ""} {
		if _, err := New(map[string]string{bad: "x"}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}
