// llama.cpp's tokenizer and forward pass through node-llama-cpp's API, for
// scripts/llamacpp.sh (which sets NODE_LLAMA_CPP_MODULE to the installed
// package's directory):
//
//   node llamacpp.mjs logits MODEL.gguf PROMPT...
//       one JSON object a line per prompt:
//       {"prompt":..., "tokens":[...], "logits":[...]}
//       tokens: llama.cpp's tokenization of the prompt (no special-token
//       parsing) with BOS in front if the model says to prepend one; logits:
//       the whole vocabulary's logits at the last position after evaluating
//       those tokens as one batch in a fresh sequence (or, where they are a
//       prefix of another prompt's, at their last position in that one's
//       batch), indexed by token id, each the shortest decimal that reads
//       back as the same float32; with LLAMACPP_LOGITS=f32, "logits_f32"
//       instead: the float32s' bytes, little-endian, in base64 (a quarter
//       of the time to write and to read)
//   node llamacpp.mjs logits-ids MODEL.gguf IDS...
//       the same for token ids given as comma-separated lists (used as they
//       are: no BOS added), without "prompt"
//   node llamacpp.mjs tokenize MODEL.gguf FILE
//       a JSON array: the ids of FILE's content (UTF-8), no BOS; with
//       LLAMACPP_SPECIAL=1 special tokens in it are parsed as tokens
//   node llamacpp.mjs serve
//       the commands above, many in one process: a JSON array a line on
//       stdin, a command's arguments (["logits-ids", "MODEL.gguf", ...]),
//       answered by its lines on stdout and then {"end":true}, or by
//       {"error":...}; llama.cpp's library is loaded once (about a second
//       of node's time a command otherwise)
//
// CPU only (getLlama({gpu: false, build: "never"}): the prebuilt
// @node-llama-cpp/linux-x64 libraries, never a build or a download).
// Settings, from the environment (each is printed to stderr):
//   LLAMACPP_THREADS     threads of the evaluation (default 1: llama.cpp's
//                        threads spin at barriers on a busy machine)
//   LLAMACPP_KV_TYPE     the KV cache's type: F32 (default) or F16 (llama.cpp's
//                        default)
//   LLAMACPP_FLASH_ATTN  false (default), true or auto (llama.cpp's default,
//                        which turns it on for the CPU); with it on, llama.cpp
//                        casts an F32 KV cache to F16 for the attention, so
//                        the defaults here are the precise ones
//   LLAMACPP_LOG         llama.cpp's log level on stderr (default error;
//                        info shows what the context resolved)
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const usage = "usage: llamacpp.mjs logits MODEL.gguf PROMPT... | logits-ids MODEL.gguf IDS... | tokenize MODEL.gguf FILE | serve";
// valid says whether args are one command's arguments.
function valid([mode, modelPath, ...rest]) {
  return ((mode === "logits" || mode === "logits-ids") && modelPath && rest.length > 0) || (mode === "tokenize" && modelPath && rest.length === 1);
}
const argv = process.argv.slice(2);
if (!(valid(argv) || (argv.length === 1 && argv[0] === "serve"))) {
  console.error(usage);
  process.exit(2);
}
const moduleDir = process.env.NODE_LLAMA_CPP_MODULE;
if (!moduleDir) {
  console.error("llamacpp.mjs: NODE_LLAMA_CPP_MODULE is not set (run it through scripts/llamacpp.sh)");
  process.exit(2);
}
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(moduleDir, "dist", "index.js")).href);

// The shortest decimal that reads back (as float32) to the float32 x.
function f32(x) {
  if (!Number.isFinite(x)) {
    throw new Error(`non-finite logit ${x}`);
  }
  for (let p = 1; p <= 9; p++) {
    const s = x.toPrecision(p);
    if (Math.fround(Number(s)) === x) {
      return Number(s);
    }
  }
  return x;
}

const llama = await getLlama({
  gpu: false,
  build: "never",
  logLevel: LlamaLogLevel[process.env.LLAMACPP_LOG || "error"] ?? LlamaLogLevel.error,
  logger: (level, message) => process.stderr.write(`llama.cpp ${level}: ${message}${message.endsWith("\n") ? "" : "\n"}`),
});
// tokenize answers tokenize FILE: its ids by model.
function tokenize(model, [file], write) {
  const text = fs.readFileSync(file, "utf8");
  // LLAMACPP_SPECIAL=1: special tokens in the text are parsed as tokens
  // (llama.cpp's parse_special), as a chat template's prompt needs.
  write(JSON.stringify(model.tokenize(text, process.env.LLAMACPP_SPECIAL === "1")) + "\n");
}

