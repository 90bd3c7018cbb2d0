// A streamed response with a function call through the official `openai` npm package, pointed
// at genq (whose openai provider the test points at a fake server that answers with a call):
// once with the SDK's stream helper (client.responses.stream + finalResponse()), once as the raw
// event stream of client.responses.create({stream: true}).
// Usage: node responses_tool_call.mjs BASE_URL API_KEY
// Prints one JSON line: {helper, raw}, each {id, numbers, types, arguments_deltas, done, calls,
// output_types}: the sequence numbers and event types in order, the argument pieces, the
// arguments of each response.function_call_arguments.done, and the function_call items of the
// final response (the helper's accumulated one; the raw stream's response.completed).
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
const request = {
  model: "openai/gpt-4o-mini",
  input: "Weather in Paris?",
  tools: [
    {
      type: "function",
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  ],
};

function summary(events, final) {
  const calls = final.output
    .filter((item) => item.type === "function_call")
    .map(({ call_id, name, arguments: args, status }) => ({ call_id, name, arguments: args, status }));
  return {
    id: final.id,
    numbers: events.map((e) => e.sequence_number),
    types: events.map((e) => e.type),
    arguments_deltas: events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta),
    done: events.filter((e) => e.type === "response.function_call_arguments.done").map((e) => e.arguments),
    calls,
    output_types: final.output.map((item) => item.type),
  };
}

const helperEvents = [];
const stream = client.responses.stream(request);
for await (const event of stream) helperEvents.push(event);
const helper = summary(helperEvents, await stream.finalResponse());

const rawEvents = [];
for await (const event of await client.responses.create({ ...request, stream: true })) rawEvents.push(event);
const completed = rawEvents.find((e) => e.type === "response.completed");
const raw = summary(rawEvents, completed.response);

console.log(JSON.stringify({ helper, raw }));
