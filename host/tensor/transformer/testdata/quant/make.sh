#!/usr/bin/env bash
# make.sh: the golden files of quants_test.go, from the repository root:
#   host/tensor/transformer/testdata/quant/make.sh
# For each v4 block type T (abi's name: q4_0 … q6_k):
#   T.raw, T.f32: row 0 (768 values) of blk.0.attn_q.weight of a random
#     stories110M quantized by llama-quantize, as stored, and as ggml's
#     to_float gives it (little-endian f32);
#   T-random.raw, T-random.f32: random blocks with special f16 scales
#     (randomgguf.go), as stored, and as ggml's to_float gives them.
# Needs scripts/llamacpp.sh (node, npm, g++).
set -euo pipefail
out=host/tensor/transformer/testdata/quant
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./guest/go/llama/llamatest/cmd/llamarandom -gguf f32 -tokenizer testdata/llama/tokenizer.bin -o "$tmp/x.gguf" stories110M
for mix in Q4_0:q4_0 Q4_1:q4_1 Q5_0:q5_0 Q5_1:q5_1 Q4_K_M:q4_k Q5_K_M:q5_k Q6_K:q6_k; do
  q=${mix%%:*} t=${mix#*:}
  scripts/llamacpp.sh quantize "$tmp/x.gguf" "$tmp/$q.gguf" "$q" 2>/dev/null
  info=$(scripts/llamacpp.sh tensors "$tmp/$q.gguf" | jq -c 'select(.name == "blk.0.attn_q.weight")')
  off=$(jq .offset <<<"$info") rows=$(jq '.ne[1]' <<<"$info") size=$(jq .size <<<"$info")
  [ "$(jq -r .type <<<"$info" | tr K k)" = "$t" ] || { echo "make.sh: $q: attn_q is $info" >&2; exit 1; }
  dd if="$tmp/$q.gguf" of="$out/$t.raw" iflag=skip_bytes,count_bytes skip="$off" count=$((size / rows)) status=none
  scripts/llamacpp.sh dequant "$tmp/$q.gguf" blk.0.attn_q.weight "$tmp/$t.f32"
  head -c $((768 * 4)) "$tmp/$t.f32" >"$out/$t.f32"
done
(cd "$out" && go run randomgguf.go "$tmp/random.gguf" .)
for t in q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k; do
  scripts/llamacpp.sh dequant "$tmp/random.gguf" "$t" "$out/$t-random.f32"
done
