#!/usr/bin/env bash
# make chargpt: the character-level transformer (testdata/jobs/chargpt)
# trained on Moby Dick by a chain of network jobs on `infernet node`
# processes on loopback, with the CLI alone. Each job trains CHUNK steps
# from the last job's checkpoint (a blob) and is run by REPLICAS providers,
# whose checkpoints must agree bit for bit (exact mode); after each, an
# evaluation job reports the held-out bits per character (the last 10% of
# the book; a trigram model scores 2.96). At the end a sampling job writes
# some text.
#
#   scripts/chargpt.sh [STEPS [CHUNK [REPLICAS [LR]]]]   (defaults 6000, 1000, 2, 0.006)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6000} chunk=${2:-1000} replicas=${3:-2} lr=${4:-0.006}
bin=bin/infernet
job=testdata/jobs/chargpt/chargpt.wasm
text=$(scripts/moby-data.sh)
# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
node_start p1 --slots 1; boot=$addr
for p in $(seq 2 "$replicas"); do node_start "p$p" --slots 1 --bootstrap "$boot"; done
node_start client --bootstrap "$boot" --no-provide
wait_providers client "$replicas"
echo "network: $replicas providers (1 slot each) and a client on loopback; $steps steps in jobs of $chunk, $replicas replicas each"
submit() { # submit INPUT OUTPUT ARGS...: one verified job
  local in=$1 out=$2; shift 2
  "$bin" submit "$job" --input "$in" --replicas "$replicas" --memory 512MiB --timeout 60m --deadline 2h \
    --data text="$text" --output "$out" --datadir "$net/client" -- "$@" 2> "$net/summary" || { cat "$net/summary"; exit 1; }
}
: > "$net/ck"
done=0
while [ "$done" -lt "$steps" ]; do
  n=$((steps - done < chunk ? steps - done : chunk))
  t0=$(date +%s)
  submit "$net/ck" "$net/ck.new" train "$n" "$steps" "$lr"
  mv "$net/ck.new" "$net/ck"
  done=$((done + n))
  submit "$net/ck" "$net/eval" eval
  printf '%s (job of %d steps: %d s)\n' "$(cat "$net/eval")" "$n" $(($(date +%s) - t0))
done
submit "$net/ck" "$net/sample" sample 300 7
echo "--- 300 sampled characters:"
cat "$net/sample"; echo
