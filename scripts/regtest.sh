#!/usr/bin/env bash
# Local Lightning regtest network for infernet's payment tests.
#
#   scripts/regtest.sh up       build pinned btcd/lnd (first time only), start btcd and four lnd
#                               nodes (client, provider1, provider2, aggregator) on 127.0.0.1, fund
#                               them, open client->provider1, client->provider2, client->aggregator,
#                               aggregator->provider1 and aggregator->provider2 channels, prove that
#                               payments (plain and hold invoices) work, write .regtest/env.
#                               If the network is already up it only re-verifies it.
#   scripts/regtest.sh down     stop the lnd nodes, then btcd (SIGTERM, then SIGKILL after a
#                               timeout) and REMOVE .regtest/ entirely: the next `up` is fresh.
#   scripts/regtest.sh status   show what is running.
#   scripts/regtest.sh build    only build the binaries into the cache.
#   scripts/regtest.sh built    exit 0 if the binaries are in the cache (nothing is built).
#   scripts/regtest.sh mine [N] mine N blocks (default 1) and wait until every lnd has them.
#   scripts/regtest.sh lncli NODE ARGS...   run lncli against client|provider1|provider2|aggregator.
#   scripts/regtest.sh run CMD ARGS...      run CMD with the network up: brought up first if it
#                               is not (and down again afterwards), left alone if it is. Exits
#                               with CMD's status. `make test` runs the Lightning tests this way.
#
# Everything lives under <repo>/.regtest/: data dirs, logs (*.log), pids, ports, and `env`, a
# shell file of KEY=VALUE lines (ends with an `export` line) defining LNCLI and, for each of
# CLIENT, PROVIDER1, PROVIDER2, AGGREGATOR: LND_<NAME>_RPCSERVER, LND_<NAME>_TLSCERT,
# LND_<NAME>_MACAROON (absolute paths). `env` is written last, only once the network has carried
# payments. .regtest/helpers.sh additionally defines lncli_<node> for each node, and btcctl.
#
# Binaries: ${INFERNET_CACHE:-$HOME/.cache/infernet}/btcd-v0.24.2/{btcd,btcctl} (go install) and
# .../lnd-v0.20.0-beta/{lnd,lncli}, built from scripts/lnd-build (a wrapper module: lnd needs
# replace directives, so it cannot be `go install`ed at a version). The `integration` build tag
# gives lnd's fast wallet scrypt (see ../shared/FACTS.md, "Lightning").
#
# lncli prints protobuf JSON, whose spacing is random on purpose (one or two spaces after a colon,
# fixed per lncli binary): every answer is read with jq, never as text. The checks are tested
# against recorded outputs in both spacings (payments/regtest/script_test.go, which sources this
# file: nothing runs when it is sourced).
#
# Knobs: REGTEST_PORT_BASE (first port tried, default 29700; 10 ports in base..base+41 are used,
# the first free block of 100 is taken), REGTEST_TIMEOUT (seconds per wait, default 90),
# REGTEST_LNCLI (an lncli to run instead of the cached build's).
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RT="$ROOT/.regtest"
CACHE="${INFERNET_CACHE:-$HOME/.cache/infernet}"
BTCD_VERSION=v0.24.2
LND_VERSION=v0.20.0-beta
BTCD_BIN="$CACHE/btcd-$BTCD_VERSION"
LND_BIN="$CACHE/lnd-$LND_VERSION"
LNCLI="${REGTEST_LNCLI:-$LND_BIN/lncli}"
LND_TAGS="signrpc walletrpc chainrpc invoicesrpc routerrpc peersrpc integration"
NODES=(client provider1 provider2 aggregator)
RPCUSER=infernet
RPCPASS=infernet-regtest
TIMEOUT="${REGTEST_TIMEOUT:-90}"
CHAN_SAT=5000000    # each channel (client->provider, client->aggregator, aggregator->provider)
PUSH_SAT=1000000    # pushed to the provider's side of each channel it is given: what it stakes as collateral
PROVIDER_SAT=100000000 # on-chain coins for each provider (anchor reserve, own channel opens)
AGGREGATOR_SAT=$((CHAN_SAT + PROVIDER_SAT / 2)) # each of the aggregator's two coins (one per channel)

