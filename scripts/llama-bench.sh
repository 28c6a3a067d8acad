#!/usr/bin/env bash
# Llama generation speed, side by side in one run (section (l) of
# scripts/bench.sh; runs alone too): tokens/s of llama2.c's run.c (commit
# 350e04fe) built -O3 on one thread and -Ofast -march=native -fopenmp on two
# (OMP_NUM_THREADS=2), and of `infernet generate --local` in exact and
# tolerance mode, greedy, 128 tokens after a fixed prompt, on random weights
# of the stories15M and stories110M shapes (guest/go/llama/llamatest, seed 1,
# cached) with Llama 2's tokenizer. Prints a table with ratios and the
# issue's targets on stories110M (infernet exact >= 1.0x run.c -O3 and
# >= 0.7x run.c -Ofast 2 threads). Without `generate` in bin/infernet it
# measures run.c alone and says so.
#
#   LLAMA_BENCH_RUNS   rounds (default 3; BENCH_QUICK=1: 1)
#   LLAMA_BENCH_TOKENS generated tokens (default 128)
#   LLAMA_BENCH_SHAPES shapes (default "stories15M stories110M")
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/llama.sh

runs=${LLAMA_BENCH_RUNS:-$([ "${BENCH_QUICK:-}" = 1 ] && echo 1 || echo 3)}
tokens=${LLAMA_BENCH_TOKENS:-128}
shapes=${LLAMA_BENCH_SHAPES:-stories15M stories110M}
prompt="Once upon a time, there was a little robot named"

llama2c_build
models=()
for s in $shapes; do models+=("$s=$(llama_random "$s" 1)"); done
infernet=""
if infernet_generate; then
  infernet=$PWD/bin/infernet
else
  echo "infernet generate: skipped (bin/infernet has no generate command yet; make build once it has)"
fi
python3 scripts/lib/llama_bench.py "$llama2c_dir" testdata/llama/tokenizer.bin "$prompt" "$tokens" "$runs" "$infernet" "${models[@]}"
