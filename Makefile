# infernet — common tasks. `make demo` runs real jobs; `make test` is what CI runs.
GO      ?= go
BIN     := bin/infernet
# The commit the binaries say they were built from (node.Version).
COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/infernet/infernet/node.commit=$(COMMIT)
PKGS    := ./...

.PHONY: all build build-infernet test vet demo bench bench-host deps docs testdata clean test-payments test-openai test-llamacpp test-mixed fuzz mnist chargpt gpu-check gpu-bundle

all: build

# Debian packages and pinned tools (idempotent; see scripts/deps.sh).
deps:
	@./scripts/deps.sh

# The documents' tables of flags, defaults and limits, regenerated from the
# code (cmd/infernet/internal/docgen); `make test` fails while they are stale.
docs:
	$(GO) generate ./cmd/infernet

build: build-infernet
	$(GO) build -ldflags "$(LDFLAGS)" -tags faults -o $(BIN)-faults ./cmd/infernet

# bin/infernet alone, for what needs no fault injection.
build-infernet:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infernet

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags faults ./cmd/...
	$(GO) vet -tags regtest $(PKGS)
	$(GO) vet -tags gpu ./host/...

# Unit and integration tests: real wazero, real guests from testdata/, real
# libp2p nodes on loopback; and beside them, in a second lane, the Lightning
# tests (see test-payments), node processes built with fault injection, the
# fuzz targets for a count each, the OpenAI client end to end and the
# llama.cpp oracle (scripts/test.sh; INFERNET_TEST_SERIAL=1 runs them one
# after another). It ends with each stage's time.
test: deps vet
	@GO=$(GO) MAKE=$(MAKE) ./scripts/test.sh

