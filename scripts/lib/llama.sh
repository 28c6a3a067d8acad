# shellcheck shell=bash
# Llama models and llama2.c's run.c for the scripts (llama-goldens.sh,
# llama-bench.sh, demo.sh). Source it from the repository root; it sets
#
#   $llama_shared   the project's shared data: $INFERNET_SHARED, else
#                   ../shared beside the checkout, else ../shared beside the
#                   main checkout (for a git worktree)
#   $llama_models   real models and tokenizers: $LLAMA_MODELS, else
#                   $llama_shared/models (stories260K.bin, tok512.bin,
#                   tokenizer.bin; README.md there)
#   $llama2c_src    llama2.c's run.c: $LLAMA2C_DIR/run.c, else
#                   $llama_shared/anchors/llama2c/run.c
#   $llama2c_dir    where llama2c_build puts its builds:
#                   ${INFERNET_CACHE:-~/.cache/infernet}/llama2c-350e04fe
#
# and defines
#
#   llama2c_build      builds, once, $llama2c_dir/run (cc -O3), runfast
#                      (cc -Ofast -march=native -fopenmp) and golden (run.c
#                      with scripts/lib/llama2c-golden.c: the token ids of
#                      an encode or a run); fails if run.c is not llama2.c
#                      350e04fe's
#   llama_random SHAPE SEED
#                      prints the path of the cached random model of a preset
#                      shape (guest/go/llama/llamatest), writing it if missing
#                      (with $LLAMARANDOM, a built llamarandom, if set;
#                      else go run)
#   infernet_generate [BIN]
#                      succeeds if BIN (default bin/infernet) has the
#                      generate command (its help names --max-tokens)

llama2c_commit=350e04fe
llama2c_sha256=9c4f2d5c6ae01b71726d1cc37530d71e60bff0ec7cc012565f16a43c1ca658bd

llama_shared=${INFERNET_SHARED:-}
if [ -z "$llama_shared" ]; then
  for d in "$PWD/../shared" "$(dirname "$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo .)")/../shared"; do
    if [ -d "$d/models" ]; then llama_shared=$(cd "$d" && pwd); break; fi
  done
fi
llama_models=${LLAMA_MODELS:-${llama_shared:+$llama_shared/models}}
llama2c_src=${LLAMA2C_DIR:+$LLAMA2C_DIR/run.c}
llama2c_src=${llama2c_src:-${llama_shared:+$llama_shared/anchors/llama2c/run.c}}
llama2c_dir="${INFERNET_CACHE:-$HOME/.cache/infernet}/llama2c-$llama2c_commit"

llama2c_build() {
  if [ -z "$llama2c_src" ] || [ ! -f "$llama2c_src" ]; then
    echo "llama2.c's run.c not found (set LLAMA2C_DIR, or INFERNET_SHARED to the shared data)" >&2
    return 1
  fi
  local sum
  sum=$(sha256sum "$llama2c_src" | cut -d' ' -f1)
  if [ "$sum" != "$llama2c_sha256" ]; then
    echo "$llama2c_src is not llama2.c $llama2c_commit's run.c (sha256 $sum, want $llama2c_sha256)" >&2
    return 1
  fi
  mkdir -p "$llama2c_dir"
  cmp -s "$llama2c_src" "$llama2c_dir/run.c" || install -m 0444 "$llama2c_src" "$llama2c_dir/run.c"
  local golden_src=$PWD/scripts/lib/llama2c-golden.c
  # Each binary is rebuilt when missing or older than its sources.
  if [ ! -x "$llama2c_dir/run" ] || [ "$llama2c_dir/run.c" -nt "$llama2c_dir/run" ]; then
    cc -O3 -o "$llama2c_dir/run" "$llama2c_dir/run.c" -lm
  fi
  if [ ! -x "$llama2c_dir/runfast" ] || [ "$llama2c_dir/run.c" -nt "$llama2c_dir/runfast" ]; then
    cc -Ofast -march=native -fopenmp -o "$llama2c_dir/runfast" "$llama2c_dir/run.c" -lm
  fi
  if [ ! -x "$llama2c_dir/golden" ] || [ "$llama2c_dir/run.c" -nt "$llama2c_dir/golden" ] || [ "$golden_src" -nt "$llama2c_dir/golden" ]; then
    cc -O3 -I "$llama2c_dir" -o "$llama2c_dir/golden" "$golden_src" -lm
  fi
}

llama_random() {
  if [ -n "${LLAMARANDOM:-}" ]; then "$LLAMARANDOM" -seed "$2" "$1"; return; fi
  go run ./guest/go/llama/llamatest/cmd/llamarandom -seed "$2" "$1"
}

infernet_generate() {
  local b=${1:-bin/infernet}
  [ -x "$b" ] && "$b" generate --help 2>&1 | grep -q -- --max-tokens
}
