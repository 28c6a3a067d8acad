package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// mnistNet is 4 providers and a client holding the MNIST module, the data
// blobs of the training and test sets, and the test labels.
type mnistNet struct {
	c           *Node
	dir         string
	module      []byte
	spec        Spec // the module, 2 replicas, exact mode
	train, test []wire.DataBlob
	labels      []byte
}

func newMNISTNet(t *testing.T) *mnistNet {
	m := &mnistNet{dir: mnistDir(t), c: startNetwork(t, 4, nil).client}
	file := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(m.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	data := func(name, path string) wire.DataBlob {
		b := file(path)
		return wire.DataBlob{Name: name, Digest: putBlob(t, m.c, b), Size: int64(len(b))}
	}
	m.train = []wire.DataBlob{data("images", "train-images-idx3-ubyte"), data("labels", "train-labels-idx1-ubyte")}
	m.test = []wire.DataBlob{data("images", "t10k-images-idx3-ubyte")}
	m.labels = file("t10k-labels-idx1-ubyte")[8:]
	m.module = readTestdata(t, "jobs/mnist/mnist.wasm")
	m.spec = Spec{Module: putBlob(t, m.c, m.module), ModuleSize: int64(len(m.module)), Replicas: 2,
		Timeout: 5 * time.Minute, Memory: 512 << 20}
	return m
}

// reducer stores a reduce module of testdata/jobs.
func (m *mnistNet) reducer(t *testing.T, path string) *ReduceSpec {
	b := readTestdata(t, path)
	return &ReduceSpec{Module: putBlob(t, m.c, b), ModuleSize: int64(len(b))}
}

// round runs one sharded training job of 4 shards with reduce, every
// shard's 2 replicas agreeing, and returns its output.
func (m *mnistNet) round(t *testing.T, round int, s Spec, inputs []ShardInput, reduce *ReduceSpec) []byte {
	t.Helper()
	sj, err := m.c.SubmitSharded(context.Background(), ShardedSpec{Spec: s, Inputs: inputs, Reduce: reduce}, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("round %d: %+v, %v", round, sj, err)
	}
	for i, job := range sj.Shards {
		if job.Agree != 2 {
			t.Fatalf("round %d shard %d: %d replicas agree, want 2", round, i, job.Agree)
		}
	}
	out, err := m.c.Blob(sj.Output, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// accuracy classifies the test images with weights in 10 verified shards
// and returns the predictions and the share right.
func (m *mnistNet) accuracy(t *testing.T, weights []byte) ([]byte, float64) {
	t.Helper()
	spec := m.spec
	spec.Args, spec.Data = []string{"infer"}, m.test
	sj, err := m.c.SubmitShards(context.Background(), spec, sameInput(t, m.c, weights, 10), 0, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("inference: %+v, %v", sj, err)
	}
	preds, err := m.c.Blob(sj.Output, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	right := 0
	for i := range preds {
		if i < len(m.labels) && preds[i] == m.labels[i] {
			right++
		}
	}
	return preds, float64(right) / float64(len(m.labels))
}

func lossOf(weights []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(weights[12:]))
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
	m := newMNISTNet(t)
	ctx := context.Background()
	fedavg := m.reducer(t, "jobs/fedavg/fedavg.wasm")
	var weights []byte // the first round starts from the job's initial weights
	var preds []byte
	var acc float64
	for round := 1; round <= 3; round++ {
		s := m.spec
		s.Args, s.Data = []string{"train", "2", "0.05", "32"}, m.train
		start := time.Now()
		weights = m.round(t, round, s, sameInput(t, m.c, weights, 4), fedavg)
		preds, acc = m.accuracy(t, weights)
		t.Logf("round %d: %v, training loss %.4f, test accuracy %.2f%%", round, time.Since(start).Round(time.Millisecond), lossOf(weights), 100*acc)
	}
	if acc < 0.97 {
		t.Errorf("test accuracy %.2f%% after 3 rounds, want at least 97%%", 100*acc)
	}
	// The network's predictions are one local run's.
	sb, err := ihost.New(ctx, ihost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, ihost.Job{Module: m.module, Input: weights,
		Data: map[string]string{"images": filepath.Join(m.dir, "t10k-images-idx3-ubyte")}},
		ihost.NewJobConfig().WithArgs("infer").WithMemoryLimit(512<<20).WithTimeout(5*time.Minute))
	if err != nil || !bytes.Equal(res.Output, preds) {
		t.Fatalf("local predictions differ from the network's (%d vs %d bytes), %v", len(res.Output), len(preds), err)
	}
}

// TestMNISTDiLoCo: the same training by DiLoCo. A round's state (global
// weights, then the outer momentum) is a data blob that its 4 shards and
// its reduce job read: each shard runs 938 local SGD steps from the global
// weights (as many as 2 epochs of its quarter), and the reduce
// (jobs/diloco) averages them and takes an outer Nesterov step (η 0.7, μ
// 0.9). After 3 rounds, at least 97% of the test images are right.
func TestMNISTDiLoCo(t *testing.T) {
	m := newMNISTNet(t)
	diloco := m.reducer(t, "jobs/diloco/diloco.wasm")
	init := m.spec
	init.Args, init.Input = []string{"init"}, putBlob(t, m.c, nil)
	job, err := m.c.Submit(context.Background(), init, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("init: %+v, %v", job, err)
	}
	state, err := m.c.Blob(job.Output, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	n := len(state) // one weights record
	var acc float64
	for round := 1; round <= 3; round++ {
		s := m.spec
		s.Args = []string{"local", "938", "0.05", "32"}
		s.Data = append(slices.Clone(m.train), wire.DataBlob{Name: "state", Digest: putBlob(t, m.c, state), Size: int64(len(state))})
		start := time.Now()
		state = m.round(t, round, s, sameInput(t, m.c, nil, 4), diloco)
		if len(state) != 2*n {
			t.Fatalf("round %d: state of %d bytes, want weights and momentum (%d)", round, len(state), 2*n)
		}
		_, acc = m.accuracy(t, state[:n])
		t.Logf("round %d: %v, training loss %.4f, test accuracy %.2f%%", round, time.Since(start).Round(time.Millisecond), lossOf(state), 100*acc)
	}
	if acc < 0.97 {
		t.Errorf("test accuracy %.2f%% after 3 DiLoCo rounds, want at least 97%%", 100*acc)
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
