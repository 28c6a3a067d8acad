package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor/reference"
)

// TestBadModules runs every hostile module of testdata/bad in one sandbox and
// checks the cause each is refused or stopped with. The sandbox must survive
// all of them and still run a good job afterwards. Each case gets a time
// limit that fits what it tests: a second for the modules that must time
// out, and a minute for the others, whose cause must come first however
// loaded the machine is (a deep recursion took over a second to overflow
// its stack on a loaded machine, and timed out instead of trapping).
func TestBadModules(t *testing.T) {
	sb := newSandbox(t, Config{})
	cfg := NewJobConfig().
		WithMemoryLimit(64 << 20).
		WithMaxOutput(1 << 20).
		WithMaxStderr(64 << 10)
	tests := []struct {
		file string
		want error  // nil: runs to its end
		exit uint32 // with want == nil
		out  string // substring of stdout, with want == nil
	}{
		{file: "garbage.wasm", want: ErrInvalidModule},
		{file: "garbage_header.wasm", want: ErrInvalidModule},
		{file: "truncated.wasm", want: ErrInvalidModule},
		{file: "no_start.wasm", want: ErrInvalidModule},
		{file: "bad_start_type.wasm", want: ErrInvalidModule},
		{file: "data_oob.wasm", want: ErrInvalidModule},
		{file: "locals_bomb.wasm", want: ErrInvalidModule},
		{file: "nesting_bomb.wasm", want: ErrInvalidModule},
		{file: "unknown_import.wasm", want: ErrImportNotAllowed},
		{file: "future_import.wasm", want: ErrHostTooOld},
		{file: "import_memory.wasm", want: ErrImportNotAllowed},
		{file: "import_global.wasm", want: ErrImportNotAllowed},
		{file: "import_table.wasm", want: ErrImportNotAllowed},
		{file: "table_huge.wasm", want: ErrMemoryLimit},
		{file: "table_fill.wasm", want: ErrMemoryLimit},
		{file: "memory_min_huge.wasm", want: ErrMemoryLimit},
		{file: "trap_unreachable.wasm", want: ErrTrap},
		{file: "div_by_zero.wasm", want: ErrTrap},
		{file: "int_overflow.wasm", want: ErrTrap},
		{file: "oob_load.wasm", want: ErrTrap},
		{file: "stack_overflow.wasm", want: ErrTrap},
		{file: "infinite_loop.wasm", want: ErrTimeout},
		{file: "exp_recursion.wasm", want: ErrTimeout},
		{file: "start_loop.wasm", want: ErrTimeout},
		{file: "output_flood.wasm", want: ErrOutputLimit},
		{file: "stderr_flood.wasm", want: ErrTimeout}, // stderr is trimmed, not fatal (TestStderrKept)
		// memory.grow fails (-1) at the limit; the guest reports and exits.
		{file: "memory_grow_loop.wasm", out: "grown to 1024 pages"}, // the 64 MiB limit
		{file: "proc_exit3.wasm", exit: 3},
		// Hostile pointers are answered with errno values, never a crash; the
		// modules print each answer and the mismatches against the ABI.
		{file: "wasi_hostile.wasm", out: "mismatches 0"},
		{file: "infernet_hostile.wasm", out: "mismatches 0"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			wasm := readFile(t, "../testdata/bad/"+tt.file)
			cfg := cfg.WithTimeout(time.Minute)
			if tt.want == ErrTimeout {
				cfg = cfg.WithTimeout(time.Second)
			}
			res, err := sb.Run(context.Background(), Job{Module: wasm}, cfg)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				if tt.want == ErrHostTooOld && errors.Is(err, ErrImportNotAllowed) {
					t.Errorf("a later ABI's function is the job's fault: %v", err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("cause is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want a run to the end", err)
			}
			if res.ExitCode != tt.exit || !strings.Contains(string(res.Output), tt.out) {
				t.Fatalf("exit %d output %q, want exit %d and %q", res.ExitCode, tail(res.Output), tt.exit, tt.out)
			}
		})
	}
	// The sandbox still serves good jobs.
	res, err := sb.Run(context.Background(), Job{Module: readFile(t, "../testdata/jobs/echo/echo.wasm"), Input: []byte("still alive")}, cfg)
	if err != nil || string(res.Output) != "still alive" {
		t.Fatalf("after the bad modules: %v %q", err, res.Output)
	}
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }

