package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/consensys/gnark/logger"
	"github.com/rs/zerolog"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
	"github.com/infernet/infernet/node"
)

// infoJSON runs `infernet info --json` and decodes what it printed.
func infoJSON(t *testing.T) machineInfo {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Main([]string{"info", "--json"}, IO{In: strings.NewReader(""), Out: &out, Err: &errOut}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var info machineInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return info
}

// TestInfoJSON: `infernet info --json` reports the backends and, on machines
// without an NVIDIA driver (like the project's), why there are no GPUs.
func TestInfoJSON(t *testing.T) {
	info := infoJSON(t)
	if info.ABI != abi.Version || info.Cores < 1 || info.Fast == "" {
		t.Fatalf("info %+v", info)
	}
	if len(info.GPUs) == 0 && info.GPUError == "" {
		t.Fatal("no GPUs and no reason given")
	}
	if len(info.GPUs) == 0 && info.Unavailable["cuda"] == "" {
		t.Fatal("no GPU, yet CUDA not reported unavailable")
	}
	// OpenBLAS, opened by name only, is reported either way; a reason
	// does not repeat the wrappers that name the backend again.
	if _, no := info.Unavailable["openblas"]; no == slices.Contains(info.Also, "openblas") && info.Fast != "openblas" {
		t.Errorf("openblas: available %v, unavailable %q; want one of them", info.Also, info.Unavailable["openblas"])
	}
	for name, why := range info.Unavailable {
		if strings.HasPrefix(why, "backends:") || strings.Contains(why, "tensor backend unavailable") {
			t.Errorf("%s unavailable: %q repeats its wrappers", name, why)
		}
	}
}

// TestInfoOpensCUDAAsNodesDo: `infernet info` opens CUDA through the GPU
// worker, as `infernet node` and `infernet run` do, so the libraries named
// by $INFERNET_CUDA_DRIVER and $INFERNET_CUBLAS count: info had said "cuda
// unavailable" where a node would run on it.
//
// fake driver: checks our call sequence, not a GPU.
func TestInfoOpensCUDAAsNodesDo(t *testing.T) {
	drv, _ := cudatest.Build(t)
	t.Setenv(DriverEnv, drv)
	t.Setenv(CUBLASEnv, drv)
	info := infoJSON(t)
	if info.Fast != "cuda" || info.Unavailable["cuda"] != "" {
		t.Errorf("fast backend %q, cuda unavailable: %q; want cuda", info.Fast, info.Unavailable["cuda"])
	}
}

// TestCheckDataDir: a data directory the node cannot use says so first,
// by its flag (a file in its place here; an unwritable one is refused
// alike), and an identity key others can read is warned of.
func TestCheckDataDir(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDir(file, log); err == nil || !strings.HasPrefix(err.Error(), "--datadir "+file) {
		t.Errorf("a file for a data directory: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "new")
	if err := checkDataDir(dir, log); err != nil || logged.Len() != 0 {
		t.Fatalf("a new data directory: %v, %s", err, &logged)
	}
	if err := os.WriteFile(filepath.Join(dir, node.IdentityFile), []byte("key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDir(dir, log); err != nil || !strings.Contains(logged.String(), "identity key is readable by others") {
		t.Errorf("an identity key of mode 644: %v, %q", err, &logged)
	}
}

// TestGnarkSilent: gnark's logger, which writes every circuit compiled and
// every proof to stdout, is off for every command: a node with proof keys
// printed six such lines before its peer ID, and a job's output got them
// mixed in (a newcomer's walk).
func TestGnarkSilent(t *testing.T) {
	logger.Set(zerolog.New(io.Discard).Level(zerolog.DebugLevel))
	var out bytes.Buffer
	if code := Main([]string{"--version"}, IO{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
		t.Fatalf("exit %d: %s", code, &out)
	}
	if l := logger.Logger().GetLevel(); l != zerolog.Disabled {
		t.Errorf("gnark's log level after a command: %v, want disabled", l)
	}
}

// TestCheckCacheDir: a compiled-module cache the node cannot write in is
// refused at the start by its flag (a file in its place here, as a
// read-only home under a service manager), with what to do.
func TestCheckCacheDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkCacheDir(file); err == nil || !strings.HasPrefix(err.Error(), "--cache-dir "+file) || !strings.Contains(err.Error(), "DIR/wasm-cache") {
		t.Errorf("a file for a cache directory: %v", err)
	}
	if err := checkCacheDir(filepath.Join(t.TempDir(), "new", "wasm")); err != nil {
		t.Errorf("a new cache directory: %v", err)
	}
	if err := checkCacheDir(""); err != nil {
		t.Errorf("no cache directory (DIR/wasm-cache): %v", err)
	}
}
