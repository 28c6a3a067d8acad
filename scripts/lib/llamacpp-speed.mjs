// llama.cpp's speed on one GGUF file through node-llama-cpp, for
// scripts/llamacpp-bench.sh (which sets NODE_LLAMA_CPP_MODULE):
//
//   node llamacpp-speed.mjs MODEL.gguf PROMPT_FILE TOKENS THREADS
//
// prints one JSON line: prompt_tokens (PROMPT_FILE's text, BOS first),
// prompt_ms (evaluating the prompt as one batch, up to the first token's
// logits), prompt_tps, tokens (generated, greedy) and decode_tps (the
// tokens after the first over the time after it). CPU only, the prebuilt
// libraries (never a build or a download), an F16 KV cache and flash
// attention as llama.cpp chooses (its own defaults: what a user gets).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modelPath, promptFile, tokensArg, threadsArg] = process.argv.slice(2);
const threads = Number(threadsArg || 1), want = Number(tokensArg || 64);
const { getLlama, LlamaLogLevel } = await import(
  pathToFileURL(path.join(process.env.NODE_LLAMA_CPP_MODULE, "dist", "index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: 1024, batchSize: 512, threads: { ideal: threads, min: threads } });
const seq = context.getSequence();
const tokens = [model.tokens.bos, ...model.tokenize(fs.readFileSync(promptFile, "utf8"), false)];
const start = performance.now();
let count = 0, first = 0;
for await (const t of seq.evaluate(tokens, { temperature: 0 })) {
  count++;
  if (count === 1) first = performance.now();
  if (count >= want) break;
}
const end = performance.now();
console.log(JSON.stringify({
  model: path.basename(modelPath), threads, prompt_tokens: tokens.length,
  prompt_ms: first - start, prompt_tps: tokens.length / ((first - start) / 1000),
  tokens: count, decode_tps: (count - 1) / ((end - first) / 1000),
}));
