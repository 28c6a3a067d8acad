"""Golden outputs of llama2.c's run.c, for scripts/llama-golden.sh.

usage: llama_golden.py LLAMA2C_DIR MODELS RANDOM15M RANDOM_SEED GENERATOR OUT

Runs each case below through run.c (LLAMA2C_DIR/run, the -O3 build) and the
ids harness (LLAMA2C_DIR/ids: run.c's own encode, forward and sampler, see
llama2c-ids.c), checks that they agree, and writes one JSON object per case
to OUT (JSON lines; rewritten only when something changed). The format and
how "completion" is cut from run.c's output: testdata/llama/README.md.
"""

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys

llama2c, models, random15m, random_seed, generator, out = sys.argv[1:]
random_seed = int(random_seed)

# (model, tokenizer, prompt, steps or None, generated tokens or None, sampling)
# steps is run.c's -n (positions, the prompt's included); for the random
# model the script sets -n so that exactly `generated` tokens follow the
# prompt (unless BOS stops it first). Greedy is -t 0; sampled is
# -t 0.9 -p 0.9 -s 42.
GREEDY = None
SAMPLED = (0.9, 0.9, 42)
S260K = ("stories260K.bin", "tok512.bin")
R15M = ("llamatest:stories15M", "tokenizer.bin")
CASES = [
    # The README's example (models/README.md): 64 steps.
    (S260K, "Once upon a time", 64, None, GREEDY),
    (S260K, "Lily and Ben went to the park", 128, None, GREEDY),
    (S260K, "One day, a little bird", 200, None, GREEDY),
    (S260K, "The sun was shining and", 200, None, GREEDY),
    # The story ends (BOS) after 196 tokens, before the 210 steps: run.c
    # stops there.
    (S260K, "Ben had a toy car", 210, None, GREEDY),
    # The whole context (seq_len 512): -n 512 is the most run.c runs.
    (S260K, "Anna and her mom baked a cake", 512, None, GREEDY),
    (S260K, "Tom had a red ball. He", 150, None, GREEDY),
    (S260K, "The cat sat on the mat.", 100, None, GREEDY),
    # Quotes, an apostrophe, punctuation.
    (S260K, 'Mom said, "Don\'t go out!"', 90, None, GREEDY),
    # A longer prompt, so the prompt's positions are a larger part of -n.
    (S260K, "Once upon a time, there was a big dog named Max. Max liked to run and jump. One day", 160, None, GREEDY),
    # Leading and doubled spaces: the dummy prefix and the first piece.
    (S260K, "  Two  spaces", 72, None, GREEDY),
    # Not in tok512's vocabulary: byte-fallback tokens, whose bytes run.c's
    # safe_printf drops (not printable ASCII), so the echo is not the prompt.
    (S260K, "Zo\u00eb liked the caf\u00e9", 80, None, GREEDY),
    # No prompt: BOS alone; the first generated piece loses its space.
    (S260K, "", 80, None, GREEDY),
    (S260K, "Once upon a time", 128, None, SAMPLED),
    (S260K, "Lily and Ben went to the park", 100, None, SAMPLED),
    # The random model of the Stories15M shape with Llama 2's vocabulary.
    (R15M, "Once upon a time", None, 100, GREEDY),
    (R15M, "The quick brown fox jumps over the lazy dog", None, 100, GREEDY),
    (R15M, "Zo\u00eb liked the caf\u00e9 \u2615", None, 100, GREEDY),
    (R15M, "Once upon a time", None, 100, SAMPLED),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def vocab(path, n):
    """The pieces of a llama2.c tokenizer file (n of them)."""
    with open(path, "rb") as f:
        data = f.read()
    pieces, off = [], 4  # max_token_length
    for _ in range(n):
        ln = int.from_bytes(data[off + 4:off + 8], "little", signed=True)
        pieces.append(data[off + 8:off + 8 + ln])
        off += 8 + ln
    return pieces


def decode(pieces, prev, ids):
    """What run.c prints for ids after prev: a piece loses its leading space
    after BOS (1); a piece <0xHH> is the byte HH; a one-byte piece is dropped
    unless printable ASCII or whitespace (safe_printf in the C locale)."""
    out = b""
    for t in ids:
        p = pieces[t]
        if prev == 1 and p[:1] == b" ":
            p = p[1:]
        m = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
        if m:
            p = bytes([int(m[1], 16)])
        if len(p) == 1 and not (0x20 <= p[0] <= 0x7E or p[0] in b"\t\n\v\f\r"):
            p = b""
        out += p
        prev = t
    return out


def run(binary, model, args, env=None):
    """run.c's stdout and the tok/s it reports on stderr."""
    r = subprocess.run([binary, model] + args, capture_output=True, check=True, env=env)
    m = re.search(rb"achieved tok/s: ([0-9.]+)", r.stderr)
    return r.stdout, float(m[1]) if m else None


def with_steps(args, steps):
    i = args.index("-n")
    return args[:i + 1] + [str(steps)] + args[i + 2:]


def ids(model, tok, prompt, steps, sampling):
    t, p, s = sampling or (0, 0.9, 1)
    r = subprocess.run([os.path.join(llama2c, "ids"), model, tok, str(t), str(p), str(s), str(steps), prompt],
                       capture_output=True, check=True)
    return json.loads(r.stdout)


def fail(msg):
    sys.exit("llama-golden: " + msg)


lines, speeds, fast_agree, greedy_n = [], {}, 0, 0
fast_env = dict(os.environ, OMP_NUM_THREADS="2")
for (model_name, tok_name), prompt, steps, generated, sampling in CASES:
    random = model_name.startswith("llamatest:")
    model = random15m if random else os.path.join(models, model_name)
    tok = os.path.join(models, tok_name)
    with open(model, "rb") as f:
        vocab_size = abs(int.from_bytes(f.read(28)[20:24], "little", signed=True))
    pieces = vocab(tok, vocab_size)
    prompt_ids = ids(model, tok, prompt, 1, sampling)["prompt_ids"]
    if steps is None:
        steps = len(prompt_ids) - 1 + generated
    run_args = ["-z", tok_name, "-t", str(sampling[0] if sampling else 0)]
    if sampling:
        run_args += ["-p", str(sampling[1]), "-s", str(sampling[2])]
    run_args += ["-n", str(steps), "-i", prompt]

    args = ["-z", tok] + run_args[2:]
    output, tps = run(os.path.join(llama2c, "run"), model, args)
    again, _ = run(os.path.join(llama2c, "run"), model, args)
    if again != output:
        fail(f"{model_name} {prompt!r}: two runs differ")
    speeds.setdefault(model_name, []).append(tps)
    # run.c prints the prompt's pieces (tokens 1..P-1), then the generated
    # ones, then "\n". Run with -n P-1, it prints the prompt's pieces alone.
    echo = b""
    if len(prompt_ids) > 1:
        echo, _ = run(os.path.join(llama2c, "run"), model, with_steps(args, len(prompt_ids) - 1))
        echo = echo[:-1]
    if not output.startswith(echo) or not output.endswith(b"\n"):
        fail(f"{model_name} {prompt!r}: output {output!r} does not start with the echo {echo!r}")
    completion = output[len(echo):-1]

    got = ids(model, tok, prompt, steps, sampling)
    if got["prompt_ids"] != prompt_ids:
        fail(f"{model_name} {prompt!r}: prompt ids differ")
    if decode(pieces, 1, prompt_ids[1:]) != echo:
        fail(f"{model_name} {prompt!r}: the prompt's ids decode to {decode(pieces, 1, prompt_ids[1:])!r}, run.c echoed {echo!r}")
    if decode(pieces, prompt_ids[-1], got["ids"]) != completion:
        fail(f"{model_name} {prompt!r}: the ids decode to {decode(pieces, prompt_ids[-1], got['ids'])!r}, run.c printed {completion!r}")
    n_gen = len(got["ids"])
    if got["stop"] == "length" and n_gen != steps - len(prompt_ids) + 1:
        fail(f"{model_name} {prompt!r}: {n_gen} tokens generated in {steps} steps")
    if random and not sampling and len(set(got["ids"])) < n_gen // 2:
        fail(f"{model_name} {prompt!r}: greedy text repeats ({len(set(got['ids']))} distinct of {n_gen}): the generator is degenerate")
    if not sampling:
        greedy_n += 1
        fast, _ = run(os.path.join(llama2c, "runfast"), model, args, fast_env)
        fast_agree += fast == output

    line = {"model": model_name}
    if random:
        line["seed"] = random_seed
        line["generator"] = generator
    line.update({
        "model_sha256": sha256(model),
        "tokenizer": tok_name,
        "prompt": prompt,
        "steps": steps,
        "temperature": sampling[0] if sampling else 0,
    })
    if sampling:
        line.update({"top_p": sampling[1], "sampler_seed": sampling[2]})
    try:
        line.update({
            "args": run_args,
            "output": output.decode("utf-8"),
            "completion": completion.decode("utf-8"),
        })
    except UnicodeDecodeError:
        fail(f"{model_name} {prompt!r}: run.c printed bytes that are not UTF-8")
    line.update({
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": n_gen,
        "max_tokens": steps - len(prompt_ids) + 1,
        "stop": got["stop"],
        "prompt_ids": prompt_ids,
        "ids": got["ids"],
    })
    lines.append(json.dumps(line, ensure_ascii=False))

text = "".join(l + "\n" for l in lines)
old = open(out, encoding="utf-8").read() if os.path.exists(out) else None
if text != old:
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(out + ".tmp", out)
print(f"{out}: {len(lines)} goldens, {'unchanged' if text == old else 'written'}")
print(f"the -Ofast -march=native -fopenmp build (2 threads) prints the same on {fast_agree} of {greedy_n} greedy goldens")
for name, v in speeds.items():
    v = [x for x in v if x]
    print(f"run.c -O3 reports {statistics.median(v):,.0f} tok/s (median of {len(v)}; {min(v):,.0f}..{max(v):,.0f}) on {name}")
