package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestCharTransformer: the character-level transformer (jobs/chargpt) as
// network jobs of 2 replicas in exact mode. A 30-step training job, which
// runs some 4,000 host GEMMs and as much guest arithmetic, gives the same
// checkpoint bits on both providers (else the job would not verify); its
// checkpoint, a blob, is the input of an evaluation job, which finds the
// held-out text better predicted than by the untrained model.
func TestCharTransformer(t *testing.T) {
	net := startNetwork(t, 2, nil).vouch()
	c := net.client
	ctx := context.Background()
	text := readTestdata(t, "../README.md") // any UTF-8 text will do
	module := readTestdata(t, "jobs/chargpt/chargpt.wasm")
	precompile(t, module, 256<<20)
	spec := jobs.Spec{Terms: wire.Terms{Module: putBlob(t, c, module), ModuleSize: int64(len(module)), TimeoutMS: 120_000,
		Memory: 256 << 20, Data: []wire.DataBlob{{Name: "text", Digest: putBlob(t, c, text), Size: int64(len(text))}}},
		Replicas: 2}
	submit := func(input []byte, args ...string) []byte {
		t.Helper()
		s := spec
		s.Input, s.InputSize, s.Args = putBlob(t, c, input), int64(len(input)), args
		job, err := c.Submit(ctx, s, nil)
		if err != nil || job.State != store.JobVerified || job.Agree != 2 {
			t.Fatalf("%v: %+v, %v", args, job, err)
		}
		out, err := c.Blob(job.Output, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bits := func(report []byte) float64 {
		var b float64
		if _, err := fmt.Sscanf(string(report), "%f bits/char", &b); err != nil {
			t.Fatalf("eval said %q: %v", report, err)
		}
		return b
	}
	before := bits(submit(nil, "eval"))
	ck := submit(nil, "train", "30")
	if steps := binary.LittleEndian.Uint32(ck[8:]); steps != 30 {
		t.Fatalf("checkpoint after %d steps, want 30", steps)
	}
	after := bits(submit(ck, "eval"))
	t.Logf("held-out bits/char: %.3f untrained, %.3f after 30 steps (training loss %.3f nats)",
		before, after, math.Float32frombits(binary.LittleEndian.Uint32(ck[12:])))
	if after >= before-0.3 {
		t.Errorf("30 steps took held-out bits/char from %.3f to %.3f; want at least 0.3 less", before, after)
	}
}