// TestLimits checks that each limit stops a job with its cause and keeps the
// output produced before it.
func TestLimits(t *testing.T) {
	sb := newSandbox(t, Config{})
	cpu := readFile(t, "../testdata/jobs/cpu/cpu.wasm")
	cpuInput := readFile(t, "../testdata/jobs/cpu/input.txt")
	flood := readFile(t, "../testdata/bad/output_flood.wasm")
	tests := []struct {
		name  string
		wasm  []byte
		input []byte
		cfg   JobConfig
		want  error
	}{
		{"timeout", cpu, cpuInput, NewJobConfig().WithTimeout(50 * time.Millisecond), ErrTimeout},
		{"fuel", cpu, cpuInput, NewJobConfig().WithFuelLimit(5_000_000), ErrFuelLimit},
		{"output", flood, nil, NewJobConfig().WithMaxOutput(1000), ErrOutputLimit},
		{"memory below the module's minimum", cpu, cpuInput, NewJobConfig().WithMemoryLimit(64 << 10), ErrMemoryLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), Job{Module: tt.wasm, Input: tt.input}, tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.name == "output" && len(res.Output) != 1000 {
				t.Errorf("kept %d bytes of output, want the first 1000", len(res.Output))
			}
		})
	}
}

// TestTimeoutInHostOp: a deadline interrupts a long tensor op (a 2048³ GEMM
// on the reference kernel takes seconds), not only guest code.
func TestTimeoutInHostOp(t *testing.T) {
	sb := newSandbox(t, Config{})
	start := time.Now()
	_, err := sb.Run(context.Background(), Job{Module: readFile(t, "testdata/gemmbench.wasm"), Input: []byte("2048 100")},
		NewJobConfig().WithTimeout(300*time.Millisecond).WithMemoryLimit(256<<20))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	// The job's 100 GEMMs take minutes on the reference kernel, which
	// checks its context every few ms: a minute shows the deadline stopped
	// it mid-op however loaded the machine is.
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("stopped after %v", took)
	}
}

