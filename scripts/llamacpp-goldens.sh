#!/usr/bin/env bash
# llama.cpp's golden tokenizations of prompts with special tokens written in
# them, for the GGUF vocabularies of testdata/llama's two llama2.c
# tokenizers: testdata/llama/special_tokens.jsonl, read by
# TestEncodeSpecialTokens (guest/go/llama/tokenizer_test.go). Each prompt of
# testdata/llama/special_prompts.txt (a JSON string a line) is tokenized by
# llama.cpp (scripts/llamacpp.sh: node-llama-cpp 3.22.1) with special tokens
# parsed, as llama-server and llama-cli read a prompt (parse_special), in
# the vocabulary of a GGUF file that llamarandom writes from tok512.bin
# (stories260K) and from tokenizer.bin (stories15M, Llama 2's 32,000
# tokens). Format: testdata/llama/README.md.
#
# Idempotent: the file is rewritten only if it changed. About 20 s once the
# oracle is installed (scripts/llamacpp.sh install, run here first).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
scripts/llamacpp.sh install >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/llamarandom" ./guest/go/llama/llamatest/cmd/llamarandom
"$tmp/llamarandom" -gguf f32 -tokenizer testdata/llama/tok512.bin -o "$tmp/tok512.bin.gguf" stories260K >/dev/null
"$tmp/llamarandom" -gguf f32 -tokenizer testdata/llama/tokenizer.bin -o "$tmp/tokenizer.bin.gguf" stories15M >/dev/null
python3 scripts/lib/llamacpp_goldens.py "$tmp" testdata/llama
