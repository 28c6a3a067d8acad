#!/usr/bin/env bash
# Regenerates the golden data of guest/go/llama's tests under testdata/llama
# from llama2.c's reference run.c (LLAMA2C, default /work/shared/anchors/llama2c):
#
#   tokens.jsonl       token ids of tokenize_prompts.txt with tok512.bin and
#                      tokenizer.bin (run.c's encode, BOS added)
#   completions.jsonl  stories260K.bin completions of complete_prompts.txt,
#                      128 steps: greedy (-t 0), and sampled at temperature
#                      0.9 with top-p 0.9 (seed 42) and with all tokens (top-p
#                      1, seed 7); then greedy completions of
#                      complete_long_prompts.txt over the whole context (512
#                      steps), which end where the model writes BOS (one prompt
#                      of 192 tokens)
#
# (provenance: testdata/llama/GOLDENS.md). testdata/llama/golden.c includes run.c (-DTESTING) and runs its functions;
# every completion is checked against the stdout of run.c's own CLI
# (cc -O3 run.c -lm; ./run MODEL -z TOK -t T -p P -s SEED -n STEPS -i PROMPT).
# Needs cc and jq. The outputs are deterministic.
set -euo pipefail
LLAMA2C=${LLAMA2C:-/work/shared/anchors/llama2c}
cd "$(dirname "$0")/../testdata/llama"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cc -O3 -DTESTING -I"$LLAMA2C" -o "$tmp/golden" golden.c -lm
cc -O3 -o "$tmp/run" "$LLAMA2C/run.c" -lm

{
  "$tmp/golden" tokens tok512.bin 512 < tokenize_prompts.txt
  "$tmp/golden" tokens tokenizer.bin 32000 < tokenize_prompts.txt
} > tokens.jsonl

# mode: steps temperature top-p seed prompts
modes=("128 0 0.9 1 complete_prompts.txt" "128 0.9 0.9 42 complete_prompts.txt" "128 0.9 1 7 complete_prompts.txt"
       "512 0 0.9 1 complete_long_prompts.txt")
: > completions.jsonl
for m in "${modes[@]}"; do
  read -r n t p s prompts <<< "$m"
  "$tmp/golden" generate stories260K.bin tok512.bin "$n" "$t" "$p" "$s" < "$prompts" >> completions.jsonl
done

# Check each completion against run.c's CLI (the prompts have no escapes).
i=0
for m in "${modes[@]}"; do
  read -r n t p s prompts <<< "$m"
  while IFS= read -r prompt; do
    i=$((i + 1))
    want=$(sed -n "${i}p" completions.jsonl | jq -j .stdout)
    got=$("$tmp/run" stories260K.bin -z tok512.bin -t "$t" -p "$p" -s "$s" -n "$n" -i "$prompt" 2>/dev/null)
    if [ "$got" != "$want" ]; then
      echo "llama-goldens: run.c's CLI disagrees on completion $i ($prompt, -n $n -t $t -p $p -s $s):" >&2
      printf 'cli:    %q\ngolden: %q\n' "$got" "$want" >&2
      exit 1
    fi
  done < "$prompts"
done
echo "llama-goldens: $(wc -l < tokens.jsonl) tokenizations, $i completions (checked against run.c's CLI)"
