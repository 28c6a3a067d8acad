#!/usr/bin/env bash
# make bench: the sandbox measured against its peers, side by side in one run.
# The machines are shared and noisy: read the ratios, not the absolute times.
#   (a) CPU-bound guest under a time limit vs the wazero CLI with no limit
#   (b) GEMM GFLOP/s per backend vs OpenBLAS, and exact (reference) vs tolerance (n = 256..2048)
#   (c) the same GEMM called from a guest vs natively
#   (d) run latency of a cached small Go module
#   (e) the network: round trip of a tiny job (replicas 2, 3 nodes), jobs/s
#       of one client, and latency and messages per job with 5..50 nodes
#   (f) verification: liars outvoted and banned; adaptive replication's
#       compute per accepted result
#   (g) payments on the Lightning regtest network (brought up for it, and
#       down after, unless already up): one hold-invoice escrow; a tiny job
#       paid vs free, one at a time (latency) and 8 at once (jobs/s)
#   (h) proofs: constraints, setup, prove, verify, key sizes of the Groth16
#       templates (Freivalds GEMM n=64, fair exchange of 256 bytes)
#   (i) hostile peers: what an attacker's input costs a provider before and
#       after the bounds (requirement expressions, module compilation, frames)
#   (j) sharded jobs: 100 shards of short work over 10 in-process providers,
#       one sharded job vs 100 independent jobs side by side: wall time,
#       coordination overhead per shard, provider utilisation and spread;
#       a data blob read by every replica: fetches per provider
#   (k) the dashboard's reads: the newest 50 of 20,000 jobs (time index)
#   (l) language models: a job start with cached weights; the network's
#       overhead on a 128-token completion with 2 replicas
#   (m) Llama generation: tokens/s of infernet generate vs llama2.c's run.c
#       (-O3 one thread, -Ofast two) on random stories15M/110M-shape models
#       (scripts/llama-bench.sh)
#   (n) quantized GGUF files: prompt and decode tokens/s of infernet generate
#       vs llama.cpp (node-llama-cpp) on the same files, one thread each
#       (scripts/llamacpp-bench.sh)
#   (o) batching across jobs (issue 35): 1 vs 8 concurrent completions of a
#       random 110M-shape q8_0 model, batching on vs off, aggregate tokens/s
#       (guest/go/llama BenchmarkBatching)
#   (p) the OpenAI API under concurrent users: 1, 4 and 16 streamed
#       completions at once through the official Go client, p50/p95 time to
#       first text and aggregate tokens/s (node/openai BenchmarkOpenAIStreams)
#   (q) the host's floor under a GPU decode step: a 1.1B-shape model through
#       the whole GPU path on the fake driver's bench mode (scripts/hostfloor.sh)
# BENCH_QUICK=1 shortens every part (a smoke test of this script).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/infernet
cache="${INFERNET_CACHE:-$HOME/.cache/infernet}"
wazero="$cache/wazero-v1.11.0/wazero"
runs=7 benchtime=1x gemmtime=10x count=5
if [ "${BENCH_QUICK:-}" = 1 ]; then runs=2 benchtime=1x gemmtime=1x count=1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hr() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

hr "(a) CPU-bound guests: infernet run (60 s limit, fuel-metered) vs wazero CLI (no limit), both cached"
for job in cpu cpugo; do
  wasm=testdata/jobs/$job/$job.wasm in=testdata/jobs/$job/input.txt
  hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$tmp/$job.json" \
    -n "wazero $job" "$wazero run -cachedir $tmp/wz $wasm < $in" \
    -n "infernet $job" "$bin run $wasm --input $in --timeout 60s --cache-dir $tmp/inf" >/dev/null
  python3 - "$tmp/$job.json" <<'EOF'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
(w, wv), (i, iv) = [(k, v) for k, v in r.items() if k.startswith("wazero")][0], [(k, v) for k, v in r.items() if k.startswith("infernet")][0]
print(f"{w:16s} median {wv['median']*1000:8.1f} ms   {i:16s} median {iv['median']*1000:8.1f} ms   ratio {iv['median']/wv['median']:.3f}x (target <= 1.1x)")
EOF
done

