#!/usr/bin/env bash
# infernet against llama.cpp, side by side in one run, on the same GGUF
# files (issue 35's rows): random stories110M weights (llamatest, seed 1) in
# f32 and as llama-quantize writes them in Q8_0, Q4_0, Q4_K_M and Q6_K (the
# files scripts/llamacpp-oracle.sh keeps in
# ${INFERNET_CACHE:-~/.cache/infernet}/llamacpp-oracle, made here if
# missing), greedy, a 143-token prompt then LLAMACPP_BENCH_TOKENS tokens;
# prompt processing and decode tokens/s of `infernet generate --local` in
# exact and tolerance mode and of llama.cpp (node-llama-cpp 3.22.1, its
# prebuilt CPU build: scripts/llamacpp.sh install), each on
# LLAMACPP_BENCH_THREADS threads, medians of interleaved rounds
# (scripts/lib/llamacpp_bench.py says how each is measured).
#
#   LLAMACPP_BENCH_ROUNDS   rounds (default 3; BENCH_QUICK=1: 1)
#   LLAMACPP_BENCH_TOKENS   generated tokens (default 64)
#   LLAMACPP_BENCH_THREADS  threads of each engine (default 1)
#   LLAMACPP_BENCH_TYPES    types (default "F32 Q8_0 Q4_0 Q4_K_M Q6_K")
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
rounds=${LLAMACPP_BENCH_ROUNDS:-$([ "${BENCH_QUICK:-}" = 1 ] && echo 1 || echo 3)}
tokens=${LLAMACPP_BENCH_TOKENS:-64}
threads=${LLAMACPP_BENCH_THREADS:-1}
types=${LLAMACPP_BENCH_TYPES:-F32 Q8_0 Q4_0 Q4_K_M Q6_K}
cache=${INFERNET_CACHE:-$HOME/.cache/infernet}

dir=$(scripts/llamacpp.sh install)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/infernet" ./cmd/infernet
"$GO" build -o "$tmp/llamarandom" ./guest/go/llama/llamatest/cmd/llamarandom
f32=$tmp/stories110M-F32.gguf
"$tmp/llamarandom" -gguf f32 -tokenizer testdata/llama/tokenizer.bin -o "$f32" stories110M >/dev/null
kept=$cache/llamacpp-oracle/$(sha256sum "$f32" | cut -c1-16)-$(basename "$dir")
files=()
for ty in $types; do
  f=$kept/stories110M-$ty.gguf
  if [ "$ty" = F32 ]; then
    f=$f32
  elif [ ! -f "$f" ]; then
    f=$tmp/stories110M-$ty.gguf
    scripts/llamacpp.sh quantize "$f32" "$f" "$ty" 2>/dev/null
  fi
  files+=("stories110M-$ty=$f")
done
cat > "$tmp/prompt.txt" <<'PROMPT'
Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree. She wanted to play with it, but her mom said it was time to go home. Lily was sad, but she said goodbye to the ball and walked home with her mom. The next day, Lily went back to the park. The ball was still there! She ran to it and kicked it high into the sky. Her friends laughed and played with her all afternoon. When the sun went down, Lily took the ball home and put it in her room. She was very happy and
PROMPT
python3 scripts/lib/llamacpp_bench.py "$tmp/infernet" "$dir/node_modules/node-llama-cpp" \
  "$PWD/scripts/lib/llamacpp-speed.mjs" "$tmp/prompt.txt" "$tokens" "$rounds" "$threads" "${files[@]}"
