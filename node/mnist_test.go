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

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/jobs"
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
	spec        jobs.Spec // the module, 2 replicas, exact mode
	train, test []wire.DataBlob
	labels      []byte
}

func newMNISTNet(t *testing.T) *mnistNet {
	m := &mnistNet{dir: mnistDir(t), c: startNetwork(t, 4, nil).vouch().client}
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
	m.test = []wire.DataBlob{data("images", "t10k-images-idx3-ubyte"), data("labels", "t10k-labels-idx1-ubyte")}
	m.labels = file("t10k-labels-idx1-ubyte")[8:]
	m.module = readTestdata(t, "jobs/mnist/mnist.wasm")
	precompile(t, m.module, 512<<20)
	m.spec = jobs.Spec{Terms: wire.Terms{Module: putBlob(t, m.c, m.module), ModuleSize: int64(len(m.module)),
		TimeoutMS: 300_000, Memory: 512 << 20}, Replicas: 2}
	return m
}

// reducer stores a reduce module of testdata/jobs.
func (m *mnistNet) reducer(t *testing.T, path string) *jobs.ReduceSpec {
	b := readTestdata(t, path)
	return &jobs.ReduceSpec{Module: putBlob(t, m.c, b), ModuleSize: int64(len(b))}
}

// run runs 3 rounds of 4 shards (node.Train), each round's shards and
// reduce verified by 2 agreeing replicas and evaluated on the test set
// (mnist eval), and returns the last state.
func (m *mnistNet) run(t *testing.T, ts jobs.TrainSpec) []byte {
	t.Helper()
	ts.Shards, ts.Rounds = 4, 3
	eval := m.spec
	eval.Args, eval.Data = []string{"eval"}, m.test
	ts.Eval = &eval
	start := time.Now()
	rec, err := m.c.Train(context.Background(), ts, func(e jobs.Event) {
		if e.Kind == jobs.EventRoundDone {
			t.Logf("round %d: %v, %s", e.Round, time.Since(start).Round(time.Millisecond), e.Detail)
		}
	})
	if err != nil || rec.State != store.JobVerified || len(rec.Rounds) != 3 {
		t.Fatalf("training: %+v, %v", rec, err)
	}
	for k, r := range rec.Rounds {
		sj, err := m.c.ShardedJob(r.Sharded)
		if err != nil {
			t.Fatal(err)
		}
		for i, job := range append(sj.Shards, sj.Reduce) {
			if job == nil || job.Agree != 2 {
				t.Fatalf("round %d part %d: %+v, want 2 replicas agreeing", k+1, i, job)
			}
		}
		if r.Metrics["examples"] != 10000 {
			t.Fatalf("round %d: metrics %v, want 10,000 examples", k+1, r.Metrics)
		}
	}
	last := rec.Rounds[2]
	if acc := last.Metrics["accuracy"]; acc < 0.97 {
		t.Errorf("test accuracy %.2f%% after 3 rounds, want at least 97%%", 100*acc)
	}
	state, err := m.c.Blob(last.State, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The sharded inference job agrees with the evaluation.
	_, acc := m.accuracy(t, state)
	if math.Abs(acc-last.Metrics["accuracy"]) > 0.00005 {
		t.Errorf("10-shard inference: %.4f right; the evaluation said %v", acc, last.Metrics)
	}
	return state
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
// network (node.Train). 4 providers; every round is one sharded job of 4
// shards, 2 replicas each (exact mode: the replicas agree bit for bit),
// each shard training the global weights for 2 epochs on its quarter of
// the 60,000 training images (a 47 MB data blob), and a reduce job
// (jobs/fedavg) averaging them; then the test set is evaluated (mnist
// eval, 2 replicas). After 3 rounds at least 97% of the test images are
// right, and inference of the 10,000 test images, sharded 10 ways and
// verified, gives the same predictions as one local run.
func TestMNISTFederated(t *testing.T) {
	m := newMNISTNet(t)
	ctx := context.Background()
	s := m.spec
	s.Args, s.Data = []string{"train", "2", "0.05", "32"}, m.train
	// The first round starts from the job's initial weights (no state).
	weights := m.run(t, jobs.TrainSpec{Spec: s, Reduce: *m.reducer(t, "jobs/fedavg/fedavg.wasm")})
	if lossOf(weights) <= 0 || lossOf(weights) > 0.5 {
		t.Errorf("mean training loss %v in the last round", lossOf(weights))
	}
	preds, _ := m.accuracy(t, weights)
	// The network's predictions are one local run's.
	sb, err := host.New(ctx, host.Config{CacheDir: compileCache})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, host.Job{Module: m.module, Input: weights,
		Data: map[string]string{"images": filepath.Join(m.dir, "t10k-images-idx3-ubyte")}},
		host.NewJobConfig().WithArgs("infer").WithMemoryLimit(512<<20).WithTimeout(5*time.Minute))
	if err != nil || !bytes.Equal(res.Output, preds) {
		t.Fatalf("local predictions differ from the network's (%d vs %d bytes), %v", len(res.Output), len(preds), err)
	}
}

// TestMNISTDiLoCo: the same training by DiLoCo. A round's state (global
// weights, then the outer momentum) is a data blob that its 4 shards and
// its reduce job read (jobs.TrainSpec.StateData): each shard runs 938 local SGD
// steps from the global weights (as many as 2 epochs of its quarter), and
// the reduce (jobs/diloco) averages them and takes an outer Nesterov step
// (η 0.7, μ 0.9). After 3 rounds, at least 97% of the test images are
// right.
func TestMNISTDiLoCo(t *testing.T) {
	m := newMNISTNet(t)
	init := m.spec
	init.Args, init.Input = []string{"init"}, putBlob(t, m.c, nil)
	job, err := m.c.Submit(context.Background(), init, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("init: %+v, %v", job, err)
	}
	s := m.spec
	s.Args, s.Data = []string{"local", "938", "0.05", "32"}, m.train
	state := m.run(t, jobs.TrainSpec{Spec: s, Reduce: *m.reducer(t, "jobs/diloco/diloco.wasm"),
		State: job.Output, StateSize: job.OutputSize, StateData: "state"})
	if n := job.OutputSize; int64(len(state)) != 2*n {
		t.Fatalf("state of %d bytes, want weights and momentum (%d)", len(state), 2*n)
	}
}

// sameInput stores b once and names it as the input of n shards.
func sameInput(t *testing.T, n *Node, b []byte, shards int) []jobs.ShardInput {
	d := putBlob(t, n, b)
	ins := make([]jobs.ShardInput, shards)
	for i := range ins {
		ins[i] = jobs.ShardInput{Input: d, InputSize: int64(len(b))}
	}
	return ins
}
