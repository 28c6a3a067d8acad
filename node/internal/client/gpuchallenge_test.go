package client

import (
	"testing"

	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
)

// TestGPUChallengeNeedsGPU: only a requirement that the GPU claim alone
// satisfies calls for a challenge.
func TestGPUChallengeNeedsGPU(t *testing.T) {
	gpu := &wire.CapabilityAdvert{Cores: 8, MemoryBytes: 64 << 30, GPUs: []wire.GPU{fakeH200}, Backends: []string{"reference", "cpu-avx2", "cuda"}}
	cpu := &wire.CapabilityAdvert{Cores: 8, MemoryBytes: 64 << 30, Backends: []string{"reference", "cpu-avx2"}}
	for _, tc := range []struct {
		req  string
		a    *wire.CapabilityAdvert
		want bool
	}{
		{"", gpu, false},
		{"cores >= 4", gpu, false},
		{"gpus >= 1", gpu, true},
		{"gpus >= 1 && vram >= 64", gpu, true},
		{`has("cuda")`, gpu, true},
		{`gpu == "NVIDIA H200"`, gpu, true},
		{"gpus == 0", gpu, false}, // does not match at all
		{"gpus >= 1 || cores >= 4", gpu, false},
		{"gpus >= 1", cpu, false},
		{"cores >= 4", cpu, false},
		{"", nil, false},
	} {
		req, err := requirement.Compile(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := needsGPU(req, tc.a); got != tc.want {
			t.Errorf("needsGPU(%q, gpu advert %v) = %v, want %v", tc.req, tc.a != nil && len(tc.a.GPUs) > 0, got, tc.want)
		}
	}
}

var fakeH200 = wire.GPU{Name: "NVIDIA H200", MemoryBytes: 141 << 30, SMs: 132, ComputeMajor: 9}