hr "(a') in-process: instrumented vs uninstrumented vs WithCloseOnContextDone (host/internal/meter)"
go test -run '^$' -bench 'GuestRatio' -benchtime 5x ./host/internal/meter | grep -E '^Benchmark' || true
go test -run '^$' -bench 'Guest/.*/closeOnDone' -benchtime 1x ./host/internal/meter | grep -E '^Benchmark' || true

hr "(b) f32 GEMM GFLOP/s per backend, 2 threads (OpenBLAS with its core type set from CPU features)"
go test -run '^$' -bench 'BenchmarkGemm$' -benchtime "$gemmtime" -count "$count" ./host/tensor/backends | tee "$tmp/gemm.txt" | grep -E '^Benchmark' || true
python3 - "$tmp/gemm.txt" <<'EOF'
import re, sys, statistics, collections
g = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkGemm/(\S+)/n=(\d+)-\d+\s.*?([\d.]+) GFLOP/s', line)
    if m: g[(m[1], int(m[2]))].append(float(m[3]))
med = {k: statistics.median(v) for k, v in g.items()}
names = sorted({k[0] for k in med})
print("%-14s" % "n" + "".join("%14s" % n for n in names) + "   own cpu / openblas, reference (exact) / own cpu (tolerance)")
for n in sorted({k[1] for k in med}):
    row = "%-14d" % n + "".join("%14.1f" % med[(b, n)] if (b, n) in med else "%14s" % "-" for b in names)
    cpu = [med[(b, n)] for b in names if b.startswith("cpu-") and (b, n) in med]
    if cpu and ("openblas", n) in med: row += "   %.2fx (target >= 0.8x)" % (cpu[0] / med[("openblas", n)])
    if cpu and ("reference", n) in med: row += "   exact/tolerance %.2fx (target >= 0.5x)" % (med[("reference", n)] / cpu[0])
    print(row)
EOF

hr "(c) GEMM from a guest (gemm_f32 pointer form) vs native, same backend"
go test -run '^$' -bench 'GemmGuestVsNative' -benchtime "$benchtime" -count "$count" ./host | tee "$tmp/guest.txt" | grep -E '^Benchmark' || true
python3 - "$tmp/guest.txt" <<'EOF'
import re, sys, statistics, collections
g = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkGemmGuestVsNative/(guest|native)/(\S+)/n=(\d+)-\d+\s.*?([\d.]+) GFLOP/s', line)
    if m: g[(m[1], int(m[3]))].append(float(m[4]))
for n in sorted({k[1] for k in g}):
    gu, na = statistics.median(g[("guest", n)]), statistics.median(g[("native", n)])
    print(f"n={n:5d}  guest {gu:7.1f}  native {na:7.1f} GFLOP/s  ratio {gu/na:.3f}x (target >= 0.9x)")
EOF

hr "(d) run latency of a cached small Go module (testdata/jobs/echo), in process"
go test -run '^$' -bench 'RunCached' -benchtime 200x -count "$count" ./host | grep -E '^Benchmark' || true
echo "(target <= 10 ms/op)"
hr "(d') the same through the CLI, a new process per run (compiled-module cache on disk)"
hyperfine --style basic --warmup 2 --runs $((runs * 3)) -N \
  -n "infernet run echo" "$bin run testdata/jobs/echo/echo.wasm --cache-dir $tmp/inf" \
  -n "wazero run echo" "$wazero run -cachedir $tmp/wz testdata/jobs/echo/echo.wasm" 2>/dev/null | grep -E 'Time|±|infernet|wazero' || true

hr "(e) the network, real libp2p hosts on loopback (node/bench_test.go)"
echo "round trip of a tiny cached job, replicas 2 on 3 nodes (target p50 <= 20 ms), and one client's jobs/s with 16 in flight:"
go test -run '^$' -bench 'RoundTrip|Throughput' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 20x || echo 500x)" ./node | grep -E '^Benchmark' || true
echo "announce-to-result latency and messages per job as the network grows (msgs/job must stay flat):"
go test -run '^$' -bench 'Scale' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 10x || echo 100x)" -timeout 30m ./node | grep -E '^Benchmark' || true

