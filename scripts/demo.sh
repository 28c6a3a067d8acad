#!/usr/bin/env bash
# make demo: the whole product as it stands, on real jobs.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=bin/infernet
jobs=testdata/jobs
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
run() { "$bin" run --cache-dir "$cache" "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ infernet run %s\n' "$*"; }

step "A Rust job: word count (top words of the README)"
show "$jobs/wordcount/wordcount.wasm --input README.md"
run "$jobs/wordcount/wordcount.wasm" --input README.md | head -5

step "A Go job using the tensor ABI: MLP inference, exact mode (reference kernel)"
show "$jobs/mlp/mlp.wasm --input $jobs/mlp/input.txt --stats"
run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" --stats

step "The same job in tolerance mode (fastest backend on this machine)"
show "$jobs/mlp/mlp.wasm --input $jobs/mlp/input.txt --mode tolerance --stats"
run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" --mode tolerance --stats

step "A C job: batched GEMM through handles and pointer forms"
show "$jobs/matmul/matmul.wasm --input $jobs/matmul/input.txt"
run "$jobs/matmul/matmul.wasm" --input "$jobs/matmul/input.txt" | tail -3

step "Reproducible: two runs, same output digest"
for i in 1 2; do run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" | sha256sum; done

step "A CPU-bound job stopped by its time limit (exit 125, one line naming the cause)"
show "$jobs/cpu/cpu.wasm --input $jobs/cpu/input.txt --timeout 200ms"
run "$jobs/cpu/cpu.wasm" --input "$jobs/cpu/input.txt" --timeout 200ms; echo "exit status $?"

step "Hostile modules are refused or stopped; the process survives each"
for m in garbage truncated unknown_import trap_unreachable stack_overflow infinite_loop exp_recursion memory_min_huge output_flood; do
  cause=$(run "testdata/bad/$m.wasm" --timeout 500ms --memory 16MiB --max-output 1MiB 2>&1 >/dev/null)
  printf '%-18s exit %d  %s\n' "$m" $? "$cause"
done
printf '%-18s ' "infernet_hostile"
run testdata/bad/infernet_hostile.wasm | tail -1
printf '%-18s ' "wasi_hostile"
run testdata/bad/wasi_hostile.wasm | tail -1
