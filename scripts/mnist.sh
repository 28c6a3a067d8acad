#!/usr/bin/env bash
# make mnist: MNIST trained on a network of `infernet node` processes on
# loopback (4 providers and a client), with the CLI alone, by `infernet
# train`: each round is one sharded job of 4 shards of 2 replicas, each
# training the global weights on its quarter of the 60,000 training images
# (a data blob every provider fetches once), whose reduce makes the next
# weights; after each round the 10,000 test images are evaluated (mnist
# eval, verified) and the accuracy printed.
#
#   1. FedAvg: shards train EPOCHS epochs from the weights, jobs/fedavg
#      averages them.
#   2. DiLoCo: the state (weights and outer momentum) is a data blob of
#      every shard (--state-data); shards take as many local steps as
#      EPOCHS epochs, jobs/diloco averages them and takes the outer
#      Nesterov step.
#
# At the end the FedAvg weights classify the test images in a 10-shard job,
# and its predictions are compared with one local run's.
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
# The client joins through two providers in two networks (127.1 and 127.2):
# one that met the network through a single one could be shown that one's
# identities alone (an eclipse), and would verify nothing by replicas.
node_start client --bootstrap "$boot" --bootstrap "${node_addr[p2]}" --no-provide
wait_providers client 4
echo "network: 4 providers (1 slot each) and a client on loopback"

terms=(--shards 4 --replicas 2 --memory 512MiB --timeout 5m --datadir "$net/client"
  --data images="$data/train-images-idx3-ubyte" --data labels="$data/train-labels-idx1-ubyte"
  --eval "$jobs/mnist/mnist.wasm" --eval-arg eval
  --eval-data images="$data/t10k-images-idx3-ubyte" --eval-data labels="$data/t10k-labels-idx1-ubyte")
echo "\$ infernet train mnist.wasm --reduce fedavg.wasm --shards 4 --rounds $rounds --data images=train-images --data labels=train-labels --eval mnist.wasm --eval-arg eval --eval-data ... -- train $epochs 0.05 32"
"$bin" train "$jobs/mnist/mnist.wasm" --reduce "$jobs/fedavg/fedavg.wasm" --rounds "$rounds" "${terms[@]}" \
  --output "$net/weights" --checkpoints "$net/fedavg" -- train "$epochs" 0.05 32

# DiLoCo starts from explicit initial weights (a state data blob is never empty).
"$bin" submit "$jobs/mnist/mnist.wasm" --replicas 2 --datadir "$net/client" --output "$net/init" -- init 2>/dev/null
steps=$((epochs * 15000 / 32 + 1)) # as many steps as EPOCHS epochs of a quarter
echo "\$ infernet train mnist.wasm --reduce diloco.wasm --state init --state-data state ... -- local $steps 0.05 32"
"$bin" train "$jobs/mnist/mnist.wasm" --reduce "$jobs/diloco/diloco.wasm" --rounds "$rounds" "${terms[@]}" \
  --state "$net/init" --state-data state -- local "$steps" 0.05 32

accuracy() { # accuracy PREDICTIONS: percentage of test labels matched
  local wrong
  wrong=$(tail -c +9 "$data/t10k-labels-idx1-ubyte" | cmp -l - "$1" | wc -l)
  awk -v w="$wrong" 'BEGIN { printf "%.2f", (10000 - w) / 100 }'
}
mkdir -p "$net/infer-in"
for i in $(seq -w 1 10); do cp "$net/weights" "$net/infer-in/$i"; done
"$bin" submit "$jobs/mnist/mnist.wasm" --input-dir "$net/infer-in" --replicas 2 --memory 512MiB --timeout 5m \
  --data images="$data/t10k-images-idx3-ubyte" --output "$net/preds" --datadir "$net/client" -- infer 2>/dev/null
echo "10-shard verified inference with the FedAvg weights: $(accuracy "$net/preds")% right"
"$bin" run --memory 512MiB --timeout 5m "$jobs/mnist/mnist.wasm" --input "$net/weights" \
  --data images="$data/t10k-images-idx3-ubyte" -- infer > "$net/local"
if cmp -s "$net/local" "$net/preds"; then
  echo "the network's 10,000 predictions equal one local run's (infernet run)"
else
  echo "the network's predictions differ from a local run's"; exit 1
fi
