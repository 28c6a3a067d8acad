#!/usr/bin/env bash
# Records what a real lncli prints for each call scripts/regtest.sh makes, into DIR (one file per
# subcommand), for script_test.go. Needs the network up (make regtest-up); REGTEST_LNCLI picks
# the lncli (its spacing after a colon is fixed per binary: see scripts/regtest.sh).
#
#   payments/regtest/testdata/record-lncli.sh DIR
set -Eeuo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
# shellcheck source=../../../scripts/regtest.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/regtest.sh"
load_ports || die "regtest is not up"

p1="$(pubkey provider1)"
lnc client state >"$out/state.json"
lnc client getinfo >"$out/getinfo.json"
lnc client walletbalance >"$out/walletbalance.json"
lnc client listchannels --active_only >"$out/listchannels.json"
lnc client queryroutes --dest="$p1" --amt=1000 >"$out/queryroutes.json"
lnc client newaddress p2wkh >"$out/newaddress.json"
lnc provider1 addinvoice --amt=1000 --memo=record >"$out/addinvoice.json"
lnc client payinvoice --force --json --timeout=30s "$(field payment_request <"$out/addinvoice.json")" >"$out/payinvoice.json"

# A hold invoice: paid (in flight), ACCEPTED at the payee, settled.
preimage="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# shellcheck disable=SC2059
hash="$(printf "$(sed 's/../\\x&/g' <<<"$preimage")" | sha256sum | cut -d' ' -f1)"
lnc provider1 addholdinvoice --amt=1000 --memo=record "$hash" >"$out/addholdinvoice.json"
lnc client payinvoice --force --json --timeout=30s "$(field payment_request <"$out/addholdinvoice.json")" >/dev/null 2>&1 &
wait_until "hold invoice ACCEPTED" invoice_state_is provider1 "$hash" ACCEPTED
lnc provider1 lookupinvoice "$hash" >"$out/lookupinvoice.json"
lnc provider1 settleinvoice "$preimage" >"$out/settleinvoice.json"
wait

# A payment that fails at once: more than all the client's channels hold.
mkdir -p "$out/failed"
lnc provider1 addinvoice --amt=$((4 * CHAN_SAT)) --memo=record >"$out/failed/addinvoice.json"
lnc client payinvoice --force --json --timeout=30s "$(field payment_request <"$out/failed/addinvoice.json")" \
  >"$out/failed/payinvoice.json" 2>"$out/failed/payinvoice.stderr" || echo "$?" >"$out/failed/payinvoice.exit"


# A channel that is not active: provider2 stopped, then started again.
mkdir -p "$out/inactive"
stop provider2
wait_until "client sees provider2's channel inactive" eval '! active_channels_at_least client 3'
lnc client listchannels >"$out/inactive/listchannels.json"
start_lnd provider2
wait_until "provider2 SERVER_ACTIVE" state_is provider2 SERVER_ACTIVE
wait_until "client has 3 active channels" active_channels_at_least client 3
echo "recorded into $out" >&2
