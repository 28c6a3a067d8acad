"""Llama generation speed, side by side, for scripts/bench.sh (section l).

usage: llama_bench.py LLAMA2C_DIR TOKENIZER PROMPT TOKENS RUNS INFERNET SHAPE=MODEL...

For each model (random weights of a real shape), runs every engine below
RUNS times, interleaved (engine after engine within a round, so that the
machine's load falls on all alike), generating TOKENS tokens greedily after
PROMPT, and prints a table: the median tok/s each engine reports, its
end-to-end tok/s (TOKENS over the command's wall time, start-up included),
whether its text is run.c's, and ratios. INFERNET is bin/infernet, or "" to
leave infernet out (the script says why). Read the ratios: the machines are
shared.

tok/s as reported: run.c's "achieved tok/s" on stderr counts every position
after the first (the prompt's too: run.c feeds the prompt one token at a time
as it generates) over the time from the first position's end; infernet's is
its --json decode_tokens_per_second, the tokens after the first over the
time after the first: both are the rate of forward passes once the model is
loaded (tokens_per_second would count the model's load from disk, here
uncached, and the prompt's batched rows in the time but not the count).
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

llama2c, tokenizer, prompt, tokens, runs, infernet = sys.argv[1:7]
tokens, runs = int(tokens), int(runs)
models = [a.split("=", 1) for a in sys.argv[7:]]

# The targets of the issue, on the stories110M shape: infernet (exact) at
# least as fast as run.c -O3 on one thread, and at least 0.7x run.c -Ofast on
# two.
TARGETS = {("infernet exact", "run.c -O3"): 1.0, ("infernet exact", "run.c -Ofast 2T"): 0.7}
FAST = ("run.c -Ofast 2T", "run.c -Ofast 2T passive")
TARGET_SHAPE = "stories110M"


def prompt_tokens(model):
    """run.c's count of the prompt's tokens, BOS included (the golden
    harness, scripts/lib/llama2c-golden.c, with one step)."""
    r = subprocess.run([os.path.join(llama2c, "golden"), "generate", model, tokenizer, "0", "0.9", "1", "1", prompt],
                       capture_output=True, check=True)
    return len(json.loads(r.stdout)["prompt_ids"])


def run_c(binary, threads, passive=False):
    def cmd(model, p):
        # -n counts positions, the prompt's included: p-1 of them echo the
        # prompt, the rest generate.
        return [os.path.join(llama2c, binary), model, "-z", tokenizer, "-t", "0", "-n", str(p - 1 + tokens), "-i", prompt]

    def parse(model, p, out, err):
        m = re.search(rb"achieved tok/s: ([0-9.]+)", err)
        return float(m[1]), out.decode("utf-8", "replace")

    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if passive:
        env["OMP_WAIT_POLICY"] = "passive"
    return cmd, parse, env


def infernet_generate(mode):
    def cmd(model, p):
        return [infernet, "generate", model, "--tokenizer", tokenizer, "--prompt", prompt,
                "--max-tokens", str(tokens), "--temperature", "0", "--local", "--json", "--mode", mode]

    def parse(model, p, out, err):
        text = out.decode("utf-8", "replace").strip()
        try:
            j = json.loads(text)
        except json.JSONDecodeError:  # the object on the last line
            j = json.loads(text.splitlines()[-1])
        return float(j["decode_tokens_per_second"]), j["completion"]

    return cmd, parse, dict(os.environ)


ENGINES = [
    ("run.c -O3", run_c("run", 1)),
    ("run.c -Ofast 2T", run_c("runfast", 2)),
    # OpenMP's threads spin while they wait (GOMP's default): on a machine
    # whose cores other work also wants, that costs run.c most of its speed
    # (here, at a load of 8 on 2 cores: 10 tok/s spinning, 148 passive, on
    # the stories15M shape). Passive waiting costs a wake-up per matmul
    # instead. Both are measured; -Ofast's ratios and targets take the
    # faster, the stronger peer.
    ("run.c -Ofast 2T passive", run_c("runfast", 2, passive=True)),
]
if infernet:
    ENGINES += [
        ("infernet exact", infernet_generate("exact")),
        ("infernet tolerance", infernet_generate("tolerance")),
    ]

load0 = open("/proc/loadavg").read().split()[0]
rows = []
for shape, model in models:
    p = prompt_tokens(model)
    # The text run.c prints for the prompt alone (-n p-1), cut from every
    # run.c output to compare completions.
    echo = subprocess.run([os.path.join(llama2c, "run"), model, "-z", tokenizer, "-t", "0", "-n", str(p - 1), "-i", prompt],
                          capture_output=True, check=True).stdout.decode("utf-8", "replace")[:-1]
    got = {name: {"tps": [], "wall": [], "text": None, "err": None} for name, _ in ENGINES}
    for _ in range(runs):
        for name, (cmd, parse, env) in ENGINES:
            g = got[name]
            if g["err"]:
                continue
            t0 = time.perf_counter()
            r = subprocess.run(cmd(model, p), capture_output=True, env=env)
            wall = time.perf_counter() - t0
            if r.returncode != 0:
                g["err"] = f"exit {r.returncode}: {r.stderr.decode('utf-8', 'replace').strip()[-200:]}"
                continue
            try:
                tps, text = parse(model, p, r.stdout, r.stderr)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                g["err"] = f"unreadable output ({e}): {r.stdout[-200:]!r}"
                continue
            g["tps"].append(tps)
            g["wall"].append(wall)
            if name.startswith("run.c"):
                text = text[len(echo):-1] if text.startswith(echo) else None
            g["text"] = text
    rows.append((shape, got))

ref = "run.c -O3"
print(f"load average before: {load0} on {os.cpu_count()} cores")
print(f"greedy, {tokens} tokens after {prompt!r}, median of {runs} (interleaved); same text = the completion run.c -O3 prints")
print(f"{'shape':12s} {'engine':24s} {'tok/s':>9s} {'e2e tok/s':>10s} {'same text':>10s} {'x run.c -O3':>12s} {'x -Ofast 2T':>12s}")
for shape, got in rows:
    med = {n: statistics.median(g["tps"]) for n, g in got.items() if g["tps"]}
    fast = max((med[n] for n in FAST if n in med), default=None)
    for name, g in got.items():
        if g["err"]:
            print(f"{shape:12s} {name:24s} failed: {g['err']}")
            continue
        wall = statistics.median(g["wall"])
        same = "yes" if g["text"] == got[ref]["text"] else "NO"
        r1 = f"{med[name] / med[ref]:.2f}x" if ref in med else "-"
        r2 = f"{med[name] / fast:.2f}x" if fast else "-"
        print(f"{shape:12s} {name:24s} {med[name]:9.1f} {tokens / wall:10.1f} {same:>10s} {r1:>12s} {r2:>12s}")
    if shape == TARGET_SHAPE:
        for (a, b), want in TARGETS.items():
            peer = fast if b == FAST[0] else med.get(b)
            if a in med and peer:
                r = med[a] / peer
                print(f"{'':12s} target: {a} / {b} = {r:.2f}x (target >= {want}x) {'met' if r >= want else 'NOT met'}")
print(f"load average after: {open('/proc/loadavg').read().split()[0]}; x -Ofast 2T: against the faster of the two -Ofast rows")
if not infernet:
    print("infernet: not measured (bin/infernet has no generate command yet)")
print("a job's start with cached weights and the network's overhead: section (l) of scripts/bench.sh (node's BenchmarkGenerateStart, BenchmarkGenerateNetwork)")