hr "(f) verification: 6 providers with 2 liars (100 jobs), 10 providers with one liar at 50% (500 adaptive jobs)"
go test -count=1 -run 'TestLiarsAreOutvotedAndBanned|TestAdaptiveReplication' -v ./node | grep -E 'verify_test|^(--- |ok|FAIL)' || true
echo "(targets: 0 wrong outputs accepted, liars banned, <= 1.3x compute per accepted result after warm-up)"
echo "colluding identities that earned their place, lying only when they hold every replica (k of them among 4 honest, 120 jobs; wrong results verified, with and without --audit 0.1):"
go test -run '^$' -bench 'EstablishedColluders' -benchtime 1x -timeout 30m ./node | grep -E '^Benchmark' || true
echo "one attacker's 4 identities spread over 2 or 4 networks (operators) among 3 honest operators, 100 jobs, with and without --audit 0.1:"
go test -run '^$' -bench 'OperatorsSpread' -benchtime 1x -timeout 30m ./node | grep -E '^Benchmark' || true
echo "the hostile-peer scenarios (colluders, fake GPU, stalls, floods, spies), with their figures:"
go test -count=1 -run 'TestHostile(Colluders|EstablishedThenLying|FakeGPU|Stall|AdvertFlood|UndialableAdverts|Spy|Operator)' -v ./node | grep -E '(trust|flood|hostile|operators)_test.go|^(--- |ok|FAIL)' || true

hr "(g) payments: Lightning regtest (btcd + 4 lnd on loopback), hold-invoice escrow and fair exchange"
echo "one escrow (invoice, pay, accepted, settle, payer done), then a tiny 2-replica job free vs escrow vs fair exchange:"
echo "p50/p99 one at a time (target: payment adds <= 150 ms per replica), jobs/s with 8 at once"
./scripts/regtest.sh run sh -c "go test -run '^\$' -tags regtest -bench 'HoldInvoice' -benchtime $([ "${BENCH_QUICK:-}" = 1 ] && echo 10x || echo 100x) ./payments && \
  go test -run '^\$' -tags regtest -bench 'PaidJobs' -benchtime $([ "${BENCH_QUICK:-}" = 1 ] && echo 10x || echo 200x) ./node" | grep -E '^Benchmark' || true

hr "(h) proofs: Groth16 templates (gnark, BN254); targets: GEMM n=64 prove <= 0.5 s, verify <= 20 ms; exchange 256 B prove <= 2 s"
go test -run '^$' -bench 'BenchmarkGEMM/n=64$|BenchmarkExchange/size=256' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 3x)" -timeout 60m ./proofs/circuits | grep -E '^Benchmark' || true

hr "(i) hostile peers: cost to a provider of a requirement expression per announce (before/after the bounds and cache), of compiling the worst modules (the 300 KB nesting bomb is refused), of a declared-but-unsent frame"
go test -run '^$' -bench 'BenchmarkCompile$' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 10x || echo 200x)" ./node/requirement | grep -E '^Benchmark' || true
go test -run '^$' -bench 'BenchmarkCompileWorst' -benchtime 1x -timeout 30m ./host | grep -E '^Benchmark' || true
go test -run '^$' -bench 'BenchmarkReadFrame' ./node/wire | grep -E '^Benchmark' || true

hr "(j) sharded jobs: 100 shards (lines: 5 lines each; cpu: ~7 ms each) over 10 in-process providers (2 slots each), all at once, replicas 1 and 2: one SubmitShards job vs 100 independent Submits, side by side"
echo "coordination overhead per shard (coord-ms/shard: a shard's latency less its slowest replica's run), utilisation (util-%: run time / (wall x 20 slots)), replicas per provider (even: 10 or 20); wall-ratio = sharded / independent:"
go test -run '^$' -bench 'BenchmarkShards' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 5x)" -timeout 30m ./node | grep -E '^Benchmark' || true
echo "a data blob (8 MiB, new each time) read by every replica of 100 shards x 2 replicas over 10 providers: fetches/prov = most fetches by one provider (1: once each), data-MiB fetched in all vs naive-MiB (one fetch per replica):"
go test -run '^$' -bench 'BenchmarkDataBlob' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 5x)" -timeout 10m ./node | grep -E '^Benchmark' || true

hr "(k) the dashboard reads the newest records every second: the newest 50 of 20,000 jobs through the time index (whole bucket decoded and sorted before: 226 ms)"
go test -run '^$' -bench 'BenchmarkJobsNewest' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 5x || echo 200x)" ./node/store | grep -E '^Benchmark' || true

