package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// TestGaveUp: a replica given up because another replica ended the job
// says so (context.Cause), wraps context.Canceled (which the job's run
// leaves out of its error) and, as its own last error, is not repeated as
// "(last: ...)"; a deadline names --deadline.
func TestGaveUp(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("replica 1 ended the job"))
	err := gaveUp(ctx)
	if err.Error() != "cancelled: replica 1 ended the job" || !errors.Is(err, context.Canceled) {
		t.Errorf("gaveUp = %q, want it cancelled by replica 1, wrapping context.Canceled", err)
	}
	if e := ended(ctx, err); e.Error() != err.Error() || !errors.Is(e, context.Canceled) {
		t.Errorf("ended(own cancel) = %q, want %q", e, err)
	}
	if e := ended(ctx, errTimeLimit); !strings.Contains(e.Error(), "(last: the job's time limit ran out)") {
		t.Errorf("ended(time limit) = %q, want the last error named", e)
	}
	plain, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := gaveUp(plain); err.Error() != "cancelled: context canceled" {
		t.Errorf("gaveUp(plain cancel) = %q", err)
	}
	dl, cancel3 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel3()
	<-dl.Done()
	if err := gaveUp(dl); !strings.Contains(err.Error(), "--deadline") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("gaveUp(deadline) = %q", err)
	}
}

// TestOneTimeLimit: replicas whose runs ran out together each made their
// error with the count of their moment ("on 1 provider", "on 2
// providers"): the job's error says it once, with every run counted.
func TestOneTimeLimit(t *testing.T) {
	j := &jobRun{ann: &wire.JobAnnounce{Terms: wire.Terms{TimeoutMS: 3000}}}
	j.timedOutOn("a")
	first := fmt.Errorf("replica 0: %w", j.tooShort(1))
	j.timedOutOn("b")
	second := fmt.Errorf("replica 1: %w", j.tooShort(2))
	other := errors.New("replica 2: no result")
	got := j.oneTimeLimit([]error{other, first, second})
	if len(got) != 2 || got[1] != other || !errors.Is(got[0], jobs.ErrTimeLimit) || !strings.Contains(got[0].Error(), "on 2 providers") {
		t.Errorf("oneTimeLimit = %q, want one time limit on 2 providers, then the other error", got)
	}
	one := &jobRun{ann: j.ann}
	one.timedOutOn("a")
	lone := fmt.Errorf("replica 1: %w", one.tooShort(1))
	if got := one.oneTimeLimit([]error{lone}); len(got) != 1 || got[0] != lone {
		t.Errorf("oneTimeLimit(one) = %q, want it as it was", got)
	}
}
