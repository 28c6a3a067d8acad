package node

import "golang.org/x/sys/unix"

// lowestPriority gives the calling OS thread the lowest scheduling
// priority (nice 19). The caller has locked its goroutine to the thread
// and never unlocks it, so that the thread ends with the goroutine and no
// other goroutine runs at that priority.
func lowestPriority() error {
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