hr "(l) language models on the network: a job's start with its weights cached (target <= 20 ms), and what the network adds to a 128-token completion with 2 replicas (target <= 30 ms + 10 %)"
echo "start: from the call that starts a generation job to its first token (prompt BOS alone), less one forward pass (decode-ms); cached: the weights in the model cache from an earlier job, uncached: read by the job itself:"
go test -run '^$' -bench 'BenchmarkGenerateStart' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 5x)" -timeout 30m ./node | grep -E '^Benchmark' || true
echo "network: Submit's wall time (2 replicas, 3 in-process nodes sharing this machine's cores, so the replicas run side by side) vs the same job run here; coord-ms: network less its slower replica's run:"
go test -run '^$' -bench 'BenchmarkGenerateNetwork' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 5x)" -timeout 30m ./node | grep -E '^Benchmark' || true
echo "verification by prefill: a 256-token greedy completion generated, then checked as a claim in batched passes; ratio = (gen + check) / gen (target <= 1.3):"
go test -run '^$' -bench 'BenchmarkVerifyByPrefill' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1x || echo 3x)" -timeout 30m ./node | grep -E '^Benchmark' || true
echo "GPU worker process: a 64 MiB buffer to the worker and back (reference backend), through shared memory and through the pipe alone:"
go test -run '^$' -bench 'BenchmarkWeightsUpload' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 2x || echo 20x)" ./host/tensor/remote | grep -E '^Benchmark' || true
echo "CUDA backend on the FAKE driver: the host's cost of an Alloc and a Free from the pool, on the backend's own thread and on the caller's (a GPU worker's):"
go test -run '^$' -bench 'BenchmarkFakeDriver_Call' -benchtime "$([ "${BENCH_QUICK:-}" = 1 ] && echo 1000x || echo 20000x)" ./host/tensor/cuda | grep -E '^Benchmark' || true
hr "(m) Llama generation, greedy, 128 tokens: infernet generate --local (exact, tolerance) vs llama2.c's run.c -O3 (1 thread) and -Ofast -march=native -fopenmp (2 threads), random weights of the stories15M and stories110M shapes; targets on stories110M: infernet exact >= 1.0x run.c -O3, >= 0.7x -Ofast 2 threads"
./scripts/llama-bench.sh || true
hr "(n) quantized GGUF files, 110M shape, one thread each: infernet generate --local (exact, tolerance) vs llama.cpp; targets (issue 35): q8_0 decode >= 0.9x and prompt >= 0.7x, Q4_K_M decode >= 0.8x and prompt >= 0.6x, f32 decode >= 0.9x"
./scripts/llamacpp-bench.sh || true
hr "(o) batching across jobs (issue 35): 1 vs 8 concurrent completions (each its own job) of a random stories110M-shape q8_0 model, greedy, 64 tokens, tolerance mode on the cpu backend, batching on vs off: aggregate tokens/s, medians of 3 interleaved rounds; every completion's text must equal its unbatched run's; target: on-8/1 >= 4"
if [ "${BENCH_QUICK:-}" = 1 ]; then export INFERNET_BATCH_SHAPE=stories15M INFERNET_BATCH_ROUNDS=1; fi
go test -run '^$' -bench 'BenchmarkBatching' -benchtime 1x -timeout 60m ./guest/go/llama | grep -E '^Benchmark|batch_test|FAIL|differ' || true
hr "(p) the OpenAI API under concurrent users (issue 35): 1, 4 and 16 streamed completions at once through the official Go client, 2 providers, 2 replicas each, exact mode, a random stories15M-shape model, 64 greedy tokens: p50 and p95 time to first text, aggregate tokens/s"
go test -run '^$' -bench 'BenchmarkOpenAIStreams' -benchtime 1x -timeout 30m ./node/openai | grep -E '^Benchmark|FAIL' || true
hr "(q) the host's floor under a GPU decode step (issue 33): 1.1B shape, bf16, the whole GPU path (guest, host module, GPU worker) on the FAKE driver in bench mode (no kernel runs): decode tokens/s no GPU can exceed on these cores, the weights' load, the first token"
HOSTFLOOR_TOKENS=$([ "${BENCH_QUICK:-}" = 1 ] && echo 100 || echo 1000) HOSTFLOOR_RUNS=$([ "${BENCH_QUICK:-}" = 1 ] && echo 1 || echo 3) ./scripts/hostfloor.sh || true
