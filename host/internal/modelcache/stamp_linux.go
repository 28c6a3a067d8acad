package modelcache

import (
	"fmt"
	"os"
	"syscall"
)

// fileStamp returns what besides its path, size and modification time
// tells a file's content apart on disk: its inode and change time (a write
// sets the change time to now, and nothing sets it back).
func fileStamp(st os.FileInfo) (string, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d:%d.%d", sys.Dev, sys.Ino, sys.Ctim.Sec, sys.Ctim.Nsec), true
}
