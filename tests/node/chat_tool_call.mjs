// A streamed chat completion with tools through the official `openai` npm package, pointed at
// genq (whose openai provider the test points at a fake server that answers with tool calls).
// Usage: node chat_tool_call.mjs BASE_URL API_KEY
// Prints one JSON line: {ids, calls, finish_reasons, final_calls}: the calls as reassembled from
// the deltas by index, and as the SDK's stream helper reassembles them.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
const request = {
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "Weather in Paris, time in Oslo?" }],
  tools: ["get_weather", "get_time"].map((name) => ({
    type: "function",
    function: { name, parameters: { type: "object" } },
  })),
};

const stream = await client.chat.completions.create({ ...request, stream: true });
const ids = new Set();
const calls = {};
const finishReasons = [];
for await (const chunk of stream) {
  ids.add(chunk.id);
  for (const choice of chunk.choices) {
    for (const piece of choice.delta.tool_calls ?? []) {
      const call = (calls[piece.index] ??= { id: "", name: "", arguments: "" });
      if (piece.id) [call.id, call.name] = [piece.id, piece.function.name];
      call.arguments += piece.function?.arguments ?? "";
    }
    if (choice.finish_reason) finishReasons.push(choice.finish_reason);
  }
}

const runner = client.chat.completions.stream(request);
const final = await runner.finalChatCompletion();
const finalCalls = final.choices[0].message.tool_calls.map((c) => ({
  id: c.id,
  name: c.function.name,
  arguments: c.function.arguments,
}));
console.log(
  JSON.stringify({
    ids: [...ids],
    calls: Object.values(calls),
    finish_reasons: finishReasons,
    final_calls: finalCalls,
  }),
);
