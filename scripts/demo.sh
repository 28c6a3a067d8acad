#!/usr/bin/env bash
# make demo: the whole product as it stands, on real jobs.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=bin/infernet
jobs=testdata/jobs
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
run() { "$bin" run --cache-dir "$cache" "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ infernet run %s\n' "$*"; }

step "A Rust job: word count (top words of the README)"
show "$jobs/wordcount/wordcount.wasm --input README.md"
run "$jobs/wordcount/wordcount.wasm" --input README.md | head -5

step "A Go job using the tensor ABI: MLP inference, exact mode (reference kernel)"
show "$jobs/mlp/mlp.wasm --input $jobs/mlp/input.txt --stats"
run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" --stats

step "The same job in tolerance mode (fastest backend on this machine)"
show "$jobs/mlp/mlp.wasm --input $jobs/mlp/input.txt --mode tolerance --stats"
run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" --mode tolerance --stats

step "A C job: batched GEMM through handles and pointer forms"
show "$jobs/matmul/matmul.wasm --input $jobs/matmul/input.txt"
run "$jobs/matmul/matmul.wasm" --input "$jobs/matmul/input.txt" | tail -3

step "Reproducible: two runs, same output digest"
for i in 1 2; do run "$jobs/mlp/mlp.wasm" --input "$jobs/mlp/input.txt" | sha256sum; done

step "A CPU-bound job stopped by its time limit (exit 125, one line naming the cause)"
show "$jobs/cpu/cpu.wasm --input $jobs/cpu/input.txt --timeout 200ms"
run "$jobs/cpu/cpu.wasm" --input "$jobs/cpu/input.txt" --timeout 200ms; echo "exit status $?"

step "Hostile modules are refused or stopped; the process survives each"
for m in garbage truncated unknown_import trap_unreachable stack_overflow infinite_loop exp_recursion memory_min_huge output_flood; do
  cause=$(run "testdata/bad/$m.wasm" --timeout 500ms --memory 16MiB --max-output 1MiB 2>&1 >/dev/null)
  printf '%-18s exit %d  %s\n' "$m" $? "$cause"
done
printf '%-18s ' "infernet_hostile"
run testdata/bad/infernet_hostile.wasm | tail -1
printf '%-18s ' "wasi_hostile"
run testdata/bad/wasi_hostile.wasm | tail -1

step "A language model tells a story: the real stories260K (TinyStories, llama2.c's format) through infernet generate"
. scripts/lib/llama.sh
if infernet_generate "$bin"; then
  # Greedy, then checked against llama2.c's run.c (testdata/llama/golden.jsonl);
  # then sampled. --json: completion, token counts, tokens/s.
  story() {
    local prompt=$1; shift
    printf '$ infernet generate testdata/llama/stories260K.bin --tokenizer testdata/llama/tok512.bin --prompt "%s" --local %s\n' "$prompt" "$*"
    "$bin" generate testdata/llama/stories260K.bin --tokenizer testdata/llama/tok512.bin --prompt "$prompt" \
      --local --json "$@" > "$cache/story.json" || { echo "generate failed (exit $?)"; return; }
    python3 - "$prompt" "$cache/story.json" "$@" <<'PY'
import json, sys, textwrap
prompt, out, args = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3:]
for para in (prompt + out["completion"]).split("\n"):
    print(textwrap.fill(para, 100))
print(f"({out['prompt_tokens']} prompt tokens, {out['completion_tokens']} generated, {out['tokens_per_second']:.0f} tokens/s)")
if "--temperature" in args and float(args[args.index("--temperature") + 1]) == 0:
    want = [json.loads(l) for l in open("testdata/llama/golden.jsonl")]
    want = [g for g in want if g["model"] == "stories260K.bin" and g["prompt"] == prompt and g["temperature"] == 0
            and g["max_tokens"] == int(args[args.index("--max-tokens") + 1])]
    if want:
        same = out["completion"] == want[0]["completion"]
        print("the same text as llama2.c's run.c prints" if same else "NOT the text llama2.c's run.c prints:\n" + want[0]["completion"])
PY
  }
  story "One day, a little bird" --max-tokens 192 --temperature 0
  story "Once upon a time" --max-tokens 124 --temperature 0.9 --top-p 0.9 --seed 42
else
  echo "skipped: bin/infernet has no generate command yet"
fi