# Go fuzz targets (package:Target:count), each fuzzed for FUZZTIME: hostile
# bytes on the wire, in requirement expressions, at the local API, in host
# calls, in modules and in model files. Their seed corpora also run in every
# plain `go test`. `make test` fuzzes each for its count of inputs (about 5 s
# of a 2-core machine's): a count, unlike a duration, has no deadline for Go
# 1.26's fuzzing coordinator to race (go.dev/issue/75804: a worker still busy
# at -fuzztime's end failed the target with "context deadline exceeded" and
# no input). `make fuzz` fuzzes each for a minute (FUZZTIME=10m for a soak).
# A failing input is saved under the package's testdata/fuzz.
FUZZTIME ?= 60s
FUZZ_TARGETS := ./node/wire:FuzzUnmarshal:40000 ./node/wire:FuzzReadFrame:20000 \
	./node/requirement:FuzzCompileMatch:10000 ./node/api:FuzzAPI:100 \
	./host:FuzzHostCalls:2000 ./host:FuzzModuleABI:3000 ./host/internal/tensorhost:FuzzRoPEKV:3000 ./host/internal/tensorhost:FuzzRMSNormMatMul:3000 ./host/internal/meter:FuzzInstrument:10000 \
	./proofs/redundancy:FuzzEqual:60000 ./guest/go/llama:FuzzReadGGUF:8000
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; count=$${rest#*:}; \
		budget=$(FUZZTIME); [ -n "$(FUZZCOUNT)" ] && budget=$${count}x; \
		echo "fuzz $$pkg $$name for $$budget"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $$budget || exit 1; \
	done

# Runs the example jobs end to end and shows what the sandbox refuses.
demo: deps build
	@./scripts/demo.sh

# MNIST trained by infernet train (FedAvg, then DiLoCo) on 4 local provider
# processes: test accuracy and loss per round (scripts/mnist.sh).
mnist: deps build
	@./scripts/mnist.sh

# The character-level transformer trained on Moby Dick by infernet train,
# in rounds of one shard (checkpoints as blobs): held-out bits/char per
# round, then a sample (scripts/chargpt.sh; about 10 minutes on 2 cores).
chargpt: deps build
	@./scripts/chargpt.sh

# Benchmarks, side by side with their peers in one run (see scripts/bench.sh).
bench: deps build
	@./scripts/bench.sh

# The host's floor under a GPU decode step, on any machine: a 1.1B-shape
# model through the whole GPU path on the fake driver's bench mode
# (scripts/hostfloor.sh; also part (q) of make bench). Needs Go, a C
# compiler and python3 only; writes a 2.1 GB model to ~/.cache/infernet
# the first time.
bench-host:
	@./scripts/hostfloor.sh

# The hardware checks, for a machine with an NVIDIA GPU, its driver and
# cuBLAS; not part of `make test` (scripts/gpu-check.sh, docs/tensor.md):
# tests built with the tag gpu (NVML, every CUDA op against the reference,
# cancellation, memory, a kernel fault, jobs on the GPU), then f32 GEMM
# GFLOP/s of cuda, cpu and openblas, a guest's GEMM against the backend's,
# the host's cost of a queued op, and Llama tokens/s (1B shape, bf16) on
# cuda against cpu. Without a GPU it stops at once, saying
# what is missing. On a GPU machine without Go, run it from the test
# binaries of `make gpu-bundle`, built here and carried there.
gpu-check:
	@./scripts/gpu-check.sh

# The gpu-tagged test binaries of gpu-check, as bin/gpu-bundle.tar.xz,
# stripped (a lent GPU machine takes 64 MiB of carried files in all).
gpu-bundle:
	@rm -rf bin/gpu-bundle && mkdir -p bin/gpu-bundle
	@for p in host/gpu host/tensor/cuda host/tensor/remote host/tensor/backends node/challenge host; do \
		$(GO) test -c -tags gpu -ldflags "-s -w" -o bin/gpu-bundle/$$(echo $$p | tr / _).test ./$$p || exit 1; done
	@$(GO) build -ldflags "-s -w $(LDFLAGS)" -o bin/gpu-bundle/infernet ./cmd/infernet
	@$(GO) build -ldflags "-s -w" -o bin/gpu-bundle/llamarandom ./guest/go/llama/llamatest/cmd/llamarandom
	@$${CC:-cc} -shared -fPIC -O2 -o bin/gpu-bundle/libfakecuda.so host/tensor/cuda/testdata/fakecuda.c -lm -lpthread
	@tar -C bin/gpu-bundle -cJf bin/gpu-bundle.tar.xz . && rm -rf bin/gpu-bundle && ls -l bin/gpu-bundle.tar.xz

# Rebuilds every guest in testdata/ from its source.
testdata: deps
	$(MAKE) -C testdata

clean:
	rm -rf bin

# Local Lightning regtest network: btcd + four lnd nodes (client, provider1,
# provider2, aggregator) with funded channels; writes .regtest/env (see scripts/regtest.sh).
# Builds pinned btcd/lnd into ~/.cache/infernet the first time. `regtest-down`
# stops everything and removes .regtest/.
.PHONY: regtest-up regtest-down
regtest-up:
	@./scripts/regtest.sh up

regtest-down:
	@./scripts/regtest.sh down

# Lightning tests (TestLightning*, build tag regtest) against the regtest
# network: brought up for them and down afterwards unless it was already up;
# the first run builds the pinned btcd and lnd into ~/.cache/infernet (about
# 10 minutes). One package at a time: they share the network's balances.
# The OpenAI API end to end with OpenAI's official npm client on four node
# processes (scripts/openai-e2e.sh); the Go client's tests are in node/openai.
test-openai: build-infernet
	@./scripts/openai-e2e.sh

# The packages with regtest tests, found by their names: linking every
# package's test binary to run none (-p 1, serially) took 75 s.
REGTEST_PKGS = $(shell grep -rl --include='*_test.go' '^func TestLightning' . | xargs -n1 dirname | sort -u)
test-payments:
	@./scripts/regtest.sh run $(GO) test -count=1 -p 1 -tags regtest -run '^TestLightning' $(REGTEST_PKGS)

# llama.cpp as the oracle of the GGUF types (scripts/llamacpp-oracle.sh):
# random stories15M and stories110M quantized by llama-quantize (Q8_0, Q4_0,
# Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M, Q6_K), infernet's tensors, tokens,
# logits and greedy tokens against llama.cpp's; installs node-llama-cpp
# into ~/.cache/infernet on first use. About a minute on 2 cores:
# llama.cpp answers through long-lived processes (scripts/llamacpp.sh serve).
test-llamacpp:
	@./scripts/llamacpp-oracle.sh

# A network of this build and an older one (scripts/mixed.sh): the older
# provider agrees on a plain job and gets no job its host lacks the ABI
# for. Builds the older binary once from git history (INFERNET_OLD_REV);
# not part of make test, whose checkout may be shallow. About 15 s once
# built.
test-mixed:
	@./scripts/mixed.sh
