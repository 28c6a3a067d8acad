#!/usr/bin/env bash
# make bench-host: the host's floor under a GPU decode step, on any machine.
#
# infernet generate --local --backend cuda runs a TinyLlama-1.1B-shaped
# model (random weights, bf16 GGUF, 22 layers) through the whole GPU path,
# the guest, the host module, the GPU worker process and its driver calls,
# on the FAKE CUDA driver in its bench mode (FAKECUDA_BENCH=1: no kernel
# runs, nothing is logged, weights are not copied; the tokens are
# garbage). What is left is the time the host itself spends per token,
# which no GPU can take away: the ceiling on a GPU's tokens/s from this
# machine's cores (the target is 300 on an H100, docs/tensor.md). A real
# driver adds its own cost per launch (about 2-3 us on an H200).
#
# Prints, per run: decode tokens/s and us per token, and the model's load
# (weights to the worker) and first token; then, from one --profile run,
# the operations per token and the worker's us per operation.
#   HOSTFLOOR_TOKENS (default 1000), HOSTFLOOR_RUNS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
cache="${INFERNET_CACHE:-$HOME/.cache/infernet}"
tokens=${HOSTFLOOR_TOKENS:-1000} runs=${HOSTFLOOR_RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$GO" build -o "$tmp/infernet" ./cmd/infernet
"$GO" build -o "$tmp/llamarandom" ./guest/go/llama/llamatest/cmd/llamarandom
"${CC:-cc}" -shared -fPIC -O2 -o "$tmp/libfakecuda.so" host/tensor/cuda/testdata/fakecuda.c -lm -lpthread
mkdir -p "$cache/models"
model="$cache/models/tinyllama1B-bf16-g$("$tmp/llamarandom" -version).gguf"
if [ ! -f "$model" ]; then
	echo "writing $model (once; about a minute)"
	"$tmp/llamarandom" -seed 1 -gguf bf16 -tokenizer testdata/llama/tokenizer.bin -o "$model.tmp" tinyllama1B >/dev/null
	mv "$model.tmp" "$model"
fi
export INFERNET_CUDA_DRIVER="$tmp/libfakecuda.so" INFERNET_CUBLAS="$tmp/libfakecuda.so" FAKECUDA_BENCH=1
gen() {
	"$tmp/infernet" generate "$model" --prompt "Once upon a time" --local --backend cuda --mode tolerance \
		--max-tokens "$tokens" --json "$@" 2>"$tmp/stderr" || { cat "$tmp/stderr" >&2; return 1; }
}
echo "host floor of a 1.1B-shape bf16 decode step (fake driver, bench mode), $tokens tokens, $(nproc) cores"
for i in $(seq "$runs"); do
	gen >"$tmp/run$i.json"
done
gen --profile >"$tmp/profile.json"
python3 - "$tmp" "$runs" <<'EOF'
import json, statistics, sys
tmp, runs = sys.argv[1], int(sys.argv[2])
rs = [json.load(open(f"{tmp}/run{i}.json")) for i in range(1, runs + 1)]
for i, r in enumerate(rs, 1):
    tps = r["decode_tokens_per_second"]
    print(f"run {i}: decode {tps:7.1f} tok/s ({1e6 / tps:6.0f} us/token)   load {r['load_ms']:7.0f} ms   first token {r['first_token_ms']:7.0f} ms")
med = statistics.median(r["decode_tokens_per_second"] for r in rs)
p = json.load(open(f"{tmp}/profile.json"))
dev = p.get("device_profile") or []
ops = sum(x["per_token"] for x in dev)
print(f"median decode {med:.1f} tok/s: {1e6 / med:.0f} us a token, {ops:.0f} worker operations a token, {1e6 / med / ops:.2f} us an operation end to end")
for x in sorted(dev, key=lambda x: -x["per_token"] * x["worker_us"]):
    print(f"  {x['op']:22s} {x['per_token']:6.2f}/token   worker {x['worker_us']:6.2f} us   (profiled: the marks' cost included)")
guest = sum(x["host_ms"] for x in p["profile"] if x["op"] not in ("argmax", "sample", "tensor_from_data"))
print(f"guest side: {1e3 * guest / p['completion_tokens']:.0f} us a token in host calls other than the token's wait (argmax)")
EOF
