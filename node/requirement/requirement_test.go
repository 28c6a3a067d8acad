package requirement

import (
	"errors"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/wire"
)

func TestMatch(t *testing.T) {
	gpu := &wire.CapabilityAdvert{
		Cores: 16, MemoryBytes: 64 << 30, MaxMemory: 4 << 30, Slots: 4, FreeSlots: 1, Price: 1000,
		Backends: []string{"reference", "cpu-avx512", "cuda"}, Software: "0.2.0",
		GPUs: []wire.GPU{{Name: "NVIDIA RTX 4090", MemoryBytes: 24 << 30, ComputeMajor: 8, ComputeMinor: 9}},
	}
	cpu := &wire.CapabilityAdvert{Cores: 2, MemoryBytes: 8 << 30, Slots: 2, FreeSlots: 2, Backends: []string{"reference", "cpu-avx2"}}
	tests := []struct {
		expr     string
		gpu, cpu bool
	}{
		{"", true, true},
		{"vram >= 16 && reputation > 0.8", true, false},
		{"gpus == 0", false, true},
		{`has("cuda")`, true, false},
		{`has("cpu-")`, true, true},
		{`"cpu-avx2" in backends`, false, true},
		{"cores >= 8 and memory >= 32", true, false},
		{"price <= 500", false, true},
		{"free > 0 && slots >= 2", true, true},
		{`gpu contains "4090" && cc >= 8.9`, true, false},
		{`version == "0.2.0"`, true, false},
	}
	for _, tt := range tests {
		p, err := Compile(tt.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		for _, c := range []struct {
			name string
			ad   *wire.CapabilityAdvert
			want bool
		}{{"gpu", gpu, tt.gpu}, {"cpu", cpu, tt.cpu}} {
			got, err := p.Match(FromAdvert(c.ad, 0.9))
			if err != nil || got != c.want {
				t.Errorf("%q on %s = %v, %v; want %v", tt.expr, c.name, got, err, c.want)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, src := range []string{
		"vram >=",                  // syntax
		"vramm > 1",                // unknown name
		"cores + 1",                // not boolean
		`gpu > 3`,                  // type mismatch
		string(make([]byte, 2000)), // too long
	} {
		if _, err := Compile(src); !errors.Is(err, ErrInvalid) {
			t.Errorf("Compile(%.20q) = %v, want ErrInvalid", src, err)
		}
	}
	// A name it does not know: the error lists those it does.
	if _, err := Compile("cpus >= 1"); err == nil || !strings.Contains(err.Error(), "the names are cores, memory") {
		t.Errorf("an unknown name: %v, want the names listed", err)
	}
}

func TestRuntimeErrorIsNoMatch(t *testing.T) {
	p, err := Compile(`backends[5] == "cuda"`)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := p.Match(FromAdvert(&wire.CapabilityAdvert{Backends: []string{"reference"}}, 1))
	if ok || err == nil {
		t.Fatalf("out-of-range index: match %v, err %v; want no match and an error", ok, err)
	}
}
