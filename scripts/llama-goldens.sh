#!/usr/bin/env bash
# The golden data of infernet's Llama runner: what llama2.c's run.c (commit
# 350e04fe) encodes and generates, written to testdata/llama (provenance,
# cases, format and how completions are cut: testdata/llama/README.md;
# read from Go by guest/go/llama/llamatest):
#
#   tokens.jsonl  run.c's encode (BOS added) of each prompt of
#                 tokenize_prompts.txt with tok512.bin and tokenizer.bin
#   golden.jsonl  completions: stories260K.bin + tok512.bin greedy (-t 0,
#                 64 to 512 steps: edge cases, stops at BOS, the whole
#                 context) and sampled (-t 0.9 -p 0.9 -s 42, -t 0.9 -p 1
#                 -s 7); the random Stories15M-shape model
#                 (guest/go/llama/llamatest, seed 1) + tokenizer.bin (Llama
#                 2's 32,000 tokens), 100 generated tokens greedy and sampled
#
# Idempotent: builds run.c once into
# ${INFERNET_CACHE:-~/.cache/infernet}/llama2c-350e04fe, makes the random
# model once (cached), and rewrites a golden file only if it changed; a rerun
# leaves the tree as it was. Paths: scripts/lib/llama.sh (INFERNET_SHARED,
# LLAMA_MODELS, LLAMA2C_DIR). Needs cc, go and python3.
#
# It checks as it goes: two runs of run.c's binary print the same; the token
# ids (run.c's own encode, forward and sampler, through
# scripts/lib/llama2c-golden.c) decode to exactly what the binary printed;
# greedy text from the random model does not repeat. It prints the tok/s
# run.c reports, the smallest logit margin of the greedy goldens, and
# whether the -Ofast build agrees.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/llama.sh

seed=1
# The real model and the tokenizers are committed under testdata/llama (so
# that tests run without the shared data); they come from $llama_models,
# checked against these digests (the shared models' README).
declare -A sha=(
  [stories260K.bin]=b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696
  [tok512.bin]=037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312
  [tokenizer.bin]=50a52ef822ee9e83de5ce9d0be0a025a773d019437f58b5ff9dcafb063ece361
)
dir=testdata/llama
mkdir -p "$dir"
for f in "${!sha[@]}"; do
  [ -f "$dir/$f" ] && [ "$(sha256sum "$dir/$f" | cut -d' ' -f1)" = "${sha[$f]}" ] && continue
  src=${llama_models:+$llama_models/$f}
  if [ -z "$src" ] || [ ! -f "$src" ]; then
    echo "llama-goldens: $dir/$f is missing and there is no $f to copy (set LLAMA_MODELS or INFERNET_SHARED)" >&2; exit 1
  fi
  [ "$(sha256sum "$src" | cut -d' ' -f1)" = "${sha[$f]}" ] || { echo "llama-goldens: $src: wrong SHA-256" >&2; exit 1; }
  install -m 0644 "$src" "$dir/$f"
done
for f in LICENSE.llama2.c LICENSE.llama2.zig; do
  [ -f "$dir/$f" ] || install -m 0644 "$llama_models/$f" "$dir/$f"
done

llama2c_build
random15m=$(llama_random stories15M "$seed")
generator=$(go run ./guest/go/llama/llamatest/cmd/llamarandom -version)
python3 scripts/lib/llama_goldens.py "$llama2c_dir" "$dir" "$random15m" "$seed" "$generator"
