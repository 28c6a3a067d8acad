package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/proofs/gemmproof"
	"github.com/infernet/infernet/proofs/testkeys"
)

// gemmGuest is testdata/gemmproof.wasm (make -C host/testdata): it runs the
// integer GEMMs listed on stdin and prints each op's errno, operands and result.
func gemmGuest(tb testing.TB) []byte {
	tb.Helper()
	wasm, err := os.ReadFile("testdata/gemmproof.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	return wasm
}

// testKeys serves test-only Groth16 keys (proofs/testkeys: cached on disk
// and in memory) for the templates in sizes.
type testKeys struct{ sizes []int }

var keysForTests = &testKeys{sizes: []int{16, 32}}

func (k *testKeys) keys(n int) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	if !slices.Contains(k.sizes, n) {
		return nil, nil, fmt.Errorf("no test key for template %d", n)
	}
	ccs, err := gemmproof.ConstraintSystem(n)
	if err != nil {
		return nil, nil, err
	}
	return testkeys.Setup(ccs)
}

// ProvingKey implements gemmproof.Keys.
func (k *testKeys) ProvingKey(n int) (groth16.ProvingKey, error) {
	pk, _, err := k.keys(n)
	return pk, err
}

func (k *testKeys) verifyingKey(tb testing.TB, n int) groth16.VerifyingKey {
	tb.Helper()
	_, vk, err := k.keys(n)
	if err != nil {
		tb.Fatal(err)
	}
	return vk
}

// guestOp is one line of the gemmproof guest's output.
type guestOp struct {
	errno abi.Errno
	a, b  []int8
	c     []int32
}

func parseGuest(t *testing.T, out []byte) []guestOp {
	t.Helper()
	var ops []guestOp
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), " | ")
		if len(f) != 4 {
			t.Fatalf("bad guest line %q", line)
		}
		var i, errno int
		if _, err := fmt.Sscan(f[0], &i, &errno); err != nil || i != len(ops) {
			t.Fatalf("bad guest line %q", line)
		}
		ops = append(ops, guestOp{errno: abi.Errno(errno), a: ints[int8](t, f[1]), b: ints[int8](t, f[2]), c: ints[int32](t, f[3])})
	}
	return ops
}

func ints[T int8 | int32](t *testing.T, s string) []T {
	var out []T
	for _, w := range strings.Fields(s) {
		v, err := strconv.ParseInt(w, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, T(v))
	}
	return out
}

// product returns op(A)·op(B) of stored-layout i8 operands, as the test
// computes it.
func product(m, n, k int, flags int32, a, b []int8) []int32 {
	c := make([]int32, m*n)
	for i := range m {
		for j := range n {
			for l := range k {
				x, y := a[i*k+l], b[l*n+j]
				if flags&abi.GemmTransA != 0 {
					x = a[l*m+i]
				}
				if flags&abi.GemmTransB != 0 {
					y = b[j*k+l]
				}
				c[i*n+j] += int32(x) * int32(y)
			}
		}
	}
	return c
}

