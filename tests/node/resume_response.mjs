// A background response through the official `openai` npm package: created, streamed for a
// few events, left, then resumed with `starting_after`, as a client that lost its connection.
// Usage: node resume_response.mjs BASE_URL API_KEY
// Prints one JSON line: {id, created_status, first, rest, text, final}.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });

const created = await client.responses.create({
  model: "demo/fast",
  input: "resume from node",
  background: true,
  demo_tokens: 30,
});

const first = [];
const stream = await client.responses.retrieve(created.id, { stream: true });
for await (const event of stream) {
  first.push({ n: event.sequence_number, type: event.type, delta: event.delta ?? null });
  if (first.filter((e) => e.type === "response.output_text.delta").length === 3) break;
}

const cut = first[first.length - 1].n;
const rest = [];
let final = null;
const resumed = await client.responses.retrieve(created.id, { stream: true, starting_after: cut });
for await (const event of resumed) {
  rest.push({ n: event.sequence_number, type: event.type, delta: event.delta ?? null });
  if (event.type === "response.completed") final = event.response;
}
const text = [...first, ...rest]
  .filter((e) => e.type === "response.output_text.delta")
  .map((e) => e.delta)
  .join("");
console.log(
  JSON.stringify({
    id: created.id,
    created_status: created.status,
    first,
    rest,
    text,
    final: final && { status: final.status, output_text: final.output_text ?? null, output: final.output },
  }),
);
