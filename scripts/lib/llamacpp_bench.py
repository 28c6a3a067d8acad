"""infernet against llama.cpp on the same GGUF files, for
scripts/llamacpp-bench.sh: prompt processing and decode tokens/s, medians
of interleaved rounds, each engine on THREADS threads.

usage: llamacpp_bench.py INFERNET NODE_MODULE SPEED_MJS PROMPT_FILE TOKENS
                         ROUNDS THREADS NAME=MODEL.gguf...

infernet: `INFERNET generate MODEL --local --json` under GOMAXPROCS=THREADS,
in exact mode (the reference kernels, the same bits everywhere) and in
tolerance mode (the fastest CPU kernels). decode_tokens_per_second is its
own; prompt tokens/s is the prompt's extra tokens over the extra time to
the first token against a one-word prompt, the weights' loading (load_ms)
taken out of each: it varies between runs (how much of the memory is fresh
to the process, which on a VM may cost the host's page faults), by more than
the prompt takes. llama.cpp: scripts/lib/llamacpp-speed.mjs.
"""
import json
import os
import statistics
import subprocess
import sys


def infernet(binary, model, prompt, tokens, threads, mode):
    env = dict(os.environ, GOMAXPROCS=str(threads))
    args = [binary, "generate", model, "--local", "--json", "--mode", mode]
    if mode == "tolerance":
        args += ["--backend", "cpu"]

    def run(p, n):
        out = subprocess.run(args + ["--max-tokens", str(n), "--prompt", p], env=env,
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    short = run("Once", 1)
    long = run(prompt, tokens)
    extra = long["prompt_tokens"] - short["prompt_tokens"]
    ms = (long["first_token_ms"] - long.get("load_ms", 0)) - (short["first_token_ms"] - short.get("load_ms", 0))
    return {"prompt_tps": extra / (ms / 1000) if ms > 0 else float("nan"),
            "decode_tps": long["decode_tokens_per_second"]}


def llamacpp(module, mjs, model, prompt_file, tokens, threads):
    env = dict(os.environ, NODE_LLAMA_CPP_MODULE=module)
    out = subprocess.run(["node", mjs, model, prompt_file, str(tokens), str(threads)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    binary, module, mjs, prompt_file, tokens, rounds, threads = sys.argv[1:8]
    tokens, rounds, threads = int(tokens), int(rounds), int(threads)
    files = [a.split("=", 1) for a in sys.argv[8:]]
    prompt = open(prompt_file, encoding="utf-8").read()
    engines = ["infernet exact", "infernet tolerance", "llama.cpp"]
    got = {(name, e): [] for name, _ in files for e in engines}
    for r in range(rounds):
        for name, model in files:
            for e in engines:  # interleaved: each round runs every engine on every file
                if e == "llama.cpp":
                    m = llamacpp(module, mjs, model, prompt_file, tokens, threads)
                else:
                    m = infernet(binary, model, prompt, tokens, threads, e.split()[1])
                got[(name, e)].append(m)
                print(f"round {r + 1}/{rounds} {name} {e}: prompt {m['prompt_tps']:.1f} tok/s, "
                      f"decode {m['decode_tps']:.1f} tok/s", file=sys.stderr, flush=True)

    def med(name, e, key):
        return statistics.median(m[key] for m in got[(name, e)])

    print(f"\n{threads} thread(s), {tokens} tokens greedy, medians of {rounds} interleaved rounds (tok/s; x = against llama.cpp)")
    print(f"{'file':<26} {'':>8} {'llama.cpp':>10} {'exact':>16} {'tolerance':>16}")
    for name, _ in files:
        for key, label in (("prompt_tps", "prompt"), ("decode_tps", "decode")):
            ref = med(name, "llama.cpp", key)
            row = f"{name:<26} {label:>8} {ref:>10.1f}"
            for e in engines[:2]:
                v = med(name, e, key)
                row += f" {v:>8.1f} ({v / ref:4.2f}x)"
            print(row)


if __name__ == "__main__":
    main()