// TestProofMode runs a Go guest doing a few integer GEMMs in proof mode and
// checks the attached proofs: one per op that ran, each verifying against
// the template's key and the digests a verifier computes from the true
// matrices, none verifying once tampered with; ops that cannot be proven
// get ENOPROOF; results are those of a run without proof mode.
func TestProofMode(t *testing.T) {
	sb := newSandbox(t, Config{ProvingKeys: keysForTests})
	type op struct {
		form    string
		m, n, k int
		flags   int32
		errno   abi.Errno // in proof mode
		tmpl    int       // template of its proof, with errno OK
	}
	ops := []op{
		{"ptr", 8, 8, 8, 0, abi.OK, 16},
		{"handle", 20, 12, 16, abi.GemmTransB, abi.OK, 32},
		{"handle", 4, 4, 4, abi.GemmAccumulate, abi.ENOPROOF, 0},
		{"ptr", 4, 4, 4, abi.GemmAccumulate, abi.ENOPROOF, 0},
		{"ptr", 33, 2, 2, 0, abi.ENOPROOF, 0}, // larger than the job's largest template
		{"ptr", 3, 5, 7, abi.GemmTransA, abi.OK, 16},
	}
	var input strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&input, "%s %d %d %d %d\n", o.form, o.m, o.n, o.k, o.flags)
	}
	job := Job{Module: gemmGuest(t), Input: []byte(input.String())}
	cfg := NewJobConfig().WithProofMode(true).WithProofTemplates(32, 16).WithMaxProofs(3)

	plain, err := sb.Run(context.Background(), job, NewJobConfig())
	if err != nil || plain.ExitCode != 0 || plain.Proofs != nil {
		t.Fatalf("without proof mode: %v, exit %d, %d proofs, stderr %q", err, plain.ExitCode, len(plain.Proofs), plain.Stderr)
	}
	res, err := sb.Run(context.Background(), job, cfg)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("proof mode: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
	}
	t.Logf("guest %v, proving %v for %d proofs", res.Duration, res.Proving, len(res.Proofs))
	if res.Proving <= 0 {
		t.Error("Proving time not reported")
	}
	got, want := parseGuest(t, res.Output), parseGuest(t, plain.Output)
	if len(got) != len(ops) {
		t.Fatalf("guest ran %d ops, want %d", len(got), len(ops))
	}
	var proven []int // indices into ops of the proven ones
	for i, o := range ops {
		if got[i].errno != o.errno {
			t.Errorf("op %d (%+v): errno %v, want %v", i, o, got[i].errno, o.errno)
		}
		if want[i].errno != abi.OK {
			t.Errorf("op %d without proof mode: errno %v", i, want[i].errno)
		}
		if o.errno == abi.OK {
			proven = append(proven, i)
			if !slices.Equal(got[i].c, want[i].c) {
				t.Errorf("op %d: proof mode changed the result", i)
			}
		}
	}
	if len(res.Proofs) != len(proven) {
		t.Fatalf("%d proofs, want %d", len(res.Proofs), len(proven))
	}
	for j, p := range res.Proofs {
		o, g := ops[proven[j]], got[proven[j]]
		if p.Index != j || p.Template != o.tmpl || p.M != o.m || p.N != o.n || p.K != o.k || p.Flags != o.flags {
			t.Errorf("proof %d: header %d %d %d×%d×%d %d, want %d %d %d×%d×%d %d", j,
				p.Index, p.Template, p.M, p.N, p.K, p.Flags, j, o.tmpl, o.m, o.n, o.k, o.flags)
		}
		// The verifier's side: digests from the true matrices, C recomputed.
		c := product(o.m, o.n, o.k, o.flags, g.a, g.b)
		if !slices.Equal(c, g.c) {
			t.Fatalf("op %d: the guest's C is not the product", proven[j])
		}
		rec, err := gemmproof.NewOp(o.tmpl, o.m, o.n, o.k, o.flags, g.a, g.b, c)
		if err != nil {
			t.Fatal(err)
		}
		da, db, dc, err := rec.Digests()
		if err != nil {
			t.Fatal(err)
		}
		if p.DigestA != da || p.DigestB != db || p.DigestC != dc {
			t.Errorf("proof %d: digests differ from the true matrices'", j)
		}
		vk := keysForTests.verifyingKey(t, p.Template)
		if err := gemmproof.Verify(vk, p); err != nil {
			t.Errorf("proof %d: %v", j, err)
		}
		bad := p
		bad.DigestC[31] ^= 1
		if err := gemmproof.Verify(vk, bad); !errors.Is(err, gemmproof.ErrInvalid) {
			t.Errorf("proof %d with a tampered digest: %v, want ErrInvalid", j, err)
		}
		bad = p
		bad.Groth16 = slices.Clone(p.Groth16)
		bad.Groth16[len(bad.Groth16)/2] ^= 0x10
		if err := gemmproof.Verify(vk, bad); !errors.Is(err, gemmproof.ErrInvalid) {
			t.Errorf("proof %d tampered with: %v, want ErrInvalid", j, err)
		}
	}
	// A proof is bound to its template's key.
	if len(res.Proofs) > 1 {
		p := res.Proofs[1] // template 32
		if err := gemmproof.Verify(keysForTests.verifyingKey(t, 16), p); err == nil {
			t.Error("a template-32 proof verified with the template-16 key")
		}
	}
}

// TestProofModeRefused: proof mode without usable keys or with a bad config
// fails before the guest runs; past the cap of proven ops the job stops.
func TestProofModeRefused(t *testing.T) {
	wasm := gemmGuest(t)
	on := NewJobConfig().WithProofMode(true).WithProofTemplates(16, 32)
	tests := []struct {
		name  string
		keys  gemmproof.Keys
		cfg   JobConfig
		input string
		want  error
		ran   int // guest output lines with want set
	}{
		{name: "no keys", cfg: on, want: ErrNoProvingKeys},
		{name: "no key for template 64", keys: keysForTests, cfg: on.WithProofTemplates(16, 32, 64), want: ErrNoProvingKeys},
		{name: "key source fails", keys: gemmproof.KeyFunc(func(int) (groth16.ProvingKey, error) { return nil, errors.New("disk on fire") }),
			cfg: on, want: ErrNoProvingKeys},
		{name: "cap", keys: keysForTests, cfg: on.WithMaxProofs(2), input: "ptr 2 2 2 0\nhandle 2 2 2 0\nptr 2 2 2 0\nptr 2 2 2 0\n",
			want: ErrProofLimit, ran: 2},
		{name: "cap counts refused ops out", keys: keysForTests, cfg: on.WithMaxProofs(1),
			input: "ptr 2 2 2 4\nptr 40 1 1 0\nptr 2 2 2 0\nptr 2 2 2 0\n", want: ErrProofLimit, ran: 3},
		{name: "template not offered", keys: keysForTests, cfg: on.WithProofTemplates(16, 48)},
		{name: "templates repeated", keys: keysForTests, cfg: on.WithProofTemplates(16, 16)},
		{name: "cap not positive", keys: keysForTests, cfg: on.WithMaxProofs(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t, Config{ProvingKeys: tt.keys})
			res, err := sb.Run(context.Background(), Job{Module: wasm, Input: []byte(tt.input)}, tt.cfg)
			if tt.want == nil { // a config error
				if err == nil || !strings.Contains(err.Error(), "job config") {
					t.Fatalf("err = %v, want a job config error", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.ran == 0 {
				if res != nil {
					t.Errorf("the guest ran: %q", res.Output)
				}
				return
			}
			if n := strings.Count(string(res.Output), "\n"); n != tt.ran {
				t.Errorf("guest printed %d ops before the stop, want %d", n, tt.ran)
			}
			if len(res.Proofs) != 0 {
				t.Errorf("a stopped job got %d proofs", len(res.Proofs))
			}
		})
	}
}

// TestProofModeCanceled: a context done between proofs stops proving with
// ErrCanceled.
func TestProofModeCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := &Result{}
	if err := prove(ctx, res, []gemmproof.Op{{Template: 16}}, nil); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("prove with a cancelled context: %v, want ErrCanceled", err)
	}
	if len(res.Proofs) != 0 {
		t.Errorf("%d proofs", len(res.Proofs))
	}
}
