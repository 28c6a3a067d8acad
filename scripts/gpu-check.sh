#!/usr/bin/env bash
# The hardware checks for a machine with an NVIDIA GPU (`make gpu-check`;
# docs/tensor.md says what each part checks). With Go on the machine it
# builds and runs the tests tagged gpu; without Go (a GPU machine lent
# with no network and no toolchain) it runs the test binaries that
# `make gpu-bundle` built elsewhere into bin/gpu-bundle/ (or unpacks
# bin/gpu-bundle.tar.xz first). Logs in bin/gpu-check/.
set -uo pipefail
cd "$(dirname "$0")/.."

PKGS=(host/gpu host/tensor/cuda host/tensor/remote host/tensor/backends node/challenge)
LOG=bin/gpu-check
BUNDLE=bin/gpu-bundle
mkdir -p "$LOG"

if [ ! -d "$BUNDLE" ] && [ -f "$BUNDLE.tar.xz" ]; then
	mkdir -p "$BUNDLE" && tar -C "$BUNDLE" -xJf "$BUNDLE.tar.xz"
fi
if command -v go >/dev/null 2>&1 && [ -z "${GPU_CHECK_BUNDLE:-}" ]; then
	use_go=1
elif [ -d "$BUNDLE" ]; then
	use_go=0
else
	echo "gpu-check: FAILED: no Go toolchain and no $BUNDLE (build it with make gpu-bundle)"; exit 1
fi

# gotest PKG ARGS...: the package's gpu-tagged tests, run in its directory
# as go test does, printing go test -v output.
gotest() {
	local pkg=$1; shift
	if [ "$use_go" = 1 ]; then
		go test -count=1 -tags gpu "$@" "./$pkg/"
	else
		local bin
		bin="$PWD/$BUNDLE/$(echo "$pkg" | tr / _).test"
		local args=()
		for a in "$@"; do
			case $a in
			-v | -run | -bench | -benchtime | -timeout) args+=("-test.${a#-}") ;;
			*) args+=("$a") ;;
			esac
		done
		(cd "$pkg" && "$bin" "${args[@]}") && echo "ok  	$pkg" || { echo "FAIL	$pkg"; return 1; }
	fi
}

echo "gpu-check: an NVIDIA GPU, its driver and cuBLAS"
if ! gotest host/gpu -v -run '^TestGPUPreflight$' >"$LOG/preflight.log" 2>&1; then
	sed -nE 's/^ +[a-z_]+_test\.go:[0-9]+: /  /p' "$LOG/preflight.log" | grep . || tail -n 20 "$LOG/preflight.log"
	echo "gpu-check: FAILED: no usable NVIDIA GPU here (log: $LOG/preflight.log)"; exit 1
fi
sed -nE 's/^ +[a-z_]+_test\.go:[0-9]+: /  /p' "$LOG/preflight.log"
if [ "$use_go" = 1 ]; then
	echo "gpu-check: go vet -tags gpu ./host/..."
	if ! go vet -tags gpu ./host/... >"$LOG/vet.log" 2>&1; then
		tail -n 20 "$LOG/vet.log"; echo "gpu-check: FAILED: go vet (log: $LOG/vet.log)"; exit 1
	fi
fi
echo "gpu-check: tests of ${PKGS[*]} (a few minutes)"
rc=0
: >"$LOG/test.log"
for p in "${PKGS[@]}"; do
	gotest "$p" -v -timeout 30m >>"$LOG/test.log" 2>&1 || rc=1
done
grep -E '^(ok|FAIL)[[:space:]]' "$LOG/test.log" | sed 's/^/  /'
echo "  $(grep -c '^--- PASS' "$LOG/test.log") tests passed, $(grep -c '^--- FAIL' "$LOG/test.log") failed, $(grep -c '^--- SKIP' "$LOG/test.log") skipped"
grep -E '^--- (FAIL|SKIP)' "$LOG/test.log" | sed -E 's/^--- (FAIL|SKIP): /  \1 /'
echo "gpu-check: GEMM benchmarks"
gotest host/tensor/backends -run '^$' -bench '^BenchmarkGPU' -benchtime 1s >"$LOG/bench.log" 2>&1 || rc=1
awk -f scripts/lib/gflops-table.awk "$LOG/bench.log"

echo "gpu-check: GEMM from a guest (pointer form, tensor handles) against the backend's own (target: handles >= 0.8x)"
gotest host -run '^$' -bench '^BenchmarkGemmGuestVsNative$' -benchtime 3x >"$LOG/guest-gemm.log" 2>&1 || rc=1
awk -f scripts/lib/gflops-table.awk "$LOG/guest-gemm.log"

echo "gpu-check: the host's cost of a queued op (target <= 20 us)"
gotest host/tensor/cuda -run '^$' -bench '^BenchmarkGPUQueuedOp$' -benchtime 20000x >"$LOG/queued.log" 2>&1 || rc=1
awk '/^BenchmarkGPUQueuedOp\// { for (i = 2; i <= NF; i++) if ($i == "us/op") { n = $1; sub(/^BenchmarkGPUQueuedOp\//, "", n); sub(/-[0-9]+$/, "", n); printf "  %-8s %8.2f us/op\n", n, $(i - 1) } }' "$LOG/queued.log"

# Llama generation: tokens/s of a random-weight model of TinyLlama 1.1B's
# shape with bf16 weights (GGUF), greedy, on cuda and on the cpu backend.
echo "gpu-check: Llama generation, tinyllama1B shape, bf16 weights, cuda vs cpu (target >= 10x)"
if [ "$use_go" = 1 ]; then
	go build -o bin/infernet ./cmd/infernet && go build -o bin/llamarandom ./guest/go/llama/llamatest/cmd/llamarandom || rc=1
	tools=bin
else
	tools=$BUNDLE
fi
model=$LOG/tinyllama1B-bf16.gguf
if [ -f "$model" ] || "$tools/llamarandom" -seed 1 -gguf bf16 -tokenizer testdata/llama/tokenizer.bin -o "$model" tinyllama1B >"$LOG/llama-model.log" 2>&1; then
	for be in cuda cpu; do
		"$tools/infernet" generate "$model" --local --backend "$be" --mode tolerance --temperature 0 --max-tokens 64 \
			--prompt "Once upon a time, there was a little robot named" --json >"$LOG/llama-$be.json" 2>"$LOG/llama-$be.log" || rc=1
	done
	# tps BACKEND: decode tokens/s from generate's JSON, read by a JSON parser
	# (jq, or python3 on a GPU machine without jq).
	tps() {
		if command -v jq >/dev/null; then
			jq -r '.decode_tokens_per_second // empty' "$LOG/llama-$1.json"
		else
			python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("decode_tokens_per_second", ""))' "$LOG/llama-$1.json"
		fi 2>/dev/null
	}
	gpu=$(tps cuda) cpu=$(tps cpu)
	printf '  cuda %s tok/s, cpu %s tok/s' "${gpu:-?}" "${cpu:-?}"
	if [ -n "$gpu" ] && [ -n "$cpu" ]; then awk -v g="$gpu" -v c="$cpu" 'BEGIN { printf ": %.1fx\n", g / c }'; else echo " (logs: $LOG/llama-*.log)"; fi
else
	tail -n 5 "$LOG/llama-model.log"; rc=1
fi
if [ $rc -ne 0 ]; then echo "gpu-check: FAILED (logs: $LOG/)"; exit 1; fi
echo "gpu-check: ok (logs: $LOG/)"
