#!/usr/bin/env bash
# openai-rate.sh MODEL BACKEND [TOKENS]: how fast the OpenAI API serves a
# completion from the network. Two provider nodes on loopback run jobs on
# BACKEND (both on this machine's one GPU for cuda), a client node that
# vouches for them serves /v1/completions in tolerance mode with 2
# replicas, and MODEL (a GGUF file) is named on it. Two identical greedy
# requests of TOKENS tokens (default 64) are sent; the second is timed,
# the first having carried the weights to the providers. Prints one JSON
# line: first_s, tokens, seconds and tokens_per_second of the second.
# gpu-check runs it with cuda against `generate --local`; it needs python3
# and $bin (default bin/infernet), and no jq, which GPU machines may lack.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1 backend=$2 tokens=${3:-64}
bin=${bin:-bin/infernet}
# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
size=$(stat -c %s "$model")
cache=$(( (size >> 30) + 2 ))GiB # the weights, with room: the default cache is 2 GiB
provider=(--backend "$backend" --model-cache "$cache")
node_start p1 "${provider[@]}"; boot=$addr; trust=(--trust "$id")
node_start p2 "${provider[@]}" --bootstrap "$boot"; trust+=(--trust "$id")
node_start client --bootstrap "$boot" --no-provide "${trust[@]}" --serve-mode tolerance --serve-replicas 2
for _ in $(seq 300); do
  n=$("$bin" peers --json --datadir "$net/client" |
    python3 -c 'import json, sys; print(sum(1 for p in json.load(sys.stdin) if p.get("advert")))')
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
"$bin" models add rated "$model" --datadir "$net/client" >/dev/null
python3 - "http://$(cat "$net/client/api.addr")/v1/completions" "$(cat "$net/client/api.token")" "$tokens" <<'EOF'
import json, sys, time, urllib.request
url, token, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = json.dumps({"model": "rated", "prompt": "Once upon a time, there was a little robot named",
                   "max_tokens": tokens, "temperature": 0}).encode()
def complete():
    req = urllib.request.Request(url, body, {"Content-Type": "application/json", "Authorization": "Bearer " + token})
    start = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    return time.monotonic() - start, out["usage"]["completion_tokens"]
first, _ = complete()
took, n = complete()
print(json.dumps({"first_s": round(first, 2), "tokens": n, "seconds": round(took, 3),
                  "tokens_per_second": round(n / took, 1)}))
EOF
