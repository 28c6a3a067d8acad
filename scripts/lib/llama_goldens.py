"""The golden data of llama2.c's run.c, for scripts/llama-goldens.sh.

usage: llama_goldens.py LLAMA2C_DIR DIR RANDOM15M RANDOM_SEED GENERATOR

DIR is testdata/llama: the models, the tokenizers and tokenize_prompts.txt,
and where it writes tokens.jsonl and golden.jsonl (JSON lines; each file
rewritten only when something in it changed). LLAMA2C_DIR holds run.c's
builds (scripts/lib/llama.sh): run (-O3), runfast (-Ofast) and golden (run.c
with scripts/lib/llama2c-golden.c: run.c's own encode, forward and
sampler). Every completion is run through run's CLI and through the golden
harness, which must agree. The format, and how "completion" is cut from
run.c's output: testdata/llama/README.md.
"""

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys

llama2c, models, random15m, random_seed, generator = sys.argv[1:]
random_seed = int(random_seed)

# Tokenizations: every prompt of tokenize_prompts.txt with both tokenizers.
TOKENIZERS = [("tok512.bin", 512), ("tokenizer.bin", 32000)]

# Completions: (model, tokenizer, prompt, steps or None, generated tokens or
# None, sampling). steps is run.c's -n (positions, the prompt's included);
# for the random model the script sets -n so that exactly `generated` tokens
# follow the prompt (unless BOS stops it first). Greedy is -t 0; sampled is
# -t T -p P -s SEED.
GREEDY = None
SAMPLED = (0.9, 0.9, 42)
SAMPLED_ALL = (0.9, 1, 7)  # top-p 1: sampled from every token
S260K = ("stories260K.bin", "tok512.bin")
R15M = ("llamatest:stories15M", "tokenizer.bin")

# Short prompts, 128 steps, each greedy and sampled both ways. The empty
# prompt is BOS alone (the first generated piece loses its space); 'Mom
# said, "' ends in an open quote.
SHORT = ["Once upon a time", "Lily went to the park", "The cat", "One day, a little boy named Tom",
         "Sara had a red ball.", "The sun was shining", "", "Ben and his mom",
         "Once upon a time, there was a big dog", 'Mom said, "']
# A prompt of 192 tokens, so that the runner's batched prompt rows are
# checked too.
LONG = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
        "friends. One day, she saw a big red ball under a tree. She wanted to play with it, but it was too high. "
        "Lily asked her mom for help. Her mom smiled and said, \"Let us get it together.\" They found a long stick "
        "and pushed the ball down. Lily was very happy. She thanked her mom and played with the ball all day. When "
        "the sun went down, they went home and had a warm dinner. Then Lily went to bed and")

CASES = [(S260K, p, 128, None, s) for s in (GREEDY, SAMPLED, SAMPLED_ALL) for p in SHORT] + [
    # The models' README example (the shared models/README.md): 64 steps.
    (S260K, "Once upon a time", 64, None, GREEDY),
    (S260K, "Lily and Ben went to the park", 128, None, GREEDY),
    (S260K, "One day, a little bird", 200, None, GREEDY),  # scripts/demo.sh's
    (S260K, "The sun was shining and", 200, None, GREEDY),
    # The story ends (BOS) after 196 tokens, before the 210 steps: run.c
    # stops there.
    (S260K, "Ben had a toy car", 210, None, GREEDY),
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
    (S260K, "", 80, None, GREEDY),
    (S260K, "Lily and Ben went to the park", 100, None, SAMPLED),
    # A chat (node/openai's test): ChatPrompt of a system and a user
    # message, Llama 2's template.
    (S260K, "[INST] <<SYS>>\nYou tell stories to children.\n<</SYS>>\n\nTell me a story about a cat. [/INST]", 160, None, GREEDY),
] + [
    # The whole context (seq_len 512, the most run.c runs): these stories
    # end where the model writes BOS, but for one that runs to the end.
    (S260K, p, 512, None, GREEDY) for p in ["Once upon a time", "Lily", "The end", LONG, "Anna and her mom baked a cake"]
] + [
    # The random model of the Stories15M shape with Llama 2's vocabulary.
    (R15M, "Once upon a time", None, 100, GREEDY),
    (R15M, "The quick brown fox jumps over the lazy dog", None, 100, GREEDY),
    (R15M, "Zo\u00eb liked the caf\u00e9 \u2615", None, 100, GREEDY),
    (R15M, "Once upon a time", None, 100, SAMPLED),
]


def fail(msg):
    sys.exit("llama-goldens: " + msg)


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


def unescape(line):
    """A line of tokenize_prompts.txt as bytes: \\n, \\t, \\r and \\xHH
    unescaped, and a backslash before any other character dropped."""
    esc = {b"n": b"\n", b"t": b"\t", b"r": b"\r"}

    def one(m):
        e = m[1]
        return bytes([int(e[1:], 16)]) if len(e) == 3 else esc.get(e, e)

    return re.sub(rb"\\(x[0-9A-Fa-f]{2}|.)", one, line, flags=re.S)


def run(binary, model, args, env=None):
    """run.c's stdout and the tok/s it reports on stderr."""
    r = subprocess.run([binary, model] + args, capture_output=True, check=True, env=env)
    m = re.search(rb"achieved tok/s: ([0-9.]+)", r.stderr)
    return r.stdout, float(m[1]) if m else None


