package modelcache

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// TestReadHugePages reads a weight of a few MiB and finds its memory
// advised MADV_HUGEPAGE (VmFlags "hg" in /proc/self/smaps), its bytes the
// file's.
func TestReadHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("a kernel without transparent huge pages refuses the advice:", err)
	}
	data := make([]byte, 5<<20+12)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	buf, err := Read(path, 4, abi.F32, (len(data)-4)/4)
	if err != nil {
		t.Fatal(err)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf.F32))), 4*len(buf.F32))
	if !bytes.Equal(raw, data[4:]) {
		t.Fatal("the bytes read are not the file's")
	}
	flags, err := vmFlags(uintptr(unsafe.Pointer(&raw[len(raw)/2])))
	if err != nil {
		t.Skip(err) // no smaps: nothing to check
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("VmFlags %q: no hg", flags)
	}
}

// vmFlags returns the VmFlags of the mapping of this process that holds
// address p.
func vmFlags(p uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && !strings.Contains(line[:strings.IndexByte(line, ' ')+1], ":") {
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping holds %#x", p)
}
