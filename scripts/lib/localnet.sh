# shellcheck shell=bash
# A network of `infernet node` processes on loopback, for the example
# scripts (mnist.sh, chargpt.sh, demo.sh, openai-e2e.sh). Source it with
# $bin set to the infernet binary; it makes $net, a temporary directory
# removed (nodes stopped) on exit by localnet_cleanup (call it from your own
# EXIT trap if you set one).
#
#   node_start NAME [FLAGS]    start a node in $net/NAME; sets $addr (and
#                              ${node_addr[NAME]}) to its address, $id to its
#                              peer ID and ${node_pid[NAME]} to its process
#   wait_providers NODE N      wait until NODE has adverts of N providers
#   adverts NODE               print how many providers' adverts NODE has
net=$(mktemp -d)
node_pids=()
declare -A node_pid node_addr
localnet_cleanup() {
  for p in "${node_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$net"
}
trap localnet_cleanup EXIT
# Each node listens on a /16 of loopback of its own (127.N.0.1; all of 127/8
# is loopback on Linux): its peers count it as an operator of its own.
localnet_n=0
node_start() {
  local name=$1 ip; shift
  localnet_n=$((localnet_n % 254 + 1)); ip=127.$localnet_n.0.1
  "$bin" node --datadir "$net/$name" --listen "/ip4/$ip/tcp/0" --api 127.0.0.1:0 \
    --mdns=false --nat=false "$@" > "$net/$name.out" 2> "$net/$name.log" &
  node_pids+=($!)
  node_pid[$name]=$!
  for _ in $(seq 100); do
    addr=$(grep -m1 "^/ip4/$ip/" "$net/$name.out" 2>/dev/null) && [ -f "$net/$name/api.addr" ] && {
      id=$(head -1 "$net/$name.out"); node_addr[$name]=$addr; return; }
    sleep 0.1
  done
  echo "node $name did not start:"; cat "$net/$name.log"; exit 1
}
wait_providers() {
  for _ in $(seq 100); do
    [ "$(adverts "$1")" -ge "$2" ] && return
    sleep 0.1
  done
}
# adverts NODE: how many peers NODE holds an advert of (read with jq, not as text).
adverts() { "$bin" peers --json --datadir "$net/$1" | jq '[.[] | select(.advert != null)] | length'; }