# ---- The network: four nodes on loopback (three providers, one client) ----
# shellcheck source=scripts/lib/localnet.sh
. scripts/lib/localnet.sh
regtest_started=0
cleanup() {
  localnet_cleanup
  rm -rf "$cache"
  if [ "$regtest_started" = 1 ]; then ./scripts/regtest.sh down >/dev/null 2>&1; fi
}
trap cleanup EXIT
# start NAME [flags]: a node with the demo's quick heartbeats (localnet.sh).
start() {
  local name=$1; shift
  node_start "$name" --slots 2 --heartbeat 200ms --silence 3s "$@"
}
step "The network: four provider nodes (one of them dishonest) and a client node on loopback"
start p1; boot=$addr
printf '$ infernet node --datadir p1 --listen /ip4/127.0.0.1/tcp/0   # prints %s\n' "$boot"
start p2 --bootstrap "$boot"
start p3 --bootstrap "$boot"
bin_real=$bin; bin=bin/infernet-faults   # a build with --fault.* flags, for one dishonest provider
start liar --bootstrap "$boot" --fault.lie 1
bin=$bin_real
start client --bootstrap "$boot" --no-provide
echo "\$ infernet node --datadir client --bootstrap $boot --no-provide   (p2, p3 likewise, without --no-provide)"
echo "\$ infernet-faults node --datadir liar --bootstrap $boot --fault.lie 1   # a provider that lies every time"
wait_providers client 4
echo '$ infernet peers'
"$bin" peers --datadir "$net/client"

step "A lying provider is caught: outvoted by established providers, or by the client's own run while all are new; the liar is banned"
echo "\$ infernet submit $jobs/cat/cat.wasm --input - --replicas 2   # repeated until the liar draws a replica"
for i in $(seq 40); do
  echo "job $i: the right answer is this line" | "$bin" submit "$jobs/cat/cat.wasm" --input - --replicas 2 --datadir "$net/client" > "$net/out" 2> "$net/summary"
  if grep -q outvoted "$net/summary"; then echo "(job $i)"; cat "$net/summary"; printf 'output: '; cat "$net/out"; break; fi
done
echo '$ infernet peers'
"$bin" peers --datadir "$net/client"

step "A job on the network: two replicas on two different providers must agree"
echo "\$ infernet submit $jobs/cpu/cpu.wasm --input $jobs/cpu/input.txt --replicas 2"
"$bin" submit "$jobs/cpu/cpu.wasm" --input "$jobs/cpu/input.txt" --replicas 2 --datadir "$net/client"
echo "exit status $?"

step "A provider killed (SIGKILL) mid-job: its replica goes to the third provider"
echo "\$ echo '1200 1000' | infernet submit $jobs/cpu/cpu.wasm --input - --replicas 2   # and kill -9 a provider while it runs"
echo "1200 1000" | "$bin" submit "$jobs/cpu/cpu.wasm" --input - --replicas 2 --datadir "$net/client" > "$net/out" 2> "$net/summary" &
sub=$!
victim=
for _ in $(seq 200); do
  for p in p1 p2 p3; do
    if "$bin" jobs --runs --json --datadir "$net/$p" | jq -e 'any(.[]; .state == "running")' >/dev/null; then victim=$p; break 2; fi
  done
  sleep 0.05
done
echo "killing $victim ($("$bin" id --datadir "$net/$victim"))"
{ kill -9 "${node_pid[$victim]}"; wait "${node_pid[$victim]}"; } 2>/dev/null
wait $sub; echo "exit status $?"
cat "$net/summary"; cat "$net/out"

step "A job nobody can run: no provider matches the requirement (exit 123)"
echo "\$ infernet submit $jobs/cpu/cpu.wasm --require 'vram >= 16'"
"$bin" submit "$jobs/cpu/cpu.wasm" --require 'vram >= 16' --datadir "$net/client"; echo "exit status $?"

