// One webhook delivery verified by the official `openai` npm package's `webhooks.unwrap`.
// Usage: node webhook_unwrap.mjs < {"body": "<raw body>", "headers": {...}, "secret": "whsec_...",
// "wrong_secret": "whsec_..."}
// Prints one JSON line: {event, wrong_rejected, wrong_error}.
import OpenAI from "openai";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { body, headers, secret, wrong_secret: wrongSecret } = JSON.parse(input);

const client = new OpenAI({ apiKey: "unused", baseURL: "http://127.0.0.1:9/v1" });
const event = await client.webhooks.unwrap(body, headers, secret);
let wrongError = null;
try {
  await client.webhooks.unwrap(body, headers, wrongSecret);
} catch (err) {
  wrongError = err.constructor.name;
}
console.log(JSON.stringify({ event, wrong_rejected: wrongError !== null, wrong_error: wrongError }));
