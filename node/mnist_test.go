package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// mnistDir is the directory of the four MNIST IDX files
// (scripts/mnist-data.sh fetches them once).
func mnistDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "scripts", "mnist-data.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/mnist-data.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestMNISTFederated: MNIST trained by federated averaging over the
// network. 4 providers; every round is one sharded job of 4 shards, 2
// replicas each (exact mode: the replicas agree bit for bit), each shard
// training the global weights for 2 epochs on its quarter of the 60,000
// training images (a 47 MB data blob), and a reduce job (jobs/fedavg)
// averaging them. After 3 rounds, inference of the 10,000 test images,
// sharded 10 ways and verified, is at least 97% right, and gives the same
// predictions as one local run.
func TestMNISTFederated(t *testing.T) {
	dir := mnistDir(t)
	net := startNetwork(t, 4, nil)
	c := net.client
	ctx := context.Background()
	file := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	data := func(name, path string) wire.DataBlob {
		b := file(path)
		return wire.DataBlob{Name: name, Digest: putBlob(t, c, b), Size: int64(len(b))}
	}
	train := []wire.DataBlob{data("images", "train-images-idx3-ubyte"), data("labels", "train-labels-idx1-ubyte")}
	test := []wire.DataBlob{data("images", "t10k-images-idx3-ubyte")}
	labels := file("t10k-labels-idx1-ubyte")[8:]
	module, reducer := readTestdata(t, "jobs/mnist/mnist.wasm"), readTestdata(t, "jobs/fedavg/fedavg.wasm")
	spec := Spec{Module: putBlob(t, c, module), ModuleSize: int64(len(module)), Replicas: 2,
		Timeout: 5 * time.Minute, Memory: 512 << 20}
	reduce := &ReduceSpec{Module: putBlob(t, c, reducer), ModuleSize: int64(len(reducer))}

	var weights []byte // the first round starts from the job's initial weights
	for round := 1; round <= 3; round++ {
		s := spec
		s.Args, s.Data = []string{"train", "2", "0.05", "32"}, train
		start := time.Now()
		sj, err := c.SubmitSharded(ctx, ShardedSpec{Spec: s, Inputs: sameInput(t, c, weights, 4), Reduce: reduce}, nil)
		if err != nil || sj.State != store.JobVerified {
			t.Fatalf("round %d: %+v, %v", round, sj, err)
		}
		for i, job := range sj.Shards {
			if job.Agree != 2 {
				t.Fatalf("round %d shard %d: %d replicas agree, want 2", round, i, job.Agree)
			}
		}
		if weights, err = c.Blob(sj.Output, 1<<20); err != nil {
			t.Fatal(err)
		}
		preds := infer(t, c, spec, test, weights)
		t.Logf("round %d: %v, training loss %.4f, test accuracy %.2f%%", round, time.Since(start).Round(time.Millisecond),
			math.Float32frombits(binary.LittleEndian.Uint32(weights[12:])), 100*accuracy(preds, labels))
		if round == 3 {
			if acc := accuracy(preds, labels); acc < 0.97 {
				t.Errorf("test accuracy %.2f%% after 3 rounds, want at least 97%%", 100*acc)
			}
			// The network's predictions are one local run's.
			sb, err := ihost.New(ctx, ihost.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(ctx)
			res, err := sb.Run(ctx, ihost.Job{Module: module, Input: weights,
				Data: map[string]string{"images": filepath.Join(dir, "t10k-images-idx3-ubyte")}},
				ihost.NewJobConfig().WithArgs("infer").WithMemoryLimit(512<<20).WithTimeout(5*time.Minute))
			if err != nil || !bytes.Equal(res.Output, preds) {
				t.Fatalf("local predictions differ from the network's (%d vs %d bytes), %v", len(res.Output), len(preds), err)
			}
		}
	}
}

// sameInput stores b once and names it as the input of n shards.
func sameInput(t *testing.T, n *Node, b []byte, shards int) []ShardInput {
	d := putBlob(t, n, b)
	ins := make([]ShardInput, shards)
	for i := range ins {
		ins[i] = ShardInput{Input: d, InputSize: int64(len(b))}
	}
	return ins
}

// infer predicts the digits of the test images in 10 verified shards.
func infer(t *testing.T, c *Node, spec Spec, test []wire.DataBlob, weights []byte) []byte {
	t.Helper()
	spec.Args, spec.Data = []string{"infer"}, test
	sj, err := c.SubmitShards(context.Background(), spec, sameInput(t, c, weights, 10), 0, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("inference: %+v, %v", sj, err)
	}
	preds, err := c.Blob(sj.Output, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return preds
}

func accuracy(preds, labels []byte) float64 {
	if len(preds) != len(labels) {
		return 0
	}
	right := 0
	for i := range preds {
		if preds[i] == labels[i] {
			right++
		}
	}
	return float64(right) / float64(len(labels))
}