// TestCancel: cancelling the caller's context stops a running guest.
func TestCancel(t *testing.T) {
	sb := newSandbox(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := sb.Run(ctx, Job{Module: readFile(t, "../testdata/bad/infinite_loop.wasm")}, NewJobConfig())
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
}

// TestFuelDeterministic: fuel is the same on every run, stops a job at the
// same point whatever the fuel slice (a provider setting), and grows with work.
func TestFuelDeterministic(t *testing.T) {
	wasm := readFile(t, "../testdata/jobs/wordcount/wordcount.wasm")
	input := readFile(t, "../testdata/jobs/wordcount/input.txt")
	var fuels []uint64
	for _, slice := range []uint64{1 << 10, 1 << 16, 1 << 22} {
		sb := newSandbox(t, Config{FuelSlice: slice})
		for range 2 {
			res, err := sb.Run(context.Background(), Job{Module: wasm, Input: input}, NewJobConfig())
			if err != nil {
				t.Fatal(err)
			}
			fuels = append(fuels, res.Fuel)
		}
		// A fuel limit below the job's need stops it with the same partial
		// output on every slice size.
		res, err := sb.Run(context.Background(), Job{Module: wasm, Input: input}, NewJobConfig().WithFuelLimit(fuels[0]/2))
		if !errors.Is(err, ErrFuelLimit) {
			t.Fatalf("slice %d: err = %v, want ErrFuelLimit", slice, err)
		}
		if res.Fuel <= fuels[0]/2 || res.Fuel > fuels[0]/2+1<<20 {
			t.Errorf("slice %d: stopped at %d fuel, limit %d", slice, res.Fuel, fuels[0]/2)
		}
	}
	for _, f := range fuels {
		if f != fuels[0] {
			t.Fatalf("fuel differs between runs and slices: %v", fuels)
		}
	}
	small, err := newSandbox(t, Config{}).Run(context.Background(), Job{Module: wasm, Input: input[:len(input)/4]}, NewJobConfig())
	if err != nil || small.Fuel >= fuels[0] {
		t.Fatalf("a quarter of the input used %d fuel (err %v), the whole %d", small.Fuel, err, fuels[0])
	}
}

// TestDeterministicOutputs: the same job and input give identical output on
// repeated runs, concurrently, and across reference-kernel thread counts.
func TestDeterministicOutputs(t *testing.T) {
	jobs := []struct{ wasm, input string }{
		{"../testdata/jobs/mlp/mlp.wasm", "../testdata/jobs/mlp/input.txt"},
		{"../testdata/jobs/matmul/matmul.wasm", "../testdata/jobs/matmul/input.txt"},
		{"../testdata/jobs/wordcount/wordcount.wasm", "../testdata/jobs/wordcount/input.txt"},
		{"../testdata/jobs/cpugo/cpugo.wasm", ""}, // input below: a smaller image
	}
	for _, j := range jobs {
		t.Run(j.wasm[strings.LastIndex(j.wasm, "/")+1:], func(t *testing.T) {
			job := Job{Module: readFile(t, j.wasm), Input: []byte("200 300")}
			if j.input != "" {
				job.Input = readFile(t, j.input)
			}
			digests := map[string][]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, threads := range []int{1, 2, 3, 8} {
				sb := newSandbox(t, Config{Reference: reference.New(reference.Config{Threads: threads})})
				for range 2 {
					wg.Go(func() {
						res, err := sb.Run(context.Background(), job, NewJobConfig().WithMode(abi.ModeExact))
						if err != nil || res.ExitCode != 0 {
							t.Errorf("threads %d: %v exit %d", threads, err, res.ExitCode)
							return
						}
						d := fmt.Sprintf("%x fuel %d", sha256.Sum256(res.Output), res.Fuel)
						mu.Lock()
						digests[d] = append(digests[d], threads)
						mu.Unlock()
					})
				}
			}
			wg.Wait()
			if len(digests) != 1 {
				t.Fatalf("outputs differ: %v", digests)
			}
		})
	}
}

// TestExampleOutputs: every example job, run in exact mode on its example
// input, prints exactly its committed output.txt. For the tensor jobs this
// pins the reference kernels' results as seen through the ABI: the files
// must match on every machine.
func TestExampleOutputs(t *testing.T) {
	sb := newSandbox(t, Config{})
	for _, job := range []string{"mlp", "matmul", "wordcount", "cpu", "cpugo", "echo", "cat"} {
		t.Run(job, func(t *testing.T) {
			dir := "../testdata/jobs/" + job + "/"
			res, err := sb.Run(context.Background(), Job{Module: readFile(t, dir+job+".wasm"), Input: readFile(t, dir+"input.txt")}, NewJobConfig())
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%v exit %d: %s", err, res.ExitCode, res.Stderr)
			}
			if want := readFile(t, dir+"output.txt"); !bytes.Equal(res.Output, want) {
				t.Fatalf("output %q, want %q", tail(res.Output), tail(want))
			}
		})
	}
}

