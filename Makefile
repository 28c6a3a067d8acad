# infernet — common tasks. `make demo` runs real jobs; `make test` is what CI runs.
GO      ?= go
BIN     := bin/infernet
PKGS    := ./...

.PHONY: all build test vet demo bench deps testdata clean test-payments fuzz mnist chargpt gpu-check

all: build

# Debian packages and pinned tools (idempotent; see scripts/deps.sh).
deps:
	@./scripts/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/infernet
	$(GO) build -tags faults -o $(BIN)-faults ./cmd/infernet

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags faults ./cmd/...
	$(GO) vet -tags regtest $(PKGS)
	$(GO) vet -tags gpu ./host/...

# Unit and integration tests: real wazero, real guests from testdata/, real
# libp2p nodes on loopback; node processes built with fault injection; then
# the Lightning tests (see test-payments).
test: deps vet
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -tags faults -run TestFaults ./cmd/infernet/itest/
	@$(MAKE) --no-print-directory fuzz FUZZTIME=5s
	@$(MAKE) --no-print-directory test-payments

# Go fuzz targets (package:Target), each fuzzed for FUZZTIME: hostile bytes
# on the wire, in requirement expressions, at the local API, in host calls,
# in modules and in model files. Their seed corpora also run in every plain `go test`.
# `make test` fuzzes each for 5 s; `make fuzz` for a minute (FUZZTIME=10m
# for a soak). A failing input is saved under the package's testdata/fuzz.
FUZZTIME ?= 60s
FUZZ_TARGETS := ./node/wire:FuzzUnmarshal ./node/wire:FuzzReadFrame \
	./node/requirement:FuzzCompileMatch ./node/api:FuzzAPI \
	./host:FuzzHostCalls ./host/internal/meter:FuzzInstrument ./proofs/redundancy:FuzzEqual \
	./guest/go/llama:FuzzReadGGUF
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		$(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) || exit 1; \
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

# The hardware checks, for a machine with an NVIDIA GPU, its driver and
# cuBLAS; not part of `make test`. Tests built with the tag gpu: NVML and the
# CUDA driver's view of the GPUs, every CUDA backend op against the reference
# backend, cancellation, memory and a kernel fault on the device, jobs run
# through the host on the GPU; then f32 GEMM GFLOP/s of cuda, cpu and
# openblas. Without a GPU it stops at once, saying what is missing. Logs in
# bin/gpu-check/ (docs/tensor.md).
GPU_PKGS := ./host/gpu/ ./host/tensor/cuda/ ./host/tensor/backends/ ./node/challenge/
GPU_LOG  := bin/gpu-check
define GPU_BENCH_TABLE
/^Benchmark.*GFLOP\/s/ {
	name = $$1; sub(/-[0-9]+$$/, "", name); n = split(name, p, "/")
	row = (p[1] ~ /Batched$$/ ? "batched " : "") p[3]; for (i = 4; i <= n; i++) row = row "/" p[i]
	for (i = 2; i <= NF; i++) if ($$i == "GFLOP/s") v[row, p[2]] = $$(i - 1)
	if (!(p[2] in c)) { c[p[2]] = 1; cols[++nc] = p[2] }
	if (!(row in r)) { r[row] = 1; rows[++nr] = row }
}
END {
	if (nr == 0) { print "  no results"; exit }
	printf "  %-40s", "GFLOP/s"; for (j = 1; j <= nc; j++) printf " %11s", cols[j]; print ""
	for (i = 1; i <= nr; i++) {
		printf "  %-40s", rows[i]
		for (j = 1; j <= nc; j++) printf " %11s", ((rows[i], cols[j]) in v) ? sprintf("%.0f", v[rows[i], cols[j]]) : "-"
		print ""
	}
}
endef
export GPU_BENCH_TABLE
gpu-check:
	@mkdir -p $(GPU_LOG); \
	echo "gpu-check: an NVIDIA GPU, its driver and cuBLAS"; \
	if ! $(GO) test -count=1 -tags gpu -v -run '^TestGPUPreflight$$' ./host/gpu/ >$(GPU_LOG)/preflight.log 2>&1; then \
		sed -nE 's/^ +[a-z_]+_test\.go:[0-9]+: /  /p' $(GPU_LOG)/preflight.log | grep . || tail -n 20 $(GPU_LOG)/preflight.log; \
		echo "gpu-check: FAILED: no usable NVIDIA GPU here (log: $(GPU_LOG)/preflight.log)"; exit 1; \
	fi; \
	sed -nE 's/^ +[a-z_]+_test\.go:[0-9]+: /  /p' $(GPU_LOG)/preflight.log; \
	echo "gpu-check: go vet -tags gpu ./host/..."; \
	if ! $(GO) vet -tags gpu ./host/... >$(GPU_LOG)/vet.log 2>&1; then \
		tail -n 20 $(GPU_LOG)/vet.log; echo "gpu-check: FAILED: go vet (log: $(GPU_LOG)/vet.log)"; exit 1; \
	fi; \
	echo "gpu-check: tests of $(GPU_PKGS) (a few minutes)"; \
	$(GO) test -count=1 -tags gpu -v -timeout 30m $(GPU_PKGS) >$(GPU_LOG)/test.log 2>&1; rc=$$?; \
	grep -E '^(ok|FAIL)[[:space:]]' $(GPU_LOG)/test.log | sed 's/^/  /'; \
	echo "  $$(grep -c '^--- PASS' $(GPU_LOG)/test.log) tests passed, $$(grep -c '^--- FAIL' $(GPU_LOG)/test.log) failed, $$(grep -c '^--- SKIP' $(GPU_LOG)/test.log) skipped"; \
	grep -E '^--- (FAIL|SKIP)' $(GPU_LOG)/test.log | sed -E 's/^--- (FAIL|SKIP): /  \1 /'; \
	echo "gpu-check: GEMM benchmarks"; \
	$(GO) test -count=1 -tags gpu -run '^$$' -bench '^BenchmarkGPU' -benchtime 1s ./host/tensor/backends/ >$(GPU_LOG)/bench.log 2>&1 || rc=1; \
	awk "$$GPU_BENCH_TABLE" $(GPU_LOG)/bench.log; \
	if [ $$rc -ne 0 ]; then echo "gpu-check: FAILED (logs: $(GPU_LOG)/test.log, bench.log)"; exit 1; fi; \
	echo "gpu-check: ok (logs: $(GPU_LOG)/)"

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
test-payments:
	@./scripts/regtest.sh run $(GO) test -count=1 -p 1 -tags regtest -run '^TestLightning' $(PKGS)
