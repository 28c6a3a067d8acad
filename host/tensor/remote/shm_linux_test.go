package remote

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// pinLog is a pinner that records what it is asked, by size, and refuses
// when told to.
type pinLog struct {
	calls  []string
	refuse bool
}

func (p *pinLog) Pin(mem []byte) error {
	p.calls = append(p.calls, fmt.Sprintf("pin %d", len(mem)))
	if p.refuse {
		return errors.New("refused")
	}
	return nil
}

func (p *pinLog) Unpin(mem []byte) error {
	p.calls = append(p.calls, fmt.Sprintf("unpin %d", len(mem)))
	return nil
}

// TestShmPinsEachMapping: a worker whose backend page-locks memory pins
// its mapping of the shared memory each time it maps it, unpins it before
// unmapping it (a larger mapping, or the end), and, where the backend
// refused, unpins nothing. (Only Serve gives a shm a pinner: the parent's
// side has none.)
func TestShmPinsEachMapping(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse bool
		want   []string
	}{
		{"pinned", false, []string{"pin 2097152", "unpin 2097152", "pin 5242880", "unpin 5242880"}},
		{"refused", true, []string{"pin 2097152", "pin 5242880"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, err := newShm()
			if err != nil {
				t.Fatal(err)
			}
			defer parent.close()
			fd, err := unix.Dup(int(parent.f.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			log := &pinLog{refuse: c.refuse}
			worker := &shm{f: os.NewFile(uintptr(fd), "shm"), pin: log}
			for _, n := range []int{2 * shmMin, shmMin, 5 * shmMin} {
				if _, err := parent.grow(n); err != nil {
					t.Fatal(err)
				}
				mem, err := worker.view(n)
				if err != nil {
					t.Fatal(err)
				}
				mem[n-1] = 7 // the mapping is the parent's memory
				if b, _ := parent.grow(n); b[n-1] != 7 {
					t.Fatal("the worker's mapping is not the parent's memory")
				}
			}
			worker.close()
			if !slices.Equal(log.calls, c.want) {
				t.Errorf("pinner asked %q, want %q", log.calls, c.want)
			}
		})
	}
}