step "A sharded job: 1,000 lines in 10 shards, each verified by 2 providers, outputs merged in order"
seq 1 1000 | sed 's/^/line /' > "$net/lines.txt"
echo "\$ infernet submit $jobs/lines/lines.wasm --input lines.txt --shards 10 --progress always -- p | tail -3"
"$bin" submit "$jobs/lines/lines.wasm" --input "$net/lines.txt" --shards 10 --progress always --datadir "$net/client" -- p > "$net/out" 2> "$net/summary"; echo "exit status $?"
grep -E 'sharded job|shard 0 |shard 9 |output' "$net/summary"
tail -3 "$net/out"
echo "\$ infernet run $jobs/lines/lines.wasm --input lines.txt -- p | cmp - out   # the same bytes as one run on the whole input"
"$bin" run --cache-dir "$cache" "$jobs/lines/lines.wasm" --input "$net/lines.txt" -- p | cmp - "$net/out" && echo "identical"
echo "\$ echo x | infernet submit $jobs/datacat/datacat.wasm --input - --data vocab.txt=README.md -- vocab.txt | head -3   # a read-only data blob at /data"
echo x | "$bin" submit "$jobs/datacat/datacat.wasm" --input - --data vocab.txt=README.md --datadir "$net/client" -- vocab.txt 2>/dev/null | head -3

step "The OpenAI API: curl streams a story from the client node's /v1/completions, verified by two replicas as it streams"
"$bin" models add stories260K testdata/llama/stories260K.bin --tokenizer testdata/llama/tok512.bin --datadir "$net/client" >/dev/null
echo '$ infernet models add stories260K testdata/llama/stories260K.bin --tokenizer testdata/llama/tok512.bin'
echo '$ curl -N http://$(cat client/api.addr)/v1/completions -H "Authorization: Bearer $(cat client/api.token)" \'
echo "    -d '{\"model\": \"stories260K\", \"prompt\": \"One day, a little bird\", \"max_tokens\": 60, \"temperature\": 0, \"stream\": true}'"
curl -sN "http://$(cat "$net/client/api.addr")/v1/completions" -H "Authorization: Bearer $(cat "$net/client/api.token")" \
  -d '{"model": "stories260K", "prompt": "One day, a little bird", "max_tokens": 60, "temperature": 0, "stream": true}' > "$net/sse"
head -3 "$net/sse"; echo "... ($(grep -c '^data: ' "$net/sse") events in all, the last: $(grep '^data: ' "$net/sse" | tail -1))"
echo "the text of the chunks, joined:"
python3 - "$net/sse" <<'PY'
import json, sys, textwrap
text = "".join(json.loads(l[6:])["choices"][0]["text"] for l in open(sys.argv[1]) if l.startswith("data: {"))
print(textwrap.fill("One day, a little bird" + text, 100))
PY
echo "(any OpenAI client works the same way: OPENAI_BASE_URL=http://\$(cat client/api.addr)/v1 OPENAI_API_KEY=\$(cat client/api.token);"
echo " make test-openai runs the official npm and Go clients against a network like this one)"

step "MNIST trained by infernet train, FedAvg then DiLoCo: 3 rounds of a sharded job (4 shards x 2 replicas) + a reduce, evaluated each round, on 4 fresh nodes (make mnist)"
./scripts/mnist.sh 3 2 2>&1 | grep -E '^(\$|round|training run|10-shard|the network)'

step "Hostile jobs: providers cap what a client may ask for, and refuse a compile bomb before compiling"
echo "\$ infernet submit testdata/bad/output_flood.wasm --max-output 1536MiB   # over every provider's --max-output"
"$bin" submit testdata/bad/output_flood.wasm --max-output 1536MiB --datadir "$net/client"; echo "exit status $?"
echo "\$ infernet submit testdata/bad/nesting_bomb.wasm   # 300 KB of nested blocks: 30 s of compiling in plain wazero"
"$bin" submit testdata/bad/nesting_bomb.wasm --datadir "$net/client"; echo "exit status $?"

step "No node running: submit starts one in its own process for the job, joining through --bootstrap"
alive=p1; [ "$victim" = p1 ] && alive=p3   # a provider the SIGKILL step left running
echo "\$ infernet submit $jobs/cpu/cpu.wasm --input $jobs/cpu/input.txt --datadir fresh --bootstrap ${node_addr[$alive]}"
mkdir -p "$net/fresh"   # loopback only, as every node of the demo
echo '{"listen": ["/ip4/127.0.0.1/tcp/0"], "mdns": false, "nat": false}' > "$net/fresh/config.json"
"$bin" submit "$jobs/cpu/cpu.wasm" --input "$jobs/cpu/input.txt" --datadir "$net/fresh" --bootstrap "${node_addr[$alive]}"; echo "exit status $?"

