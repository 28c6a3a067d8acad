// Chat templates rendered as node-llama-cpp renders a GGUF's own
// (JinjaTemplateChatWrapper, with @huggingface/jinja), for
// `scripts/llamacpp.sh chat`, which sets JINJA_MODULE to the package's
// directory. Reads a JSON object a line on stdin:
//   {"template", "messages", "bos_token", "eos_token", "add_generation_prompt"}
// and writes a JSON line for each: {"text"} or, where the template raised
// or did not parse, {"error"}.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import path from "node:path";
import fs from "node:fs";

const dir = process.env.JINJA_MODULE;
if (!dir) throw new Error("JINJA_MODULE is not set");
const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
const entry = pkg.exports?.["."]?.import ?? pkg.module ?? pkg.main;
const { Template } = await import(pathToFileURL(path.join(dir, typeof entry === "string" ? entry : entry.default)).href);

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const q = JSON.parse(line);
  let out;
  try {
    const text = new Template(q.template).render({
      messages: q.messages,
      bos_token: q.bos_token ?? "",
      eos_token: q.eos_token ?? "",
      add_generation_prompt: q.add_generation_prompt ?? true,
    });
    out = { text };
  } catch (e) {
    out = { error: String(e?.message ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
