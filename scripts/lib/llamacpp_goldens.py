"""llama.cpp's tokenizations of special_prompts.txt, for
scripts/llamacpp-goldens.sh.

usage: llamacpp_goldens.py TMP DIR

TMP holds tok512.bin.gguf and tokenizer.bin.gguf (the GGUF vocabularies of
DIR's llama2.c tokenizers) and is where each prompt is written for
llama.cpp to read. DIR is testdata/llama: special_prompts.txt (a JSON
string a line) in, special_tokens.jsonl out (rewritten only when it
changed), a line per prompt and tokenizer: {"tokenizer", "prompt_hex",
"ids"}, ids being BOS then llama.cpp's tokens of the prompt with special
tokens parsed (scripts/llamacpp.sh serve, LLAMACPP_SPECIAL=1).
"""

import json
import os
import subprocess
import sys

tmp, out_dir = sys.argv[1:]
TOKENIZERS = ["tok512.bin", "tokenizer.bin"]
BOS = 1  # both tokenizers', llama2.c's fixed layout

with open(os.path.join(out_dir, "special_prompts.txt"), encoding="utf-8") as f:
    prompts = [json.loads(line) for line in f if line.strip()]

env = dict(os.environ, LLAMACPP_SPECIAL="1")
serve = subprocess.Popen(["scripts/llamacpp.sh", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)


def tokenize(model, text):
    path = os.path.join(tmp, "prompt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    serve.stdin.write(json.dumps(["tokenize", model, path]) + "\n")
    serve.stdin.flush()
    ids = None
    while True:
        line = json.loads(serve.stdout.readline())
        if isinstance(line, dict) and "error" in line:
            sys.exit(f"llamacpp_goldens: llama.cpp: {line['error']}")
        if isinstance(line, dict) and line.get("end"):
            return ids
        ids = line


lines = []
for name in TOKENIZERS:
    model = os.path.join(tmp, name + ".gguf")
    for p in prompts:
        ids = tokenize(model, p)
        if tokenize(model, p) != ids:
            sys.exit(f"llamacpp_goldens: llama.cpp tokenized {p!r} twice differently")
        lines.append(json.dumps({"tokenizer": name, "prompt_hex": p.encode().hex(), "ids": [BOS] + ids}, separators=(",", ":")))
serve.stdin.close()
serve.wait()

text = "\n".join(lines) + "\n"
path = os.path.join(out_dir, "special_tokens.jsonl")
old = open(path).read() if os.path.exists(path) else None
if old != text:
    with open(path, "w") as f:
        f.write(text)
print(f"special_tokens.jsonl: {len(lines)} tokenizations, {'rewritten' if old != text else 'unchanged'}")
