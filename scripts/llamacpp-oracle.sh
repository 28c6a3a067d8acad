#!/usr/bin/env bash
# llama.cpp as the oracle of infernet's GGUF types (issue 34); part of
# `make test` (make test-llamacpp). Random-weight stories15M and
# stories110M (llamatest, seed 1, Llama 2's vocabulary), written as f32
# GGUF by llamarandom and quantized by llama-quantize to Q8_0, Q4_0, Q4_1,
# Q5_0, Q5_1, Q4_K_M, Q5_K_M and Q6_K, and stories15M's weights as a qwen2
# model and as a llama model with Llama 3.1's rotary frequency factors
# (f32, Q8_0, Q4_K_M); then TestLlamaCppOracle
# (guest/go/llama/llamacpp_test.go) runs each in infernet and in llama.cpp
# and compares tensors, tokens, logits and greedy tokens, printing the
# largest logit difference per file (its doc gives the tolerances);
# TestLlamaCppTokenizers compares the token ids of 100 KB of mixed text
# with Llama 2's, Llama 3's and Qwen2.5's vocabularies; and
# TestQ4_0LikeLlamaQuantize, llamarandom's Q4_0 with llama-quantize's.
#
# The oracle is installed on first use (scripts/llamacpp.sh install).
# stories15M's files are made afresh in a temporary folder (a quarter
# second each); stories110M's quantizations (about 30 s) are kept in
# ${INFERNET_CACHE:-~/.cache/infernet}/llamacpp-oracle/, under the digest of
# their f32 source and llama.cpp's version (650 MB; an older set is
# removed). About a minute on 2 cores once they are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
cache=${INFERNET_CACHE:-$HOME/.cache/infernet}
types=(Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K_M Q5_K_M Q6_K)

llamacpp=$(basename "$(scripts/llamacpp.sh install)")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
models=$tmp/models
mkdir -p "$models"
"$GO" build -o "$tmp/llamarandom" ./guest/go/llama/llamatest/cmd/llamarandom

# random SHAPE OUT: the shape's random model as f32 GGUF.
random() { "$tmp/llamarandom" -gguf f32 -tokenizer testdata/llama/tokenizer.bin -o "$2" "$1" >/dev/null; }
# quantize IN OUT TYPE, its log shown only if it fails.
quantize() {
  scripts/llamacpp.sh quantize "$1" "$2" "$3" 2>"$tmp/quantize.log" || { cat "$tmp/quantize.log" >&2; exit 1; }
}

random stories15M "$models/stories15M-F32.gguf"
for ty in "${types[@]}"; do
  quantize "$models/stories15M-F32.gguf" "$models/stories15M-$ty.gguf" "$ty"
done
# The same weights as a qwen2 model (random Q/K/V biases, rotary halves),
# and as a llama model with Llama 3.1's rotary frequency factors.
for arch in qwen2 llama3; do
  "$tmp/llamarandom" -gguf f32 -arch $arch -tokenizer testdata/llama/tokenizer.bin -o "$models/$arch-15M-F32.gguf" stories15M >/dev/null
  for ty in Q8_0 Q4_K_M; do
    quantize "$models/$arch-15M-F32.gguf" "$models/$arch-15M-$ty.gguf" "$ty"
  done
done

random stories110M "$tmp/stories110M-F32.gguf"
key=$(sha256sum "$tmp/stories110M-F32.gguf" | cut -c1-16)-$llamacpp
kept=$cache/llamacpp-oracle/$key
mkdir -p "$cache/llamacpp-oracle"
exec 9>"$cache/llamacpp-oracle.lock"
flock 9 # one writer; a second run waits, then finds the files
if [ ! -f "$kept/done" ]; then
  echo "llamacpp-oracle: quantizing stories110M into $kept" >&2
  find "$cache/llamacpp-oracle" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  mkdir -p "$kept.tmp"
  for ty in "${types[@]}"; do
    quantize "$tmp/stories110M-F32.gguf" "$kept.tmp/stories110M-$ty.gguf" "$ty"
  done
  touch "$kept.tmp/done"
  mv "$kept.tmp" "$kept"
fi
exec 9>&-
rm "$tmp/stories110M-F32.gguf"
for ty in "${types[@]}"; do
  ln -s "$kept/stories110M-$ty.gguf" "$models/stories110M-$ty.gguf"
done

# The tokenizers: Llama 2's, and Llama 3's and Qwen2.5's real vocabularies.
vocabs=$(scripts/llamacpp.sh vocabs)
INFERNET_LLAMACPP_MODELS=$models INFERNET_BPE_VOCABS=$vocabs "$GO" test -count=1 -timeout 20m \
  -run '^(TestLlamaCppOracle|TestLlamaCppTokenizers|TestQ4_0LikeLlamaQuantize)$' -v ./guest/go/llama |
  grep -v '^=== '

# Chat templates as node-llama-cpp renders a GGUF's own.
INFERNET_LLAMACPP_CHAT=1 INFERNET_BPE_VOCABS=$vocabs "$GO" test -count=1 -run '^TestChatTemplateOracle$' -v ./node/models |
  grep -v '^=== '