// TestSeed: the guest's random source is deterministic per seed.
func TestSeed(t *testing.T) {
	sb := newSandbox(t, Config{})
	wasm := readFile(t, "testdata/random.wasm")
	run := func(seed byte) []byte {
		res, err := sb.Run(context.Background(), Job{Module: wasm}, NewJobConfig().WithSeed([32]byte{seed}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Output
	}
	a, b, c := run(1), run(1), run(2)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatalf("seed 1 twice: %q %q; seed 2: %q", a, b, c)
	}
}

// TestCompileCache: the second run of a module does not compile, a run with
// another memory limit does, and eviction keeps the cache bounded.
func TestCompileCache(t *testing.T) {
	sb := newSandbox(t, Config{CacheModules: 2})
	echo := readFile(t, "../testdata/jobs/echo/echo.wasm")
	run := func(wasm []byte, cfg JobConfig) *Result {
		res, err := sb.Run(context.Background(), Job{Module: wasm, Input: []byte("x")}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := run(echo, NewJobConfig()); r.Compile == 0 {
		t.Fatal("first run did not compile")
	}
	if r := run(echo, NewJobConfig()); r.Compile != 0 {
		t.Fatalf("second run compiled again (%v)", r.Compile)
	}
	if r := run(echo, NewJobConfig().WithMemoryLimit(128<<20)); r.Compile == 0 {
		t.Fatal("another memory limit reused the module compiled for the first")
	}
	if _, err := sb.Compile(context.Background(), readFile(t, "../testdata/jobs/cpu/cpu.wasm"), NewJobConfig()); err != nil {
		t.Fatal(err)
	}
	sb.mu.Lock()
	n := sb.lru.Len()
	sb.mu.Unlock()
	if n > 2 {
		t.Fatalf("cache holds %d modules, limit 2", n)
	}
}

// TestStderrKept: stderr past its limit is trimmed, not fatal: its first
// half and its last are kept, with a line saying how much lies between,
// whatever the sizes of the writes; a job that floods it runs on to its
// own end (here its time limit) with the kept bytes bounded.
func TestStderrKept(t *testing.T) {
	all := make([]byte, 10_000)
	for i := range all {
		all[i] = byte('a' + i%26)
	}
	for _, tc := range []struct {
		limit  int64
		writes []int // sizes, summing to at most len(all)
	}{
		{limit: 100, writes: []int{10, 10, 10}},       // within the limit
		{limit: 100, writes: []int{100}},              // exactly
		{limit: 100, writes: []int{60, 1, 1, 300, 7}}, // small and large past it
		{limit: 101, writes: slices.Repeat([]int{3}, 2000)},
		{limit: 0, writes: []int{5, 5}},
	} {
		w := newStderrBuffer(tc.limit)
		n := 0
		for _, k := range tc.writes {
			if got, err := w.Write(all[n : n+k]); got != k || err != nil {
				t.Fatalf("limit %d: Write(%d bytes) = %d, %v", tc.limit, k, got, err)
			}
			n += k
		}
		want := string(all[:n])
		if int64(n) > tc.limit {
			half, keep := int(tc.limit/2), int(tc.limit-tc.limit/2)
			want = fmt.Sprintf("%s\n[infernet: %d bytes of stderr dropped here]\n%s", all[:half], n-half-keep, all[n-keep:n])
		}
		if got := string(w.Bytes()); got != want {
			t.Errorf("limit %d, writes %v: %q; want %q", tc.limit, tc.writes[:min(len(tc.writes), 5)], got, want)
		}
	}

	sb := newSandbox(t, Config{})
	cfg := NewJobConfig().WithMemoryLimit(64 << 20).WithMaxStderr(64 << 10).WithTimeout(300 * time.Millisecond)
	res, err := sb.Run(context.Background(), Job{Module: readFile(t, "../testdata/bad/stderr_flood.wasm")}, cfg)
	if !errors.Is(err, ErrTimeout) || res == nil {
		t.Fatalf("a stderr flood: %v; want it to run to its time limit", err)
	}
	if len(res.Stderr) > 65<<10 || !bytes.Contains(res.Stderr, []byte("bytes of stderr dropped here")) || res.Stderr[0] != 'e' {
		t.Errorf("a flood's stderr kept: %d bytes, %q…; want the limit's, with the dropped bytes counted", len(res.Stderr), res.Stderr[:min(len(res.Stderr), 40)])
	}
}

// TestImportOrder: a module that imports an unknown infernet function
// (ErrHostTooOld: the provider's limit) and then a function no host gives
// (env.evil: ErrImportNotAllowed, the job's fault) is the job's fault, as
// ModuleABI (the client's check) says; the sandbox had answered the first
// import it could not give (a newcomer's walk).
func TestImportOrder(t *testing.T) {
	// (module (import "infernet" "does_not_exist" (func (param i32) (result i32)))
	//         (import "env" "evil" (func (param i32) (result i32)))
	//         (memory (export "memory") 1) (func (export "_start")))
	wasm := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x09, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00, 0x02, 0x26, 0x02, 0x08, 0x69, 0x6e, 0x66, 0x65, 0x72, 0x6e, 0x65, 0x74, 0x0e, 0x64, 0x6f, 0x65, 0x73, 0x5f, 0x6e, 0x6f, 0x74, 0x5f, 0x65, 0x78, 0x69, 0x73, 0x74, 0x00, 0x00, 0x03, 0x65, 0x6e, 0x76, 0x04, 0x65, 0x76, 0x69, 0x6c, 0x00, 0x00, 0x03, 0x02, 0x01, 0x01, 0x05, 0x03, 0x01, 0x00, 0x01, 0x07, 0x13, 0x02, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00, 0x06, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x02, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}
	if _, err := ModuleABI(wasm); !errors.Is(err, ErrImportNotAllowed) {
		t.Fatalf("ModuleABI: %v, want ErrImportNotAllowed", err)
	}
	sb := newSandbox(t, Config{})
	_, err := sb.Run(context.Background(), Job{Module: wasm}, NewJobConfig())
	if !errors.Is(err, ErrImportNotAllowed) || errors.Is(err, ErrHostTooOld) {
		t.Fatalf("sandbox: %v, want ErrImportNotAllowed (env.evil), as ModuleABI answers", err)
	}
}