log() { printf 'regtest: %s\n' "$*" >&2; }

# Prints the tail of every log and stops whatever this run started; keeps .regtest/ for reading.
dump_logs() {
  local f
  for f in "$RT"/*.log; do
    [ -f "$f" ] || continue
    printf '\n===== tail -n 30 %s =====\n' "$f" >&2
    tail -n 30 "$f" >&2 || true
  done
}
die() {
  log "ERROR: $*"
  dump_logs
  if [ "${STARTING:-0}" = 1 ]; then
    log "stopping the daemons; logs stay in $RT (removed by the next up/down)"
    stop_all || true
  fi
  exit 1
}
on_err() {
  local rc=$? line=$1
  [ "$BASHPID" = "$$" ] || exit "$rc"   # a failure inside $(...): the caller reports it
  trap - ERR
  die "command failed (exit $rc) at scripts/regtest.sh line $line: $BASH_COMMAND"
}
trap 'on_err $LINENO' ERR

# ---------------------------------------------------------------- build

build() {
  command -v go >/dev/null || die "go is not on PATH (needed once to build btcd and lnd)"
  mkdir -p "$CACHE"
  if [ ! -x "$BTCD_BIN/btcd" ] || [ ! -x "$BTCD_BIN/btcctl" ]; then
    log "building btcd $BTCD_VERSION into $BTCD_BIN (first time only, ~1-2 min)"
    mkdir -p "$BTCD_BIN"
    GOBIN="$BTCD_BIN" with_progress btcd "$CACHE/btcd-build.log" \
      go install -v "github.com/btcsuite/btcd@$BTCD_VERSION" "github.com/btcsuite/btcd/cmd/btcctl@$BTCD_VERSION"
  fi
  if [ ! -x "$LND_BIN/lnd" ] || [ ! -x "$LND_BIN/lncli" ]; then
    log "building lnd $LND_VERSION into $LND_BIN (first time only, ~400 CPU-s, 10+ min on 2 busy cores)"
    mkdir -p "$LND_BIN"
    local tmp
    tmp="$(mktemp -d "$LND_BIN/.build.XXXXXX")"
    (cd "$ROOT/scripts/lnd-build" && with_progress lnd "$CACHE/lnd-build.log" go build -v -tags="$LND_TAGS" -o "$tmp/" \
      github.com/lightningnetwork/lnd/cmd/lnd github.com/lightningnetwork/lnd/cmd/lncli)
    mv -f "$tmp/lnd" "$tmp/lncli" "$LND_BIN/"  # only complete binaries land in the cache
    rmdir "$tmp"
  fi
}

# with_progress NAME LOG CMD...: runs CMD (a `go build -v`) with its output in LOG, and says every
# 30 s how long it has run and how many packages it has compiled; on failure shows LOG's tail.
with_progress() {
  local name=$1 logf=$2 pid rc=0 t0=$SECONDS next=$((SECONDS + 30))
  shift 2
  "$@" >"$logf" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ]; then
      next=$((SECONDS + 30))
      log "building $name: $((SECONDS - t0)) s, $(grep -cv '^go: ' "$logf" || true) packages compiled"
    fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" != 0 ]; then
    tail -n 30 "$logf" >&2
    die "building $name failed (exit $rc); the whole log: $logf"
  fi
  log "built $name in $((SECONDS - t0)) s"
}

# built: the binaries are in the cache (a question, so no ERR trap when the answer is no).
built() { [ -x "$BTCD_BIN/btcd" ] && [ -x "$BTCD_BIN/btcctl" ] && [ -x "$LND_BIN/lnd" ] && [ -x "$LND_BIN/lncli" ]; }

# ---------------------------------------------------------------- helpers

# field NAME: the string or number NAME of the JSON object on stdin; fails if it is absent.
field() { jq -er --arg k "$1" '.[$k] | if type == "string" or type == "number" then . else error("\($k) is \(type)") end'; }

# wait_until DESCRIPTION COMMAND...: retry COMMAND every 0.2 s until it succeeds or TIMEOUT.
wait_until() {
  local desc=$1; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "timed out after ${TIMEOUT}s waiting for: $desc"
    sleep 0.2
  done
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

choose_ports() {
  local base=${REGTEST_PORT_BASE:-29700} try p ok
  for try in $(seq 0 19); do
    ok=1
    for p in $base $((base + 1)) $((base + 10)) $((base + 11)) $((base + 20)) $((base + 21)) \
      $((base + 30)) $((base + 31)) $((base + 40)) $((base + 41)); do
      if port_in_use "$p"; then ok=0; break; fi
    done
    if [ "$ok" = 1 ]; then
      cat >"$RT/ports" <<EOF
BTCD_RPC_PORT=$base
BTCD_P2P_PORT=$((base + 1))
CLIENT_RPC_PORT=$((base + 10))
CLIENT_P2P_PORT=$((base + 11))
PROVIDER1_RPC_PORT=$((base + 20))
PROVIDER1_P2P_PORT=$((base + 21))
PROVIDER2_RPC_PORT=$((base + 30))
PROVIDER2_P2P_PORT=$((base + 31))
AGGREGATOR_RPC_PORT=$((base + 40))
AGGREGATOR_P2P_PORT=$((base + 41))
EOF
      return 0
    fi
    base=$((base + 100))
  done
  die "no free block of ports found from ${REGTEST_PORT_BASE:-29700} on; set REGTEST_PORT_BASE"
}

upper() { printf '%s' "$1" | tr '[:lower:]' '[:upper:]'; }
rpc_port() { local v; v="$(upper "$1")_RPC_PORT"; printf '%s' "${!v}"; }
p2p_port() { local v; v="$(upper "$1")_P2P_PORT"; printf '%s' "${!v}"; }
macaroon() { printf '%s' "$RT/$1/data/chain/bitcoin/regtest/admin.macaroon"; }

lnc() { # lnc NODE ARGS...
  local n=$1; shift
  "$LNCLI" --network=regtest --rpcserver="127.0.0.1:$(rpc_port "$n")" \
    --tlscertpath="$RT/$n/tls.cert" --macaroonpath="$(macaroon "$n")" "$@"
}
btcctl() {
  "$BTCD_BIN/btcctl" -C "$RT/btcctl.conf" --regtest --rpcuser="$RPCUSER" --rpcpass="$RPCPASS" \
    --rpcserver="127.0.0.1:$BTCD_RPC_PORT" --rpccert="$RT/btcd/rpc.cert" "$@"
}

# alive NAME: the pid in .regtest/NAME.pid runs one of our daemons (guards against reused pids).
alive() {
  local pid
  pid="$(cat "$RT/$1.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$RT/"
}

# start NAME BINARY ARGS...: in its own session, so it outlives make and the calling shell.
start() {
  local name=$1; shift
  setsid "$@" >>"$RT/$name.log" 2>&1 </dev/null 9<&- &
  echo $! >"$RT/$name.pid"
  # A daemon in the middle of its exec can read as no daemon (an empty
  # cmdline): look a few times before calling it gone.
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.1
    alive "$name" && return 0
    kill -0 "$(cat "$RT/$name.pid")" 2>/dev/null || break
  done
  alive "$name" || die "$name exited right after start"
}

# stop NAME: SIGTERM, wait up to 30 s, then SIGKILL.
stop() {
  local name=$1 pid i
  alive "$name" || { rm -f "$RT/$name.pid"; return 0; }
  pid="$(cat "$RT/$name.pid")"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 150); do
    alive "$name" || break
    sleep 0.2
  done
  if alive "$name"; then
    log "$name (pid $pid) ignored SIGTERM for 30s: killing"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$RT/$name.pid"
}

stop_all() {
  local n
  for n in "${NODES[@]}"; do stop "$n"; done
  stop btcd
}

load_ports() {
  [ -f "$RT/ports" ] || return 1
  # shellcheck disable=SC1091
  . "$RT/ports"
}

start_btcd() { # start_btcd [MININGADDR]
  local extra=()
  [ -z "${1:-}" ] || extra=(--miningaddr="$1")
  # Note: btcd always creates an empty ~/.btcd (from the passwd entry, not $HOME); nothing else.
  start btcd "$BTCD_BIN/btcd" --regtest --configfile="$RT/btcd/btcd.conf" \
    --datadir="$RT/btcd/data" --logdir="$RT/btcd/logs" \
    --rpccert="$RT/btcd/rpc.cert" --rpckey="$RT/btcd/rpc.key" \
    --rpcuser="$RPCUSER" --rpcpass="$RPCPASS" --rpclisten="127.0.0.1:$BTCD_RPC_PORT" \
    --listen="127.0.0.1:$BTCD_P2P_PORT" --txindex --debuglevel=info "${extra[@]}"
  wait_until "btcd RPC on 127.0.0.1:$BTCD_RPC_PORT" btcctl getblockcount
}

start_lnd() { # start_lnd NODE
  local n=$1
  mkdir -p "$RT/$n"
  start "$n" "$LND_BIN/lnd" --lnddir="$RT/$n" --alias="infernet-$n" \
    --bitcoin.regtest --bitcoin.node=btcd \
    --btcd.rpchost="127.0.0.1:$BTCD_RPC_PORT" --btcd.rpcuser="$RPCUSER" \
    --btcd.rpcpass="$RPCPASS" --btcd.rpccert="$RT/btcd/rpc.cert" \
    --noseedbackup --norest --nobootstrap --trickledelay=50 --channel-commit-interval=5ms \
    --rpclisten="127.0.0.1:$(rpc_port "$n")" --listen="127.0.0.1:$(p2p_port "$n")" \
    --debuglevel=info
}

state_is() { # state_is NODE STATE...
  local n=$1 s; shift
  s="$(lnc "$n" state 2>/dev/null | field state)" || return 1
  local want
  for want in "$@"; do [ "$s" = "$want" ] && return 0; done
  return 1
}

synced() { # synced NODE HEIGHT
  lnc "$1" getinfo | jq -e --argjson h "$2" '.synced_to_chain == true and (.block_height | tonumber) >= $h' >/dev/null
}

mine() { # mine N: generate N blocks, wait until every running lnd has them
  local n=${1:-1} h chunk node
  while [ "$n" -gt 0 ]; do
    chunk=$((n > 100 ? 100 : n))
    btcctl generate "$chunk" >/dev/null
    n=$((n - chunk))
  done
  h="$(btcctl getblockcount)"
  for node in "${NODES[@]}"; do
    alive "$node" || continue
    wait_until "$node synced to height $h" synced "$node" "$h"
  done
}

confirmed_balance_at_least() { # NODE SAT
  lnc "$1" walletbalance | jq -e --argjson s "$2" '(.confirmed_balance | tonumber) >= $s' >/dev/null
}

# active_channels: how many channels in listchannels' JSON on stdin are active.
active_channels() { jq -e '[.channels[]? | select(.active == true)] | length'; }
active_channels_at_least() { # NODE N
  local c
  c="$(lnc "$1" listchannels --active_only | active_channels)" || return 1
  [ "$c" -ge "$2" ]
}

route_ok() { # route_ok FROM TO_PUBKEY: a route of at least one hop
  lnc "$1" queryroutes --dest="$2" --amt=1000 | jq -e 'any(.routes[]?; (.hops | length) > 0)' >/dev/null
}

pubkey() { lnc "$1" getinfo | field identity_pubkey; }

# succeeded: the JSON on stdin is lncli payinvoice --json's, and the payment's last state is
# SUCCEEDED (lncli may print one object per update).
succeeded() { jq -es 'length > 0 and (last | .status == "SUCCEEDED")' >/dev/null; }

# pay FROM TO AMT: TO issues an invoice, FROM pays it; prints lncli's payment latency.
pay() {
  local from=$1 to=$2 amt=$3 req out rc=0 latency t0 t1
  req="$(lnc "$to" addinvoice --amt="$amt" --memo="regtest $from->$to" | field payment_request)"
  t0=$(date +%s%N)
  out="$(timeout 60 "$LNCLI" --network=regtest --rpcserver="127.0.0.1:$(rpc_port "$from")" \
    --tlscertpath="$RT/$from/tls.cert" --macaroonpath="$(macaroon "$from")" \
    payinvoice --force --json --timeout=30s "$req" 2>"$RT/pay.err")" || rc=$?
  t1=$(date +%s%N)
  [ "$rc" = 0 ] || die "payment $from->$to failed (exit $rc): $(cat "$RT/pay.err") $out"
  succeeded <<<"$out" || die "payment $from->$to did not succeed: $out"
  # lnd's own latency: creation to the last HTLC's resolution (nanoseconds, as strings).
  latency="$(jq -sr 'last | ((.htlcs // []) | map(.resolve_time_ns | tonumber) | max) as $r
    | if $r then ($r - (.creation_time_ns | tonumber)) / 1e6 | floor else empty end' <<<"$out")"
  log "paid $amt sat $from->$to:${latency:+ lnd latency $latency ms} (lncli wall $(((t1 - t0) / 1000000)) ms)"
}

# hold_invoice_roundtrip FROM TO: TO adds a hold invoice for FROM's hash; FROM pays (in flight);
# TO sees ACCEPTED, settles with the preimage; FROM's payment succeeds.
invoice_state_is() { lnc "$1" lookupinvoice "$2" | jq -e --arg s "$3" '.state == $s' >/dev/null; }
hold_invoice_roundtrip() {
  local from=$1 to=$2 preimage hash req out pid rc
  preimage="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  # shellcheck disable=SC2059
  hash="$(printf "$(sed 's/../\\x&/g' <<<"$preimage")" | sha256sum | cut -d' ' -f1)"
  req="$(lnc "$to" addholdinvoice --amt=1000 --memo="regtest hold" "$hash" | field payment_request)"
  lnc "$from" payinvoice --force --json --timeout=30s "$req" >"$RT/hold-pay.out" 2>"$RT/hold-pay.err" &
  pid=$!
  wait_until "hold invoice ACCEPTED at $to" invoice_state_is "$to" "$hash" ACCEPTED
  lnc "$to" settleinvoice "$preimage" >/dev/null
  rc=0; wait "$pid" || rc=$?
  out="$(cat "$RT/hold-pay.out" "$RT/hold-pay.err")"
  [ "$rc" = 0 ] || die "hold invoice payment $from->$to failed (exit $rc): $out"
  succeeded <"$RT/hold-pay.out" || die "hold invoice payment $from->$to did not succeed: $out"
  rm -f "$RT/hold-pay.out" "$RT/hold-pay.err"
  log "hold invoice $from->$to: ACCEPTED, settled, payer SUCCEEDED"
}

write_env() {
  local n N tmp="$RT/env.tmp"
  {
    echo "# Written by scripts/regtest.sh up: the local Lightning regtest network (removed by down)."
    echo "# Usage: source $RT/env && \$LNCLI --network=regtest --rpcserver=\$LND_CLIENT_RPCSERVER \\"
    echo "#   --tlscertpath=\$LND_CLIENT_TLSCERT --macaroonpath=\$LND_CLIENT_MACAROON getinfo"
    echo "# (or: source $RT/helpers.sh && lncli_client getinfo)"
    echo "LNCLI=$LNCLI"
    echo "BTCCTL=$BTCD_BIN/btcctl"
    echo "REGTEST_DIR=$RT"
    for n in "${NODES[@]}"; do
      N="$(upper "$n")"
      echo "LND_${N}_RPCSERVER=127.0.0.1:$(rpc_port "$n")"
      echo "LND_${N}_TLSCERT=$RT/$n/tls.cert"
      echo "LND_${N}_MACAROON=$(macaroon "$n")"
    done
    printf 'export LNCLI BTCCTL REGTEST_DIR'
    for n in "${NODES[@]}"; do
      N="$(upper "$n")"
      printf ' LND_%s_RPCSERVER LND_%s_TLSCERT LND_%s_MACAROON' "$N" "$N" "$N"
    done
    echo
  } >"$tmp"
  {
    echo "# Shell helpers for the regtest network: source $RT/helpers.sh"
    echo ". $RT/env"
    for n in "${NODES[@]}"; do
      N="$(upper "$n")"
      echo "lncli_$n() { \"\$LNCLI\" --network=regtest --rpcserver=\"\$LND_${N}_RPCSERVER\" --tlscertpath=\"\$LND_${N}_TLSCERT\" --macaroonpath=\"\$LND_${N}_MACAROON\" \"\$@\"; }"
    done
    echo "btcctl() { \"\$BTCCTL\" -C $RT/btcctl.conf --regtest --rpcuser=$RPCUSER --rpcpass=$RPCPASS --rpcserver=127.0.0.1:$BTCD_RPC_PORT --rpccert=$RT/btcd/rpc.cert \"\$@\"; }"
    echo "# Mine N blocks: $ROOT/scripts/regtest.sh mine N (waits until every lnd has them)"
  } >"$RT/helpers.sh"
  mv -f "$tmp" "$RT/env"
}

# ---------------------------------------------------------------- verify / up / down

# verify: channels active and routable from the client to both providers and the aggregator,
# and from the aggregator to both providers.
verify() {
  local n p1 p2 ag
  for n in "${NODES[@]}"; do
    alive "$n" || die "$n is not running"
    wait_until "$n SERVER_ACTIVE" state_is "$n" SERVER_ACTIVE
  done
  wait_until "client has 3 active channels" active_channels_at_least client 3
  wait_until "aggregator has 3 active channels" active_channels_at_least aggregator 3
  wait_until "provider1 has 2 active channels" active_channels_at_least provider1 2
  wait_until "provider2 has 2 active channels" active_channels_at_least provider2 2
  p1="$(pubkey provider1)"; p2="$(pubkey provider2)"; ag="$(pubkey aggregator)"
  wait_until "route client->provider1" route_ok client "$p1"
  wait_until "route client->provider2" route_ok client "$p2"
  wait_until "route client->aggregator" route_ok client "$ag"
  wait_until "route aggregator->provider1" route_ok aggregator "$p1"
  wait_until "route aggregator->provider2" route_ok aggregator "$p2"
}

all_running() {
  local n
  alive btcd || return 1
  for n in "${NODES[@]}"; do alive "$n" || return 1; done
  [ -f "$RT/env" ]
}
any_running() {
  local n
  for n in btcd "${NODES[@]}"; do alive "$n" && return 0; done
  return 1
}

up() {
  build
  if [ -d "$RT" ] && load_ports && all_running; then
    log "already up: re-verifying"
    verify
    log "ok: source $RT/env"
    return 0
  fi
  if [ -d "$RT" ]; then
    log "stale or partial $RT found: stopping leftovers and starting fresh"
    load_ports || true
    stop_all
    rm -rf "$RT"
  fi

  local t0=$SECONDS addr n p1 p2
  STARTING=1
  mkdir -p "$RT/btcd"
  : >"$RT/btcd/btcd.conf"   # empty config files: btcd/btcctl would otherwise create ones in $HOME
  : >"$RT/btcctl.conf"
  choose_ports
  load_ports
  log "ports: btcd rpc $BTCD_RPC_PORT; lnd rpc client $CLIENT_RPC_PORT, provider1 $PROVIDER1_RPC_PORT, provider2 $PROVIDER2_RPC_PORT, aggregator $AGGREGATOR_RPC_PORT"

  # btcd 0.24 only mines (`generate`) to --miningaddr: take an address from the client's wallet
  # first, then restart btcd with it. Never restart btcd under a running lnd (stale tip), so the
  # client is stopped across the restart and no other lnd has connected yet.
  start_btcd
  start_lnd client
  wait_until "client wallet RPC" state_is client RPC_ACTIVE SERVER_ACTIVE
  addr="$(lnc client newaddress p2wkh | field address)"
  [ -n "$addr" ] || die "could not get a mining address from the client wallet"
  stop client
  stop btcd
  start_btcd "$addr"
  btcctl generate 1 >/dev/null   # a recent tip, so lnd considers the chain synced

  for n in "${NODES[@]}"; do start_lnd "$n"; done
  for n in "${NODES[@]}"; do
    wait_until "$n SERVER_ACTIVE" state_is "$n" SERVER_ACTIVE
  done
  # 500 blocks: segwit activates (BIP9, height 432) and early coinbases mature, all to the client.
  mine 500
  wait_until "client confirmed balance" confirmed_balance_at_least client $((3 * CHAN_SAT + 2 * PROVIDER_SAT + 2 * AGGREGATOR_SAT))
  log "client funded: $(lnc client walletbalance | field confirmed_balance) sat confirmed"

  # On-chain coins for the providers (anchor-channel reserve, their own channel opens) and the
  # aggregator (its channels to the providers: one confirmed coin for each, as a channel open
  # cannot spend the unconfirmed change of another).
  local a1 a2 aa1 aa2 ag
  a1="$(lnc provider1 newaddress p2wkh | field address)"
  a2="$(lnc provider2 newaddress p2wkh | field address)"
  aa1="$(lnc aggregator newaddress p2wkh | field address)"
  aa2="$(lnc aggregator newaddress p2wkh | field address)"
  [ -n "$a1" ] && [ -n "$a2" ] && [ -n "$aa1" ] && [ -n "$aa2" ] || die "could not get provider/aggregator addresses"
  lnc client sendmany "{\"$a1\":$PROVIDER_SAT,\"$a2\":$PROVIDER_SAT,\"$aa1\":$AGGREGATOR_SAT,\"$aa2\":$AGGREGATOR_SAT}" >/dev/null

  p1="$(pubkey provider1)"; p2="$(pubkey provider2)"; ag="$(pubkey aggregator)"
  lnc client connect "$p1@127.0.0.1:$PROVIDER1_P2P_PORT" >/dev/null
  lnc client connect "$p2@127.0.0.1:$PROVIDER2_P2P_PORT" >/dev/null
  lnc client connect "$ag@127.0.0.1:$AGGREGATOR_P2P_PORT" >/dev/null
  lnc client openchannel --node_key="$p1" --local_amt=$CHAN_SAT --push_amt=$PUSH_SAT >/dev/null
  lnc client openchannel --node_key="$p2" --local_amt=$CHAN_SAT --push_amt=$PUSH_SAT >/dev/null
  lnc client openchannel --node_key="$ag" --local_amt=$CHAN_SAT --push_amt=0 >/dev/null
  mine 1
  wait_until "aggregator confirmed balance" confirmed_balance_at_least aggregator $((2 * AGGREGATOR_SAT))
  lnc aggregator connect "$p1@127.0.0.1:$PROVIDER1_P2P_PORT" >/dev/null
  lnc aggregator connect "$p2@127.0.0.1:$PROVIDER2_P2P_PORT" >/dev/null
  lnc aggregator openchannel --node_key="$p1" --local_amt=$CHAN_SAT --push_amt=$PUSH_SAT >/dev/null
  lnc aggregator openchannel --node_key="$p2" --local_amt=$CHAN_SAT --push_amt=$PUSH_SAT >/dev/null
  mine 6
  verify

  pay client provider1 1000
  pay client provider2 1000
  pay client aggregator 1000
  pay aggregator provider1 1000
  pay aggregator provider2 1000
  hold_invoice_roundtrip client provider1
  hold_invoice_roundtrip client aggregator
  write_env
  STARTING=0
  log "up in $((SECONDS - t0))s (binaries cached). Env: $RT/env"
}

down() {
  if [ ! -d "$RT" ]; then
    log "not up (no $RT)"
    return 0
  fi
  load_ports || true
  stop_all
  rm -rf "$RT"
  log "down: daemons stopped, $RT removed"
}

status() {
  local n
  if [ ! -d "$RT" ]; then echo "regtest: down"; return 0; fi
  load_ports || true
  for n in btcd "${NODES[@]}"; do
    if alive "$n"; then echo "$n: running (pid $(cat "$RT/$n.pid"))"; else echo "$n: stopped"; fi
  done
  if alive btcd; then echo "height: $(btcctl getblockcount 2>/dev/null || echo '?')"; fi
  for n in "${NODES[@]}"; do
    alive "$n" || continue
    echo "$n: $(lnc "$n" listchannels --active_only 2>/dev/null | active_channels || echo '?') active channel(s), rpc 127.0.0.1:$(rpc_port "$n")"
  done
  if [ -f "$RT/env" ]; then echo "env: $RT/env"; else echo "env: not written (not ready)"; fi
}

# run_with CMD...: see the usage above. The lock is not held while CMD runs (tests mine blocks).
run_with() {
  local was_up=0 rc=0
  if [ -d "$RT" ] && load_ports && all_running; then was_up=1; fi
  "$ROOT/scripts/regtest.sh" up
  "$@" || rc=$?
  if [ "$was_up" = 0 ]; then "$ROOT/scripts/regtest.sh" down; fi
  return "$rc"
}

# One up/down/mine at a time per checkout: lock this script file (fd 9, closed for the daemons).
lock() {
  exec 9<"$ROOT/scripts/regtest.sh"
  if command -v flock >/dev/null; then
    flock -w "$TIMEOUT" 9 || die "another scripts/regtest.sh is running (waited ${TIMEOUT}s)"
  fi
}

main() {
  local cmd=${1:-}
  [ $# -eq 0 ] || shift
  case "$RT" in *[[:space:]]*) die "the repository path must not contain whitespace: $ROOT" ;; esac
  case "$cmd" in up | status | run) command -v jq >/dev/null || die "jq is not on PATH (make deps installs it)" ;; esac
  case "$cmd" in up | down | mine) lock ;; esac
  case "$cmd" in
    up) up ;;
    down) down ;;
    status) status ;;
    build) build ;;
    built) built || exit 1 ;;
    mine) load_ports && alive btcd || die "regtest is not up"; mine "${1:-1}" ;;
    run)
      [ $# -ge 1 ] || die "usage: $0 run CMD ARGS..."
      trap - ERR
      run_with "$@" ;;
    beacon) # the best block as a ceremony beacon, regtest:HEIGHT:HASH
      load_ports && alive btcd || die "regtest is not up"
      echo "regtest:$(btcctl getblockcount):$(btcctl getbestblockhash)" ;;
    lncli)
      [ $# -ge 1 ] || die "usage: $0 lncli client|provider1|provider2|aggregator ARGS..."
      load_ports || die "regtest is not up"
      lnc "$@" ;;
    *) echo "usage: $0 up|down|status|build|built|mine [N]|beacon|lncli NODE ARGS...|run CMD ARGS..." >&2; exit 2 ;;
  esac
}

# Sourced (by the script's tests), it only defines its functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
