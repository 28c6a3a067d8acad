#!/usr/bin/env bash
# The stages of `make test` (after deps and vet), in two lanes that run at
# once: the unit tests stream to the terminal; beside them the Lightning
# tests (mostly waiting on lnd and btcd), the fault-injection tests, the
# fuzz counts, the OpenAI end to end and the llama.cpp oracle write to a
# log, printed when that lane is through. One after another
# the stages took about 700 s on a quiet 2-core machine with its caches
# built, the unit tests 400 of them at 1.4 cores; side by side the second
# lane fills the cores the unit tests leave idle. (The fuzz stage builds
# every package it reaches with coverage instrumentation: on a fresh
# machine that is a second build of lnd, libp2p, gnark and wazero.)
#
# INFERNET_TEST_SERIAL=1 runs the stages one after another, streamed.
# Ends with each stage's wall time and exit status; fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# stage NAME CMD...: runs CMD, recording NAME's wall time and exit status.
stage() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  "$@"
  rc=$?
  echo "$name $(($(date +%s) - start )) $rc" >>"$logs/times"
  return $rc
}

# -parallel 8: the tests marked t.Parallel are those that wait far more than
# they compute (a stalled provider's timeout, an eclipsed client's bid
# window, a colluding ring): they run together, beside the CPU-bound ones.
#
# The longest test binaries are named first: go test starts binaries in the
# order of its arguments as their builds finish, and node's (about 200 s,
# mostly on one core) started in its alphabetical place ran alone at the
# end while the other core idled.
slow=(node cmd/infernet/itest cmd/infernet/internal/cli)
unit() {
  local mod all pkgs
  if ! mod=$("$GO" list -m) || ! all=$("$GO" list ./...); then
    echo "unit 0 1" >>"$logs/times" # go list said why
    return 1
  fi
  pkgs=$(grep -v -x -F "${slow[@]/#/-e$mod/}" <<<"$all")
  # shellcheck disable=SC2086 # one package a word
  stage unit "$GO" test -count=1 -timeout 30m -parallel 8 "${slow[@]/#/./}" $pkgs
}
network() {
  stage payments "$MAKE" --no-print-directory test-payments &&
    stage faults "$GO" test -count=1 -tags faults -run TestFaults ./cmd/infernet/itest/ &&
    stage fuzz "$MAKE" --no-print-directory fuzz FUZZCOUNT=1 &&
    stage openai "$MAKE" --no-print-directory test-openai &&
    stage llamacpp "$MAKE" --no-print-directory test-llamacpp
}

start=$(date +%s)
if [ -n "${INFERNET_TEST_SERIAL:-}" ]; then
  unit && network
  rc=$?
else
  echo "test: the Lightning, fault, fuzz, OpenAI and llama.cpp stages run beside the unit tests; their output follows the unit tests'" >&2
  network >"$logs/network.log" 2>&1 &
  bg=$!
  unit
  rc=$?
  kill -0 "$bg" 2>/dev/null && echo "test: waiting for the Lightning, fault, fuzz, OpenAI and llama.cpp stages" >&2
  wait "$bg"
  brc=$?
  cat "$logs/network.log"
  [ "$rc" -eq 0 ] && rc=$brc
fi
echo "test: stage times (s): $(awk '{printf "%s %s%s, ", $1, $2, ($3 == 0 ? "" : " FAILED")}' "$logs/times" 2>/dev/null)total $(( $(date +%s) - start ))"
exit "$rc"
