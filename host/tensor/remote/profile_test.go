package remote

import (
	"context"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// TestProfile: while a profile is on, the worker counts and times each
// operation; a CUDA worker (the fake driver) also times it on the device,
// between events, which the reference worker cannot. Stopping returns the
// times once; nothing is counted while no profile is on.
func TestProfile(t *testing.T) {
	for _, kind := range []string{"reference", "cuda"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			b, _ := open(t, kind)
			x := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
			out, err := b.Alloc(abi.F32, 4)
			if err != nil {
				t.Fatal(err)
			}
			binaries := func(n int) {
				for range n {
					if err := b.Binary(ctx, abi.OpAdd, x, x, out); err != nil {
						t.Fatal(err)
					}
				}
			}
			binaries(2) // before the profile: not counted
			if prof, err := b.Profile(ctx, true); err != nil || len(prof) != 0 {
				t.Fatalf("starting a profile: %+v, %v; want nothing", prof, err)
			}
			binaries(3)
			if err := b.SwiGLU(ctx, x, x, out); err != nil {
				t.Fatal(err)
			}
			download(t, b, out)
			prof, err := b.Profile(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			byOp := map[string]tensor.OpTime{}
			for _, p := range prof {
				byOp[p.Op] = p
			}
			if len(prof) != 2 || byOp["binary"].Calls != 3 || byOp["swiglu"].Calls != 1 {
				t.Fatalf("profile: %+v; want 3 binary and 1 swiglu", prof)
			}
			for _, p := range prof {
				if p.Host <= 0 || (kind == "cuda") != (p.Device > 0) {
					t.Errorf("%s: host %v, device %v (the %s worker)", p.Op, p.Host, p.Device, kind)
				}
			}
			binaries(1)
			if prof, err := b.Profile(ctx, false); err != nil || len(prof) != 0 {
				t.Errorf("with no profile on: %+v, %v; want nothing", prof, err)
			}
		})
	}
}
