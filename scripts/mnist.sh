#!/usr/bin/env bash
# make mnist: MNIST trained by federated averaging on a network of
# `infernet node` processes on loopback (4 providers and a client), with the
# CLI alone. Each round is one sharded job: 4 shards of 2 replicas, each
# training the global weights (EPOCHS local epochs) on its quarter of the
# 60,000 training images, a data blob every provider fetches once; the
# reduce job (jobs/fedavg) averages them. After each round the 10,000 test
# images are classified by a 10-shard job and the accuracy printed; at the
# end the network's predictions are compared with one local run.
#
#   scripts/mnist.sh [ROUNDS [EPOCHS]]     (defaults 3 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} epochs=${2:-2}
bin=bin/infernet
jobs=testdata/jobs
data=$(scripts/mnist-data.sh)
# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
node_start p1 --slots 1; boot=$addr
for p in p2 p3 p4; do node_start $p --slots 1 --bootstrap "$boot"; done
node_start client --bootstrap "$boot" --no-provide
wait_providers client 4
echo "network: 4 providers (1 slot each) and a client on loopback"

# --input-dir gives one shard per file: every shard starts from the same weights.
copies() { # copies FILE N DIR
  rm -rf "$3"; mkdir -p "$3"
  for i in $(seq -w 1 "$2"); do cp "$1" "$3/$i"; done
}
: > "$net/weights"
accuracy() { # accuracy PREDICTIONS: percentage of test labels matched
  local wrong
  wrong=$(tail -c +9 "$data/t10k-labels-idx1-ubyte" | cmp -l - "$1" | wc -l)
  awk -v w="$wrong" 'BEGIN { printf "%.2f", (10000 - w) / 100 }'
}
infer() { # infer WEIGHTS OUT: 10 verified shards of 1,000 test images
  copies "$1" 10 "$net/infer-in"
  "$bin" submit "$jobs/mnist/mnist.wasm" --input-dir "$net/infer-in" --replicas 2 --memory 512MiB --timeout 5m \
    --data images="$data/t10k-images-idx3-ubyte" --output "$2" --datadir "$net/client" -- infer 2>/dev/null
}
for r in $(seq "$rounds"); do
  copies "$net/weights" 4 "$net/round-in"
  t0=$(date +%s%N)
  echo "\$ infernet submit mnist.wasm --input-dir weights4/ --replicas 2 --reduce fedavg.wasm --data images=train-images --data labels=train-labels -- train $epochs 0.05 32"
  "$bin" submit "$jobs/mnist/mnist.wasm" --input-dir "$net/round-in" --replicas 2 --memory 512MiB --timeout 5m \
    --reduce "$jobs/fedavg/fedavg.wasm" --data images="$data/train-images-idx3-ubyte" --data labels="$data/train-labels-idx1-ubyte" \
    --output "$net/weights" --datadir "$net/client" -- train "$epochs" 0.05 32 2> "$net/summary" || { cat "$net/summary"; exit 1; }
  t1=$(date +%s%N)
  loss=$(od -An -t f4 -j 12 -N 4 "$net/weights" | tr -d ' ')
  infer "$net/weights" "$net/preds"
  printf 'round %d: %.1f s, training loss %s, test accuracy %s%%\n' "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" "$loss" "$(accuracy "$net/preds")"
done
grep -E 'sharded job|reduce' "$net/summary" | head -2
"$bin" run --memory 512MiB --timeout 5m "$jobs/mnist/mnist.wasm" --input "$net/weights" \
  --data images="$data/t10k-images-idx3-ubyte" -- infer > "$net/local"
if cmp -s "$net/local" "$net/preds"; then
  echo "the network's 10,000 predictions equal one local run's (infernet run)"
else
  echo "the network's predictions differ from a local run's"; exit 1
fi
