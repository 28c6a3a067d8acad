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
  check(models.data.length === 1 && models.data[0].id === "stories260K", "models.list: stories260K");

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
