// The AI SDK's own client (`ai`: DefaultChatTransport, readUIMessageStream) against genq's
// /v1/ui/chat routes, as useChat drives them.
// Usage: node ui_chat.mjs BASE_URL API_KEY SCENARIO OPTIONS_JSON
// OPTIONS: {chatId, model, prompt, params?, tools?, stopAfter?, abortAfter?, readyAfter?}
// Prints one JSON line per progress point ({"progress": ...}) and the result last.
// Scenarios:
//   whole    one answer; then reconnectToStream (null once it completed)
//   resume   the connection aborted after `abortAfter` characters, then reconnectToStream
//   stop     the stop route called after `stopAfter` text chunks: how long until the stream ended
//   tool     a tool call, then the message sent back with the tool's output
//   restart  prints {"progress": "ready"} after `readyAfter` characters (the test then kills
//            the worker) and reads the answer to its end
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [baseURL, apiKey, scenario, optionsJSON] = process.argv.slice(2);
const options = JSON.parse(optionsJSON ?? "{}");
const api = `${baseURL}/v1/ui/chat`;
const headers = { Authorization: `Bearer ${apiKey}` };
const transport = new DefaultChatTransport({
  api,
  headers,
  body: { model: options.model, params: options.params, tools: options.tools },
});
const chatId = options.chatId;
const asked = { id: "u1", role: "user", parts: [{ type: "text", text: options.prompt }] };

const print = (value) => console.log(JSON.stringify(value));
const textOf = (message) =>
  (message?.parts ?? [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");

function send(messages, abortSignal) {
  return transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal,
  });
}

/** Every chunk's type, and the message readUIMessageStream assembles (continuing `message`). */
async function collect(stream, { message, onChunk } = {}) {
  const [raw, forMessage] = stream.tee();
  const types = [];
  const chunks = (async () => {
    for await (const chunk of raw) {
      types.push(chunk.type);
      await onChunk?.(chunk, types);
    }
  })();
  let last;
  for await (const snapshot of readUIMessageStream({ stream: forMessage, message })) {
    last = snapshot;
  }
  await chunks;
  return { types, message: last };
}

async function whole() {
  const { types, message } = await collect(await send([asked]));
  const after = await transport.reconnectToStream({ chatId });
  print({ types, message, text: textOf(message), reconnected: after !== null });
}

async function resume() {
  const controller = new AbortController();
  let before = "";
  try {
    for await (const snapshot of readUIMessageStream({
      stream: await send([asked], controller.signal),
    })) {
      before = textOf(snapshot);
      if (before.length >= options.abortAfter) {
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") throw error;
  }
  print({ progress: "aborted", before });
  const resumed = await transport.reconnectToStream({ chatId });
  const { types, message } = await collect(resumed);
  const after = await transport.reconnectToStream({ chatId });
  print({ before, types, message, text: textOf(message), reconnected: after !== null });
}

async function stop() {
  let stopping;
  let askedAt = 0;
  const { types, message } = await collect(await send([asked]), {
    onChunk: (chunk, seen) => {
      const texts = seen.filter((type) => type === "text-delta").length;
      if (!stopping && texts >= options.stopAfter) {
        askedAt = performance.now();
        stopping = fetch(`${api}/${chatId}/stop`, { method: "POST", headers });
      }
    },
  });
  const endedMs = performance.now() - askedAt;
  const answer = await stopping;
  const stopped = { status: answer.status, body: await answer.json() };
  const after = await transport.reconnectToStream({ chatId });
  print({ types, message, text: textOf(message), endedMs, stopped, reconnected: after !== null });
}

async function tool() {
  const first = await collect(await send([asked]));
  const call = first.message.parts.find((part) => part.type.startsWith("tool-"));
  const asWas = structuredClone(call);
  Object.assign(call, { state: "output-available", output: { sky: "clear", degrees: 21 } });
  const second = await collect(await send([asked, first.message]), {
    message: structuredClone(first.message),
  });
  print({ first: first.types, call: asWas, second: second.types, message: second.message });
}

async function restart() {
  let ready = false;
  const { types, message } = await collect(await send([asked]), {
    onChunk: (chunk, seen) => {
      const texts = seen.filter((type) => type === "text-delta").length;
      if (!ready && texts >= options.readyAfter) {
        ready = true;
        print({ progress: "ready" });
      }
    },
  });
  print({ types, message, text: textOf(message) });
}

const scenarios = { whole, resume, stop, tool, restart };
await scenarios[scenario]();