step "The dashboard: infernet dashboard prints a one-time login link to the node's web page, updated live"
link=$("$bin" dashboard --datadir "$net/client" 2>/dev/null)
echo "\$ infernet dashboard   # prints $link"
curl -s -c "$net/cookies" -o /dev/null "$link"   # what a browser does: the link sets a session cookie
echo "its snapshot, as the page gets it (GET /dashboard/snapshot, or pushed on /dashboard/events):"
cat > "$net/summary.py" <<'PY'
import collections, json, sys
s = json.load(sys.stdin)
jobs = collections.Counter(j["state"] for j in s["jobs"])
connected = sum(p["connected"] for p in s["peers"])
print(f"  peers {len(s['peers'])} ({connected} connected), jobs {dict(jobs)}, sharded jobs {len(s['sharded'])}, training runs {len(s['training'])}")
for p in sorted(s["peers"], key=lambda p: p["reputation"]):
    print(f"  peer …{p['id'][-8:]} reputation {p['reputation']:.2f}: {p['why']}")
PY
curl -s -b "$net/cookies" "${link%%/dashboard/*}/dashboard/snapshot" | python3 "$net/summary.py"
echo "\$ curl ${link%%\?*}   # a spent link"
curl -s "$link"

step "What the client node remembers"
echo '$ infernet jobs'
"$bin" jobs --datadir "$net/client"
echo "\$ infernet jobs --runs --datadir $alive   # what provider $alive ran for others"
"$bin" jobs --runs --datadir "$net/$alive"

# ---- Paid jobs over Lightning, on a local regtest network ----
# Up already (make regtest-up), or brought up for the demo (~1 min); on a fresh
# machine btcd and lnd are built first, once (~10 min, cached under
# ~/.cache/infernet). DEMO_PAYMENTS=0 (make demo DEMO_PAYMENTS=0) skips it.
if [ "${DEMO_PAYMENTS:-1}" != 0 ] && [ ! -f .regtest/env ]; then
  if ! ./scripts/regtest.sh built; then
    step "Building btcd and lnd for the paid jobs (first time only, about 10 minutes; DEMO_PAYMENTS=0 skips this part)"
    ./scripts/regtest.sh build || echo "the build failed: the paid jobs are skipped"
  fi
  if ./scripts/regtest.sh built; then
    echo "starting a Lightning regtest network: btcd and four lnd nodes with funded channels (scripts/regtest.sh up)"
    if ./scripts/regtest.sh up 2>"$net/regtest.log"; then
      regtest_started=1
    else
      tail -n 20 "$net/regtest.log"
    fi
  fi