// logits answers logits PROMPT... and logits-ids IDS... (mode) by model.
async function logits(model, mode, rest, write) {
  const threads = Number(process.env.LLAMACPP_THREADS || "1");
  const kvType = (process.env.LLAMACPP_KV_TYPE || "F32").toUpperCase();
  const fa = process.env.LLAMACPP_FLASH_ATTN || "false";
  const flashAttention = fa === "auto" ? "auto" : fa === "true";
  const bos = model.tokens.bos != null && model.tokens.shouldPrependBosToken ? [model.tokens.bos] : [];
  const prompts = mode === "logits"
    ? rest.map((p) => ({ prompt: p, tokens: [...bos, ...model.tokenize(p, false)] }))
    : rest.map((p) => ({ tokens: p.split(",").filter((x) => x !== "").map((x) => {
      if (!/^[0-9]+$/.test(x)) {
        throw new Error(`not a token id: ${JSON.stringify(x)}`);
      }
      return Number(x);
    }) }));
  const longest = Math.max(...prompts.map((p) => p.tokens.length));
  if (longest === 0) {
    throw new Error("an empty prompt and no BOS: nothing to evaluate");
  }
  if (longest > model.trainContextSize) {
    throw new Error(`a prompt of ${longest} tokens is longer than the model's context (${model.trainContextSize})`);
  }
  const context = await model.createContext({
    contextSize: model.trainContextSize,
    batchSize: Math.max(longest, 1),
    threads: { ideal: threads, min: threads },
    flashAttention,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  });
  process.stderr.write(`llamacpp.mjs: threads ${threads}, KV ${kvType}, flash attention ${context.flashAttention}, context ${context.contextSize}, batch ${context.batchSize}\n`);
  try {
    const sequence = context.getSequence();
    // A list that is a prefix of a longer one in the same call is read from
    // the longer one's evaluation, at its own last position: causal
    // attention leaves a position's logits independent of the tokens after
    // it, and the rows of a batch are computed alike (the oracle's lists are
    // a prompt and each prefix of its continuation: one evaluation each).
    const cover = prompts.map((p) => prompts.reduce((best, q) =>
      q.tokens.length > best.tokens.length && p.tokens.every((t, i) => q.tokens[i] === t) ? q : best, p));
    const rows = new Map(); // a list evaluated -> Map from position to logits
    for (const p of prompts) {
      if (p.tokens.length === 0) {
        throw new Error("nothing to evaluate: an empty list of ids");
      }
    }
    for (const [i, { prompt, tokens }] of prompts.entries()) {
      const full = cover[i];
      if (!rows.has(full)) {
        const want = new Set(prompts.filter((_, j) => cover[j] === full).map((p) => p.tokens.length - 1));
        await sequence.clearHistory();
        const out = await sequence.controlledEvaluate(full.tokens.map((t, k) => (want.has(k) ? [t, { generateNext: { logits: true } }] : t)));
        rows.set(full, new Map([...want].map((k) => [k, out[k]?.next?.logits])));
      }
      const map = rows.get(full).get(tokens.length - 1);
      if (map == null) {
        throw new Error(`no logits for prompt ${JSON.stringify(prompt)}`);
      }
      const logits = new Float32Array(map.size);
      const seen = new Uint8Array(map.size);
      for (const [id, v] of map) {
        if (!(id >= 0 && id < map.size) || seen[id]) {
          throw new Error(`unexpected token id ${id} in the logits`);
        }
        if (!Number.isFinite(v)) {
          throw new Error(`non-finite logit ${v}`);
        }
        logits[id] = v;
        seen[id] = 1;
      }
      const line = prompt === undefined ? { tokens } : { prompt, tokens };
      if (process.env.LLAMACPP_LOGITS === "f32") {
        line.logits_f32 = Buffer.from(logits.buffer).toString("base64"); // little-endian on x86 and arm
      } else {
        line.logits = Array.from(logits, f32);
      }
      write(JSON.stringify(line) + "\n");
    }
  } finally {
    await context.dispose();
  }
}

// run answers one command, args, with write (a line of output at a time).
async function run([mode, modelPath, ...rest], write) {
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, vocabOnly: mode === "tokenize" });
  try {
    if (mode === "tokenize") {
      tokenize(model, rest, write);
    } else {
      await logits(model, mode, rest, write);
    }
  } finally {
    await model.dispose();
  }
}

if (argv[0] === "serve") {
  const readline = await import("node:readline");
  for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    let args;
    try {
      args = JSON.parse(line);
    } catch (e) {
      args = null;
    }
    if (!Array.isArray(args) || !valid(args)) {
      process.stdout.write(JSON.stringify({ error: `not a command: ${line.slice(0, 200)} (${usage})` }) + "\n");
      continue;
    }
    try {
      const out = [];
      await run(args, (l) => out.push(l));
      process.stdout.write(out.join("") + JSON.stringify({ end: true }) + "\n");
    } catch (e) {
      process.stdout.write(JSON.stringify({ error: String(e?.message ?? e) }) + "\n");
    }
  }
} else {
  await run(argv, (l) => process.stdout.write(l));
}
await llama.dispose();
