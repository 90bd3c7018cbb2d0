// Drives examples/genq_puller.mjs for tests/gateway/test_puller.py: a handler steered by each
// job's metadata, exactly as the Python one of tests/gateway/pullers.py (see its `Steering`).
//
// Usage: node puller_driver.mjs BASE_URL KEY QUEUE '{"concurrency": 1, "visibility": 30, "wait": 2}'
// Prints one JSON line per step: {"ev": "start" | "end" | "log" | "stopped" | "error", ...}.
// SIGTERM stops the loop gracefully (puller.stop()).

import { Puller, RetryJob, TerminalJob } from "../../examples/genq_puller.mjs";

const [baseUrl, apiKey, queue, options] = process.argv.slice(2);
const print = (marker) => console.log(JSON.stringify(marker));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let inFlight = 0;
let peak = 0; // the most handlers that ran at once so far

async function until(check, what) {
  const deadline = Date.now() + 20000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function promptOf(payload) {
  if (typeof payload.prompt === "string") return payload.prompt;
  return String(payload.messages.filter((m) => m.role === "user").at(-1)?.content ?? "");
}

async function steer(job, meta) {
  const mode = meta.mode ?? "echo";
  if (mode === "retry" && job.attempt === 1) throw new RetryJob("busy", { retryAfter: meta.retry_after });
  if (mode === "fail") throw new Error(meta.message);
  if (mode === "terminal") throw new TerminalJob(meta.message);
  if (mode === "barrier") await until(() => peak >= meta.n, "the barrier");
  if (mode === "hold") await sleep(meta.seconds * 1000);
  if (mode === "until_cancel") await until(() => job.cancelled, "the cancel");
  if (mode === "until_abandoned" && job.attempt === 1) {
    await until(() => job.abandoned, "the abandon");
    return null;
  }
  if (mode === "parts") for (const [type, data] of JSON.parse(meta.parts)) job.emit(data, type);
  if (mode === "result" || mode === "parts") return meta.result === undefined ? null : JSON.parse(meta.result);
  const prompt = promptOf(job.payload);
  if (mode === "return") return prompt;
  const words = prompt.split(" ");
  for (const [i, word] of words.entries()) job.emit(i < words.length - 1 ? `${word} ` : word);
  job.progress(1);
  return null;
}

async function handle(job) {
  const meta = job.payload.metadata ?? {};
  print({ ev: "start", id: job.id, attempt: job.attempt, t: Date.now(), receipt: job.receipt });
  inFlight += 1;
  peak = Math.max(peak, inFlight);
  try {
    return await steer(job, meta);
  } finally {
    inFlight -= 1;
    print({ ev: "end", id: job.id, attempt: job.attempt, t: Date.now(), cancelled: job.cancelled, abandoned: job.abandoned });
  }
}

const puller = new Puller(baseUrl, apiKey, { log: (level, message) => print({ ev: "log", level, message }) });
process.on("SIGTERM", () => puller.stop());
try {
  await puller.consume(queue, handle, JSON.parse(options));
  print({ ev: "stopped" });
} catch (error) {
  print({ ev: "error", message: error.message });
  process.exitCode = 1;
}
