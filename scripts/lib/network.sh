# Nodes on loopback for scripts (demo.sh, openai-e2e.sh): source it with
# $bin set to the infernet binary. net_up makes $net, a directory the
# nodes' data directories go in; net_down (run it on exit) stops them.
#
#   net_start NAME [flags]   runs `infernet node` in the background; sets
#                            $addr to its first dialable address and $id to
#                            its peer ID (the node prints its ID, then its
#                            addresses)
#   net_wait_adverts NAME N  waits until node NAME knows N providers
net_up() {
  net=$(mktemp -d)
  pids=()
  declare -gA pid_of
}
net_down() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$net"
}
net_start() {
  local name=$1; shift
  "$bin" node --datadir "$net/$name" --listen /ip4/127.0.0.1/tcp/0 --api 127.0.0.1:0 \
    --mdns=false --nat=false --slots 2 --heartbeat 200ms --silence 3s "$@" \
    > "$net/$name.out" 2> "$net/$name.log" &
  pids+=($!)
  pid_of[$name]=$!
  for _ in $(seq 100); do
    addr=$(grep -m1 '^/ip4/127.0.0.1/' "$net/$name.out" 2>/dev/null) && [ -f "$net/$name/api.addr" ] && {
      id=$(head -1 "$net/$name.out"); return; }
    sleep 0.1
  done
  echo "node $name did not start:"; cat "$net/$name.log"; exit 1
}
net_wait_adverts() {
  for _ in $(seq 100); do
    [ "$("$bin" peers --json --datadir "$net/$1" | grep -c '"advert"')" -ge "$2" ] && return
    sleep 0.1
  done
  echo "node $1 does not know $2 providers"; exit 1
}
