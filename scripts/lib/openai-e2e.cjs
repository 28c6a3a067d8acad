// The checks of scripts/openai-e2e.sh, with OpenAI's official npm client:
// node openai-e2e.cjs GOLDEN.jsonl, with OPENAI_MODULE (the package's
// directory), OPENAI_BASE_URL and OPENAI_API_KEY set. Exits 1 on the first
// failed check.
const fs = require("fs");
const OpenAI = require(process.env.OPENAI_MODULE).default;

const goldens = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(JSON.parse);
const golden = (prompt) => {
  const g = goldens.find((g) => g.model === "stories260K.bin" && g.prompt === prompt && g.temperature === 0);
  if (!g) throw new Error(`no greedy golden of ${JSON.stringify(prompt)}`);
  return g;
};
const client = new OpenAI({ maxRetries: 0 });
let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed = true;
};

async function main() {
  const models = await client.models.list();
  const ids = models.data.map((m) => m.id).sort();
  check(ids.join(",") === "llama3-scripted,stories260K", `models.list: ${ids}`);

  const g = golden("Once upon a time");
  const stream = await client.completions.create({
    model: "stories260K", prompt: g.prompt, max_tokens: g.max_tokens, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let text = "", chunks = 0, usage = null, finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
    chunks++;
  }
  check(text === g.completion, `streamed completion (${chunks} chunks) is run.c's greedy text`);
  check(usage && usage.prompt_tokens === g.prompt_tokens && usage.completion_tokens === g.completion_tokens &&
    usage.total_tokens === g.prompt_tokens + g.completion_tokens, `usage ${JSON.stringify(usage)}`);
  check(finish === (g.stop === "bos" ? "stop" : "length"), `finish_reason ${finish}`);

  const system = "You tell stories to children.", user = "Tell me a story about a cat.";
  const cg = golden(`[INST] <<SYS>>\n${system}\n<</SYS>>\n\n${user} [/INST]`);
  const chat = await client.chat.completions.create({
    model: "stories260K", messages: [{ role: "system", content: system }, { role: "user", content: user }],
    max_completion_tokens: cg.max_tokens, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let reply = "", role = null, chatUsage = null;
  for await (const chunk of chat) {
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      reply += c.delta.content || "";
    }
    if (chunk.usage) chatUsage = chunk.usage;
  }
  check(role === "assistant" && reply === cg.completion, "streamed chat completion is run.c's greedy text");
  check(chatUsage && chatUsage.completion_tokens === cg.completion_tokens, `chat usage ${JSON.stringify(chatUsage)}`);

  // Sampling terms and logprobs, whole.
  const base = { model: "stories260K", prompt: g.prompt, max_tokens: g.max_tokens, temperature: 0 };
  const k = g.completion.indexOf(" the ");
  const stopped = await client.completions.create({ ...base, stop: [" the "] });
  check(k > 0 && stopped.choices[0].text === g.completion.slice(0, k) && stopped.choices[0].finish_reason === "stop",
    `stop " the ": ${JSON.stringify(stopped.choices[0].text)}`);
  const topK = await client.completions.create({ ...base, temperature: 1, seed: 3, top_k: 1 });
  check(topK.choices[0].text === g.completion, "top_k 1 at temperature 1 is greedy");
  const pen = await client.completions.create({ ...base, frequency_penalty: 1, presence_penalty: 0.5 });
  check(pen.choices[0].text !== g.completion, "penalties change the greedy text");
  const lp = await client.completions.create({ ...base, logprobs: 2 });
  const l = lp.choices[0].logprobs;
  check(l && l.tokens.join("") === g.completion && l.token_logprobs.length === g.completion_tokens &&
    l.top_logprobs.every((top, i) => Object.keys(top).length <= 2 && top[l.tokens[i]] === l.token_logprobs[i]),
  `logprobs 2: ${l && l.tokens.length} tokens, the most likely each`);

  // A Llama 3 style chat (its template and special tokens), streamed, whose
  // answer holds an emoji spelled in four byte tokens.
  const script = process.env.SCRIPT;
  const l3 = await client.chat.completions.create({
    model: "llama3-scripted", messages: [{ role: "system", content: "You are kind." }, { role: "user", content: "Say hi." }],
    temperature: 0, max_completion_tokens: 40, stream: true, logprobs: true, top_logprobs: 1,
  });
  const pieces = [], bytes = [];
  let l3finish = null;
  for await (const chunk of l3) {
    for (const c of chunk.choices) {
      if (c.delta.content) pieces.push(c.delta.content);
      for (const e of (c.logprobs && c.logprobs.content) || []) bytes.push(...e.bytes);
      if (c.finish_reason) l3finish = c.finish_reason;
    }
  }
  check(pieces.join("") === script && pieces.includes("😀") && l3finish === "stop",
    `Llama 3 chat streamed ${JSON.stringify(pieces)}, finish ${l3finish}`);
  check(Buffer.from(bytes).toString("utf8") === script, "Llama 3 chat: the logprobs' bytes spell the answer");

  const expectError = async (what, call, status, code) => {
    try {
      await call();
      check(false, `${what}: no error`);
    } catch (e) {
      const ok = e instanceof OpenAI.APIError && e.status === status && e.error && e.error.message &&
        (code === undefined || e.code === code);
      check(ok, `${what}: ${e.status} ${e.code || ""} ${e.message}`);
    }
  };
  await expectError("unknown model", () => client.completions.create({ model: "gpt-9", prompt: "hi" }), 404, "model_not_found");
  await expectError("max_tokens over the cap",
    () => client.completions.create({ model: "stories260K", prompt: "hi", max_tokens: 100000 }), 400);
  const res = await fetch(`${process.env.OPENAI_BASE_URL}/completions`, {
    method: "POST", headers: { Authorization: `Bearer ${process.env.OPENAI_API_KEY}`, "Content-Type": "application/json" },
    body: '{"model": "stories260K", "prompt": ',
  });
  const body = await res.json();
  check(res.status === 400 && body.error && body.error.code === "invalid_json" && body.error.message,
    `bad JSON: ${res.status} ${JSON.stringify(body)}`);
}

main().then(() => process.exit(failed ? 1 : 0), (e) => { console.error(e); process.exit(1); });