def with_steps(args, steps):
    i = args.index("-n")
    return args[:i + 1] + [str(steps)] + args[i + 2:]


def harness(*args):
    r = subprocess.run([os.path.join(llama2c, "golden")] + [a if isinstance(a, bytes) else str(a) for a in args],
                       capture_output=True, check=True)
    return json.loads(r.stdout)


def ids(model, tok, prompt, steps, sampling):
    t, p, s = sampling or (0, 0.9, 1)
    return harness("generate", model, tok, t, p, s, steps, prompt)


def write(path, lines):
    """Writes lines to path unless it holds them already; says which."""
    text = "".join(l + "\n" for l in lines)
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if text != old:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    print(f"{path}: {len(lines)} lines, {'unchanged' if text == old else 'written'}")


def tokenizations():
    with open(os.path.join(models, "tokenize_prompts.txt"), "rb") as f:
        prompts = [unescape(l.rstrip(b"\n")) for l in f]
    lines = []
    for name, n in TOKENIZERS:
        for p in prompts:
            got = harness("encode", os.path.join(models, name), n, p)["ids"]
            lines.append(json.dumps({"tokenizer": name, "prompt_hex": p.hex(), "ids": got}, separators=(",", ":")))
    return lines


def completion(model_name, tok_name, prompt, steps, generated, sampling, stats):
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
    name = f"{model_name} {prompt!r} -n {steps}" + (f" -t {sampling[0]} -p {sampling[1]} -s {sampling[2]}" if sampling else "")

    args = ["-z", tok] + run_args[2:]
    output, tps = run(os.path.join(llama2c, "run"), model, args)
    again, _ = run(os.path.join(llama2c, "run"), model, args)
    if again != output:
        fail(f"{name}: two runs differ")
    stats["speeds"].setdefault(model_name, []).append(tps)
    # run.c prints the prompt's pieces (tokens 1..P-1), then the generated
    # ones, then "\n". Run with -n P-1, it prints the prompt's pieces alone.
    echo = b""
    if len(prompt_ids) > 1:
        echo, _ = run(os.path.join(llama2c, "run"), model, with_steps(args, len(prompt_ids) - 1))
        echo = echo[:-1]
    if not output.startswith(echo) or not output.endswith(b"\n"):
        fail(f"{name}: output {output!r} does not start with the echo {echo!r}")
    completion = output[len(echo):-1]

    got = ids(model, tok, prompt, steps, sampling)
    if got["prompt_ids"] != prompt_ids:
        fail(f"{name}: prompt ids differ")
    if decode(pieces, 1, prompt_ids[1:]) != echo:
        fail(f"{name}: the prompt's ids decode to {decode(pieces, 1, prompt_ids[1:])!r}, run.c echoed {echo!r}")
    if decode(pieces, prompt_ids[-1], got["ids"]) != completion:
        fail(f"{name}: the ids decode to {decode(pieces, prompt_ids[-1], got['ids'])!r}, run.c printed {completion!r}")
    n_gen = len(got["ids"])
    if got["stop"] == "length" and n_gen != steps - len(prompt_ids) + 1:
        fail(f"{name}: {n_gen} tokens generated in {steps} steps")
    if random and not sampling and len(set(got["ids"])) < n_gen // 2:
        fail(f"{name}: greedy text repeats ({len(set(got['ids']))} distinct of {n_gen}): the generator is degenerate")
    if not sampling:
        stats["greedy"] += 1
        fast, _ = run(os.path.join(llama2c, "runfast"), model, args, dict(os.environ, OMP_NUM_THREADS="2"))
        stats["fast_agree"] += fast == output
        if got["margins"]:
            j = min(range(n_gen), key=lambda j: got["margins"][j])
            m = stats["margin"].get(model_name)
            if m is None or got["margins"][j] < m[0]:
                stats["margin"][model_name] = (got["margins"][j], j, prompt)

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
        fail(f"{name}: run.c printed bytes that are not UTF-8")
    line.update({
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": n_gen,
        "max_tokens": steps - len(prompt_ids) + 1,
        "stop": got["stop"],
        "prompt_ids": prompt_ids,
        "ids": got["ids"],
    })
    if not sampling:
        line["margins"] = got["margins"]
    return json.dumps(line, ensure_ascii=False)


def main():
    write(os.path.join(models, "tokens.jsonl"), tokenizations())
    seen = set()
    for c in CASES:
        if c in seen:
            fail(f"case {c} twice")
        seen.add(c)
    stats = {"speeds": {}, "greedy": 0, "fast_agree": 0, "margin": {}}
    write(os.path.join(models, "golden.jsonl"), [completion(*model, *rest, stats) for model, *rest in CASES])
    print(f"the -Ofast -march=native -fopenmp build (2 threads) prints the same on {stats['fast_agree']} of {stats['greedy']} greedy goldens")
    for name, (m, j, prompt) in stats["margin"].items():
        print(f"the smallest logit margin of {name}'s greedy goldens: {m:g}, at generated token {j} after {prompt!r}")
    for name, v in stats["speeds"].items():
        v = [x for x in v if x]
        print(f"run.c -O3 reports {statistics.median(v):,.0f} tok/s (median of {len(v)}; {min(v):,.0f}..{max(v):,.0f}) on {name}")


main()