fi
if [ -f .regtest/env ]; then
  # shellcheck disable=SC1091
  . .regtest/env
  lnd_flags() { local n=$1; eval "echo --lnd.rpcserver \$LND_${n}_RPCSERVER --lnd.tlscertpath \$LND_${n}_TLSCERT --lnd.macaroonpath \$LND_${n}_MACAROON"; }
  step "Paid jobs: two providers charging 5000 msat per replica over Lightning (regtest), hold-invoice escrow"
  # shellcheck disable=SC2046
  start pp1 $(lnd_flags PROVIDER1) --price 5000; pboot=$addr
  # shellcheck disable=SC2046
  start pp2 --bootstrap "$pboot" $(lnd_flags PROVIDER2) --price 5000
  # shellcheck disable=SC2046
  start pclient --bootstrap "$pboot" --no-provide $(lnd_flags CLIENT)
  wait_providers pclient 2
  echo "\$ infernet node --lnd.rpcserver … --lnd.tlscertpath … --lnd.macaroonpath … --price 5000   (two providers)"
  echo "\$ echo 'a paid job' | infernet submit $jobs/cat/cat.wasm --input - --replicas 2 --max-price 5000"
  echo "a paid job" | "$bin" submit "$jobs/cat/cat.wasm" --input - --replicas 2 --max-price 5000 --datadir "$net/pclient"
  echo "exit status $?"
  echo '$ infernet spending   # on the client'
  "$bin" spending --datadir "$net/pclient"
  echo '$ infernet earnings   # on provider pp1'
  "$bin" earnings --datadir "$net/pp1"

  step "An aggregator with a 1.5% fee runs a sharded job for a thin client; one hold invoice, released after the client's checks"
  # shellcheck disable=SC2046
  start pagg --bootstrap "$pboot" --no-provide --aggregator --fee 1.5 $(lnd_flags AGGREGATOR)
  wait_providers pagg 2
  agg=$("$bin" id --datadir "$net/pagg")
  echo "\$ infernet node --aggregator --fee 1.5 --no-provide --lnd.rpcserver …   # $agg"
  echo "\$ infernet submit $jobs/lines/lines.wasm --input lines.txt --shards 4 --via $agg --max-price 5000 --spot-check 0 -- p"
  "$bin" submit "$jobs/lines/lines.wasm" --input "$net/lines.txt" --shards 4 --via "$agg" --max-price 5000 --spot-check 0 \
    --datadir "$net/pclient" -- p > "$net/out" 2> "$net/summary"
  echo "exit status $?   (4 shards x 2 replicas x 5000 msat = 40000, and 1.5% = 600)"
  grep -vE '^  shard [1-3] ' "$net/summary"
  echo '$ infernet spending   # on the client: the aggregated job is one payment'
  "$bin" spending --datadir "$net/pclient" | tail -2
  echo '$ infernet spending   # on the aggregator: it paid each shard-replica'
  "$bin" spending --datadir "$net/pagg" | tail -1

  step "Fair exchange: keys from a multi-party ceremony (client and both providers contribute; ~5 min)"
  beacon=$(./scripts/regtest.sh beacon)   # a real design announces the height in advance
  c="$net/ceremony"
  ceremony() { echo "\$ infernet ceremony $*"; "$bin" ceremony "$@" 2>&1 | grep -v '^  ' | tail -3; }
  ceremony start "$c" --template exchange-256
  ceremony contribute "$c"   # the client
  # The client passes the ceremony to provider pp1 over the network, as blobs.
  echo "\$ infernet ceremony publish $c --datadir pclient"
  address=$("$bin" ceremony publish "$c" --datadir "$net/pclient" 2>/dev/null); echo "$address"
  c="$net/ceremony-pp1"
  ceremony fetch "$address" "$c" --datadir "$net/pp1" --from "$("$bin" id --datadir "$net/pclient")"
  ceremony contribute "$c"   # provider pp1
  ceremony seal-phase1 "$c" --beacon "$beacon"
  for who in pp1 client pp2; do ceremony contribute "$c"; done   # (passed on likewise)
  ./scripts/regtest.sh mine 1 >/dev/null; beacon=$(./scripts/regtest.sh beacon)
  ceremony finalize "$c" --beacon "$beacon" --datadir "$net/pclient"
  # Each provider would run `infernet ceremony install`, which verifies the
  # whole transcript again (~2 min each); the demo copies the verified keys.
  for p in pp1 pp2; do mkdir -p "$net/$p" && cp -r "$net/pclient/keys" "$net/$p/"; done
  echo '$ infernet keys'
  "$bin" keys --datadir "$net/pclient"
  for p in pp1 pp2 pclient pagg; do kill "${node_pid[$p]}" 2>/dev/null; wait "${node_pid[$p]}" 2>/dev/null; done
  # shellcheck disable=SC2046
  start pp1 $(lnd_flags PROVIDER1) --price 5000; pboot=$addr
  # shellcheck disable=SC2046
  start pp2 --bootstrap "$pboot" $(lnd_flags PROVIDER2) --price 5000
  # shellcheck disable=SC2046
  # A fair-exchange output is seen only once bought, so the client cannot
  # audit newcomers' results: it vouches for the two providers (--trust).
  # shellcheck disable=SC2046
  start pclient --bootstrap "$pboot" --no-provide $(lnd_flags CLIENT) \
    --trust "$("$bin" id --datadir "$net/pp1")" --trust "$("$bin" id --datadir "$net/pp2")"
  grep -h -o 'role="[^"]*"' "$net/pp1.log" | tail -1
  wait_providers pclient 2
  step "Fair exchange: the client pays only for outputs proven to be the ones replicas agreed on"
  echo "\$ echo 'a secret answer' | infernet submit $jobs/cat/cat.wasm --input - --replicas 2 --max-price 5000 --settle fair"
  echo "a secret answer" | "$bin" submit "$jobs/cat/cat.wasm" --input - --replicas 2 --max-price 5000 --settle fair --datadir "$net/pclient"
  echo "exit status $?"
  echo '$ infernet spending   # on the client'
  "$bin" spending --datadir "$net/pclient" | tail -3
else
  step "Paid jobs over Lightning: skipped ($([ "${DEMO_PAYMENTS:-1}" = 0 ] && echo "DEMO_PAYMENTS=0" || echo "no regtest network"))"
fi
