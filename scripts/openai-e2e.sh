#!/usr/bin/env bash
# The OpenAI API end to end with OpenAI's official npm client (openai
# 7.55.0, installed once under ${INFERNET_CACHE:-~/.cache/infernet}): four
# `infernet node` processes on loopback (three providers, one client that
# vouches for them), stories260K named on the client, then
# scripts/lib/openai-e2e.cjs streams a completion and a chat completion
# through the client's API and checks them against run.c's greedy text
# (testdata/llama/golden.jsonl), the usage counts, stop, top_k, penalties
# and logprobs, a Llama 3 style chat whose answer has an emoji (a model
# scripted to answer it: llamascripted), and OpenAI's error shape for an
# unknown model, bad JSON and max_tokens over the node's cap. Part of
# `make test` (make test-openai); needs bin/infernet, go, node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${INFERNET_BIN:-bin/infernet}
cache=${INFERNET_CACHE:-$HOME/.cache/infernet}
version=7.55.0
npmdir=$cache/npm-openai-$version
if [ ! -f "$npmdir/node_modules/openai/package.json" ]; then
  echo "openai-e2e: installing the npm package openai@$version into $npmdir" >&2
  rm -rf "$npmdir.tmp" && mkdir -p "$npmdir.tmp"
  (cd "$npmdir.tmp" && { npm install --no-audit --no-fund --loglevel=error "openai@$version" >/dev/null ||
    { sleep 5; npm install --no-audit --no-fund --loglevel=error "openai@$version" >/dev/null; }; })
  rm -rf "$npmdir" && mv "$npmdir.tmp" "$npmdir"
fi

# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
node_start p1; boot=$addr; trust=(--trust "$id")
node_start p2 --bootstrap "$boot"; trust+=(--trust "$id")
node_start p3 --bootstrap "$boot"; trust+=(--trust "$id")
node_start client --bootstrap "$boot" --no-provide "${trust[@]}" --serve-max-tokens 512
wait_providers client 3
"$bin" models add stories260K testdata/llama/stories260K.bin --tokenizer testdata/llama/tok512.bin --datadir "$net/client" >/dev/null
# A model with Llama 3's vocabulary shape, special tokens and chat template,
# scripted to answer every chat with this text (byte tokens: the emoji is 4).
script='Hi😀, café!'
${GO:-go} run ./guest/go/llama/llamatest/cmd/llamascripted -template node/models/testdata/chat/llama3.jinja \
  -o "$net/llama3-scripted.gguf" "$script"
"$bin" models add llama3-scripted "$net/llama3-scripted.gguf" --datadir "$net/client" >/dev/null

OPENAI_MODULE=$npmdir/node_modules/openai \
OPENAI_BASE_URL="http://$(cat "$net/client/api.addr")/v1" \
OPENAI_API_KEY=$(cat "$net/client/api.token") \
SCRIPT=$script \
  node scripts/lib/openai-e2e.cjs testdata/llama/golden.jsonl
