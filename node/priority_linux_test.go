package node

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// niceOf is the nice value of the calling thread (/proc/thread-self/stat,
// field 19).
func niceOf(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command, which ends at the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, err := strconv.Atoi(f[16]) // field 19 of the line, 17th after the command
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLowestPriority: lowestPriority lowers the calling thread alone, and
// a goroutine locked to that thread takes the thread with it when it ends.
func TestLowestPriority(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := niceOf(t)
	done := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := lowestPriority(); err != nil {
			t.Error(err)
		}
		done <- niceOf(t)
	}()
	if got := <-done; got != 19 {
		t.Errorf("the lowered thread's nice is %d, want 19", got)
	}
	if got := niceOf(t); got != before {
		t.Errorf("this thread's nice went from %d to %d", before, got)
	}
}
