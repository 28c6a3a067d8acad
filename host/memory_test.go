package host

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestMemoryBudget: guest linear memory and host tensors share the job's
// memory limit, in both orders, and freed tensors return their bytes. The
// guest (testdata/budget.wat) grows its memory and allocates an i8 tensor.
func TestMemoryBudget(t *testing.T) {
	sb := newSandbox(t, Config{})
	wasm := readFile(t, "testdata/budget.wasm")
	const mib = 1 << 20
	const limit = 64 * mib // 1024 pages; the guest starts with 1
	tests := []struct {
		name         string
		tensorFirst  bool
		pages, bytes int32
		tensorMemory int64 // 0: no sub-limit
		// Want: first grow, tensor_new (pos: a handle), second grow.
		grow1, tensor, grow2 int32
	}{
		// 60 MiB of memory leave 4 MiB: an 8 MiB tensor is refused, and the
		// second grow passes the memory's own maximum.
		{name: "memory then tensor refused", pages: 960, bytes: 8 * mib, grow1: 1, tensor: int32(abi.ENOMEM), grow2: -1},
		// A 40 MiB tensor leaves too little for 30 MiB of memory, until it
		// is freed.
		{name: "tensor then grow refused", tensorFirst: true, pages: 480, bytes: 40 * mib, grow1: -1, tensor: 1, grow2: 1},
		{name: "both fit", pages: 480, bytes: 32 * mib, grow1: 1, tensor: 1, grow2: 481},
		// 1+511 pages and 32 MiB of tensors are the limit exactly.
		{name: "exactly the limit", pages: 511, bytes: 32 * mib, grow1: 1, tensor: 1, grow2: 512},
		{name: "one byte over", pages: 511, bytes: 32*mib + 1, grow1: 1, tensor: int32(abi.ENOMEM), grow2: 512},
		{name: "tensor sub-limit", pages: 16, bytes: 8 * mib, tensorMemory: 4 * mib, grow1: 1, tensor: int32(abi.ENOMEM), grow2: 17},
		// A sub-limit above the memory limit does not raise it.
		{name: "sub-limit above the total", tensorFirst: true, pages: 1, bytes: 100 * mib, tensorMemory: 1 << 30, grow1: 1, tensor: int32(abi.ENOMEM), grow2: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewJobConfig().WithMemoryLimit(limit).WithTensorMemory(tt.tensorMemory)
			order := int32(0)
			if tt.tensorFirst {
				order = 1
			}
			in := binary.LittleEndian.AppendUint32(nil, uint32(order))
			in = binary.LittleEndian.AppendUint32(in, uint32(tt.pages))
			in = binary.LittleEndian.AppendUint32(in, uint32(tt.bytes))
			res, err := sb.Run(context.Background(), Job{Module: wasm, Input: in}, cfg)
			if err != nil || len(res.Output) != 16 {
				t.Fatalf("err %v, output %x", err, res.Output)
			}
			var got [4]int32
			for i := range got {
				got[i] = int32(binary.LittleEndian.Uint32(res.Output[4*i:]))
			}
			if got[0] != tt.grow1 || got[1] != tt.tensor || got[3] != tt.grow2 {
				t.Fatalf("grow %d, tensor_new %d, free %d, grow %d; want grow %d, tensor_new %d, grow %d",
					got[0], got[1], got[2], got[3], tt.grow1, tt.tensor, tt.grow2)
			}
			if tt.tensor > 0 && got[2] != 0 {
				t.Fatalf("tensor_free = %d", got[2])
			}
			if tt.tensor > 0 && res.TensorBytes != int64(tt.bytes) {
				t.Errorf("Result.TensorBytes = %d, want %d", res.TensorBytes, tt.bytes)
			}
		})
	}
}

// TestMemoryBudgetTrap: a guest that traps after a memory.grow refused
// because tensors hold the rest of its limit (as a Go guest out of memory
// does) is stopped with ErrMemoryLimit, although its memory is far from
// its own maximum.
func TestMemoryBudgetTrap(t *testing.T) {
	sb := newSandbox(t, Config{})
	in := binary.LittleEndian.AppendUint32(nil, 2)    // tensor, grow, trap
	in = binary.LittleEndian.AppendUint32(in, 480)    // 30 MiB of memory
	in = binary.LittleEndian.AppendUint32(in, 40<<20) // 40 MiB of tensors
	_, err := sb.Run(context.Background(), Job{Module: readFile(t, "testdata/budget.wasm"), Input: in},
		NewJobConfig().WithMemoryLimit(64<<20))
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("err = %v, want ErrMemoryLimit", err)
	}
}

// TestMemoryBudgetExit: a guest that exits non-zero after a memory.grow
// refused (a Go guest out of memory exits 2) keeps its status, and its
// stderr ends with a note that its memory was at the job's limit: a
// newcomer's training shard had read only "exit status 2".
func TestMemoryBudgetExit(t *testing.T) {
	sb := newSandbox(t, Config{})
	in := binary.LittleEndian.AppendUint32(nil, 3)    // tensor, grow, exit 2
	in = binary.LittleEndian.AppendUint32(in, 480)    // 30 MiB of memory
	in = binary.LittleEndian.AppendUint32(in, 40<<20) // 40 MiB of tensors
	res, err := sb.Run(context.Background(), Job{Module: readFile(t, "testdata/budget.wasm"), Input: in},
		NewJobConfig().WithMemoryLimit(64<<20))
	if err != nil || res.ExitCode != 2 || !strings.Contains(string(res.Stderr), "memory was at its limit of 67108864 bytes (--memory) when it exited 2") {
		t.Fatalf("exit %d, stderr %q, %v; want exit 2 with the note", res.ExitCode, res.Stderr, err)
	}
	in[0] = 1 // no exit: a refused grow that the guest survives is no note
	if res, err := sb.Run(context.Background(), Job{Module: readFile(t, "testdata/budget.wasm"), Input: in},
		NewJobConfig().WithMemoryLimit(64<<20)); err != nil || res.ExitCode != 0 || len(res.Stderr) != 0 {
		t.Fatalf("exit %d, stderr %q, %v; want exit 0, nothing on stderr", res.ExitCode, res.Stderr, err)
	}
}
