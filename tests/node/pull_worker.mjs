// A genq worker in plain Node.js (20+): no npm package, only the built-in `fetch`.
// It pulls generations from a gateway queue, "generates" by echoing the prompt word by word
// (it calls no provider), streams each word as a chunk through /events, and acks the result.
//
// Usage: node pull_worker.mjs BASE_URL WORKER_KEY QUEUE [options]
//   --visibility S   seconds each pulled job stays held (default 30)
//   --wait S         long-poll wait per pull (default 10)
//   --delay-ms N     pause between words (default 50)
//   --jobs N         exit after acking N jobs (default: run forever)
//   --hang-after N   after N chunks of a job, stop working on it (to be killed mid-job)
// Prints one JSON line per step: {"ev": "pulled" | "chunk" | "hanging" | "acked" | "stale"}.

const [baseUrl, apiKey, queue, ...rest] = process.argv.slice(2);
const option = (name, fallback) => {
  const at = rest.indexOf(`--${name}`);
  return at >= 0 ? Number(rest[at + 1]) : fallback;
};
const visibility = option("visibility", 30);
const wait = option("wait", 10);
const delayMs = option("delay-ms", 50);
const maxJobs = option("jobs", Infinity);
const hangAfter = option("hang-after", Infinity);

const log = (marker) => console.log(JSON.stringify(marker));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class StaleReceipt extends Error {}

async function call(path, body) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const reply = await response.json();
  if (response.status === 409) throw new StaleReceipt(reply.detail);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(reply)}`);
  return reply;
}

function promptOf(payload) {
  if (typeof payload.prompt === "string") return payload.prompt;
  const users = payload.messages.filter((m) => m.role === "user");
  return String(users[users.length - 1]?.content ?? "");
}

async function work(job) {
  const jobPath = `/v1/queues/${queue}/jobs/${job.id}`;
  const words = promptOf(job.payload).split(" ");
  let text = "";
  for (const [i, word] of words.entries()) {
    if (i >= hangAfter) {
      log({ ev: "hanging", id: job.id, attempt: job.attempt, chunks: i });
      await new Promise(() => {}); // never settles: the test kills this process
    }
    const piece = i < words.length - 1 ? `${word} ` : word;
    const { cancel_requested } = await call(`${jobPath}/events`, {
      receipt: job.receipt,
      events: [{ type: "chunk", data: piece }],
      seq: i + 1, // this attempt's events so far + 1: a resent call appends nothing twice
    });
    if (cancel_requested) break;
    text += piece;
    log({ ev: "chunk", id: job.id, attempt: job.attempt, i });
    await sleep(delayMs);
  }
  const result = { text, model: job.payload.model, finish_reason: "stop", usage: null };
  const { status } = await call(`${jobPath}/ack`, { receipt: job.receipt, result });
  log({ ev: "acked", id: job.id, attempt: job.attempt, status });
}

let acked = 0;
while (acked < maxJobs) {
  const { jobs } = await call(`/v1/queues/${queue}/pull`, { max: 1, visibility, wait });
  for (const job of jobs) {
    log({ ev: "pulled", id: job.id, attempt: job.attempt });
    try {
      await work(job);
      acked += 1;
    } catch (error) {
      if (!(error instanceof StaleReceipt)) throw error;
      log({ ev: "stale", id: job.id, detail: error.message }); // redelivered elsewhere
    }
  }
}
