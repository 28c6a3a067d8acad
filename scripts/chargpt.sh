#!/usr/bin/env bash
# make chargpt: the character-level transformer (testdata/jobs/chargpt)
# trained on Moby Dick on `infernet node` processes on loopback, with the
# CLI alone: `infernet train` in rounds of one shard, each training CHUNK
# steps from the last round's checkpoint (a blob), run by REPLICAS
# providers whose checkpoints must agree bit for bit (exact mode); the
# reduce of one shard is jobs/cat (it passes the checkpoint on). After each
# round an evaluation job reports the held-out bits per character (the
# last 10% of the book; a trigram model scores 2.96). At the end a
# sampling job writes some text.
#
#   scripts/chargpt.sh [STEPS [CHUNK [REPLICAS [LR]]]]   (defaults 6000, 1000, 2, 0.006; CHUNK divides STEPS)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6000} chunk=${2:-1000} replicas=${3:-2} lr=${4:-0.006}
if [ $((steps % chunk)) -ne 0 ]; then echo "chargpt.sh: CHUNK ($chunk) must divide STEPS ($steps)" >&2; exit 2; fi
bin=bin/infernet
job=testdata/jobs/chargpt/chargpt.wasm
text=$(scripts/moby-data.sh)
# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
node_start p1 --slots 1; boot=$addr
for p in $(seq 2 "$replicas"); do node_start "p$p" --slots 1 --bootstrap "$boot"; done
# The client joins through two providers in two networks where it can: one
# that met the network through a single one could be shown that one's
# identities alone (an eclipse), and would verify nothing by replicas.
node_start client --bootstrap "$boot" ${node_addr[p2]:+--bootstrap "${node_addr[p2]}"} --no-provide
wait_providers client "$replicas"
echo "network: $replicas providers (1 slot each) and a client on loopback; $steps steps in rounds of $chunk, $replicas replicas each"
terms=(--replicas "$replicas" --memory 512MiB --timeout 60m --deadline 2h --datadir "$net/client")
echo "\$ infernet train chargpt.wasm --shards 1 --rounds $((steps / chunk)) --reduce cat.wasm --data text=moby-dick.txt --eval chargpt.wasm --eval-arg eval --eval-data text=moby-dick.txt -- train $chunk $steps $lr"
"$bin" train "$job" --shards 1 --rounds $((steps / chunk)) --reduce testdata/jobs/cat/cat.wasm "${terms[@]}" \
  --data text="$text" --eval "$job" --eval-arg eval --eval-data text="$text" --output "$net/ck" -- train "$chunk" "$steps" "$lr"
"$bin" submit "$job" --input "$net/ck" "${terms[@]}" --data text="$text" --output "$net/sample" -- sample 300 7 2> "$net/summary" ||
  { cat "$net/summary"; exit 1; }
echo "--- 300 sampled characters:"
cat "$net/sample"; echo
