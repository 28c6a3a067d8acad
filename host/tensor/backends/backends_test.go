package backends

import (
	"context"
	"errors"
	"testing"

	"github.com/infernet/infernet/host/tensor"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		fast      string
		wantClass tensor.Class // of Fast, when err is nil
		wantErr   error        // nil, or matched with errors.Is
		anyErr    bool
	}{
		{fast: Reference, wantClass: tensor.ClassReference},
		{fast: CPU, wantClass: tensor.ClassCPU},
		{fast: "tpu", anyErr: true},
	}
	for _, tt := range tests {
		set, err := Open(ctx, Config{Fast: tt.fast})
		switch {
		case tt.anyErr || tt.wantErr != nil:
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("%s: err = %v, want %v", tt.fast, err, tt.wantErr)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", tt.fast, err)
			continue
		}
		if set.Fast.Class() != tt.wantClass || set.Reference.Class() != tensor.ClassReference {
			t.Errorf("%s: fast %s (%v), reference %s", tt.fast, set.Fast.Name(), set.Fast.Class(), set.Reference.Name())
		}
		set.Close()
	}
}

// TestAutoWithoutGPU: with no CUDA driver (the project's machines), auto
// falls back to the CPU kernel and says why CUDA is unavailable; asking for
// CUDA by name is an error wrapping tensor.ErrUnavailable.
func TestAutoWithoutGPU(t *testing.T) {
	ctx := context.Background()
	set, err := Open(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Fast.Class() == tensor.ClassGPU {
		t.Skip("a GPU is present: this test covers machines without one")
	}
	if set.Fast.Class() != tensor.ClassCPU || !errors.Is(set.Unavailable[CUDA], tensor.ErrUnavailable) {
		t.Fatalf("auto chose %s; cuda unavailable because %v", set.Fast.Name(), set.Unavailable[CUDA])
	}
	if _, err := Open(ctx, Config{Fast: CUDA}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Fatalf("cuda by name: %v", err)
	}
}
