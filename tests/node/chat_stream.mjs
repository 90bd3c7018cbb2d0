// A streamed chat completion through the official `openai` npm package, pointed at genq.
// Usage: node chat_stream.mjs BASE_URL API_KEY
// Prints one JSON line: {id, text, roles, finish_reasons, usage, chunks}.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });

const stream = await client.chat.completions.create({
  model: "demo/fast",
  messages: [{ role: "user", content: "hello from node" }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
const ids = new Set();
const roles = [];
const finishReasons = [];
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  ids.add(chunk.id);
  for (const choice of chunk.choices) {
    if (choice.delta.role) roles.push(choice.delta.role);
    if (choice.delta.content) text += choice.delta.content;
    if (choice.finish_reason) finishReasons.push(choice.finish_reason);
  }
  if (chunk.usage) usage = chunk.usage;
}
console.log(JSON.stringify({ ids: [...ids], text, roles, finish_reasons: finishReasons, usage, chunks }));
