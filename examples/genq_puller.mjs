// genq_puller.mjs: a pull client for genq's "workers anywhere" routes, in plain Node.js 20+
// (ESM, the built-in fetch, no npm package). The same loop as Python's genq_client.Puller.
//
//   import { Puller, RetryJob, TerminalJob } from "./genq_puller.mjs";
//
//   const puller = new Puller("https://genq.example", process.env.GENQ_WORKER_KEY);
//   process.on("SIGTERM", () => puller.stop());        // graceful: running handlers finish
//   await puller.consume("demo", async (job) => {
//     const prompt = job.payload.messages.at(-1).content;
//     for (const word of prompt.split(" ")) {
//       job.emit(`${word} `);                           // streamed to the viewers (SSE)
//       if (job.cancelled) break;                       // the generation was cancelled
//     }
//     return job.text;                                  // acked as {text, model, finish_reason, usage}
//   }, { concurrency: 4, visibility: 60, wait: 20 });
//
// consume(queue, handler, {concurrency = 1, visibility = 60, wait = 20, signal}):
// - long-polls POST /v1/queues/{queue}/pull for as many jobs as it has free slots (`wait`
//   seconds at most per pull) and runs up to `concurrency` handlers at once;
// - the handler gets a job: id, payload, attempt, maxAttempts, queue, receipt, emit(text),
//   progress(0..1), text (emitted so far), cancelled, abandoned. emit and progress only buffer:
//   the buffer is posted to .../jobs/{id}/events, one call at a time, each numbered with `seq`,
//   so a call resent after a lost answer appends nothing twice;
// - while the handler runs, the job's visibility is extended every third of it (an events call
//   renews it too); `cancelled` turns true when the gateway answers cancel_requested;
// - the handler's return is acked with exactly {text, model, finish_reason, usage}: undefined
//   or null acks the emitted text; a string is the whole text (the part not yet emitted is
//   emitted first); an object gives any of the four keys (text: the emitted text, model: the
//   payload's, finish_reason: "stop", usage: null by default);
// - a throw nacks with its message: RetryJob(message, {retryAfter}) chooses the delay in
//   seconds, TerminalJob fails the job without a retry;
// - a 409 (stale receipt: the visibility passed, the job was redelivered or settled) abandons
//   the job quietly (logged, never settled; `abandoned` turns true); a 403 (the key was revoked)
//   abandons it too. The loop goes on;
// - a dropped connection, a 5xx or a 429 is retried with bounded exponential backoff (0.5 s
//   doubling to 30 s, jittered; Retry-After when given). A refused pull (401, 403, 404, 422)
//   ends consume with an Error once the running handlers finished;
// - puller.stop() or aborting `signal` ends consume after the current long poll and every
//   running handler finish.
// Options of new Puller(baseUrl, apiKey, {log, timeoutMs}): log(level, message) receives
// "debug" | "info" | "warning" | "error" lines (default: warnings and errors on stderr).

const MAX_PULL = 100; // jobs one pull may take (the gateway's limit)
const MAX_PIECE = 8000; // characters of one chunk event
const MAX_BATCH_CHARS = 32000; // text per events call: under the gateway's body limit
const MAX_BATCH_EVENTS = 500; // events per call (the gateway's limit)
const MAX_ERROR = 2000;
const MAX_RETRY_AFTER = 86400;

export class RetryJob extends Error {
  constructor(message = "retry requested", { retryAfter = null } = {}) {
    super(message);
    this.name = "RetryJob";
    this.retryAfter = retryAfter;
  }
}

export class TerminalJob extends Error {
  constructor(message) {
    super(message);
    this.name = "TerminalJob";
  }
}

class JobLost extends Error {
  constructor(message, { quiet = false, status = null } = {}) {
    super(message);
    this.quiet = quiet;
    this.status = status;
  }
}

class Unavailable extends Error {
  constructor(message, retryAfter = null) {
    super(message);
    this.retryAfter = retryAfter;
  }
}

const transient = (status) => status === 429 || status >= 500;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Sleeps ms, or less when `until` settles first; the timer never outlives the wait (a pending
// timer would keep Node running after consume returned).
const sleepUnless = async (ms, until) => {
  let timer;
  try {
    await Promise.race([until, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
};
const backoff = (failures) => Math.min(30, 2 ** Math.min(failures, 5)) * (0.5 + Math.random() / 2);
const retryAfterOf = (response) => {
  const value = Number.parseFloat(response.headers.get("retry-after") ?? "");
  return Number.isFinite(value) ? Math.min(value, 60) : null;
};
const detailOf = async (response) => {
  const text = await response.text();
  try {
    return JSON.parse(text).detail;
  } catch {
    return text.slice(0, 200);
  }
};

const defaultLog = (level, message) => {
  if (level === "warning" || level === "error") console.error(`genq_puller ${level}: ${message}`);
};

/** One attempt of a pulled job, handed to the handler. */
class PulledJob {
  constructor(queue, body, visibility) {
    this.queue = queue;
    this.id = body.id;
    this.receipt = body.receipt;
    this.attempt = body.attempt;
    this.maxAttempts = body.max_attempts;
    this.payload = body.payload;
    this.visibility = visibility;
    this.heldAt = performance.now(); // when the last call that renewed the visibility was sent
    this._pending = [];
    this._text = [];
    this._sent = 0;
    this._closed = false;
    this._cancelled = false;
    this._abandoned = null;
    this._wake = null;
    this._done = new Promise((resolve) => (this._finish = resolve)); // the handler returned
  }

  get cancelled() {
    return this._cancelled;
  }

  get abandoned() {
    return this._abandoned !== null;
  }

  /** Everything emitted so far. */
  get text() {
    return this._text.join("");
  }

  get deadline() {
    return this.heldAt + this.visibility * 1000;
  }

  /** Appends text to the output (a chunk event); returns at once. */
  emit(text) {
    if (typeof text !== "string") throw new TypeError("emit takes a string");
    if (!text || this._closed) return;
    this._text.push(text);
    for (let start = 0; start < text.length; start += MAX_PIECE) {
      const piece = text.slice(start, start + MAX_PIECE);
      const last = this._pending.at(-1);
      if (last?.type === "chunk" && last.data.length + piece.length <= MAX_PIECE) last.data += piece;
      else this._pending.push({ type: "chunk", data: piece });
    }
    this._notify();
  }

  /** Reports progress from 0 to 1 (a progress event); returns at once. */
  progress(fraction) {
    if (typeof fraction !== "number" || !(fraction >= 0 && fraction <= 1)) {
      throw new RangeError("progress must be a number from 0 to 1");
    }
    if (this._closed) return;
    const last = this._pending.at(-1);
    if (last?.type === "progress") last.data = fraction; // only the latest matters
    else this._pending.push({ type: "progress", data: fraction });
    this._notify();
  }

  _notify() {
    const wake = this._wake;
    this._wake = null;
    wake?.();
  }

  _woken() {
    return new Promise((resolve) => {
      this._wake = resolve;
    });
  }

  _takeBatch() {
    if (this._cancelled || this.abandoned) this._pending = [];
    const batch = [];
    let chars = 0;
    while (this._pending.length && batch.length < MAX_BATCH_EVENTS) {
      const size = this._pending[0].type === "chunk" ? this._pending[0].data.length : 0;
      if (batch.length && chars + size > MAX_BATCH_CHARS) break;
      batch.push(this._pending.shift());
      chars += size;
    }
    return { seq: this._sent + 1, batch };
  }

  _close() {
    this._closed = true;
    this._notify();
  }

  _abandon(reason) {
    if (this._abandoned !== null) return false;
    this._abandoned = reason;
    this._notify();
    return true;
  }
}

function resultOf(job, returned) {
  const keys = ["text", "model", "finish_reason", "usage"];
  let fields;
  if (returned === undefined || returned === null) fields = {};
  else if (typeof returned === "string") fields = { text: returned };
  else if (typeof returned === "object" && !Array.isArray(returned)) {
    fields = returned;
    const unknown = Object.keys(fields).filter((key) => !keys.includes(key));
    if (unknown.length) throw new TypeError(`a handler's result has only ${keys}; not ${unknown}`);
  } else throw new TypeError(`a handler returns nothing, a string or an object of ${keys}`);
  const emitted = job.text;
  const text = fields.text ?? emitted;
  if (typeof text !== "string") throw new TypeError("a result's text is a string");
  for (const key of ["model", "finish_reason"]) {
    if (fields[key] != null && typeof fields[key] !== "string") {
      throw new TypeError(`a result's ${key} is a string or null`);
    }
  }
  if (fields.usage != null && (typeof fields.usage !== "object" || Array.isArray(fields.usage))) {
    throw new TypeError("a result's usage is an object or null");
  }
  if (text.startsWith(emitted)) job.emit(text.slice(emitted.length));
  const model = job.payload && typeof job.payload === "object" ? job.payload.model : null;
  return {
    text,
    model: fields.model ?? model ?? null,
    finish_reason: fields.finish_reason ?? "stop",
    usage: fields.usage ?? null,
  };
}

function nackBody(error) {
  const message = String(error?.message || error?.name || error || "error").slice(0, MAX_ERROR);
  const body = { error: message };
  if (error instanceof TerminalJob) body.terminal = true;
  else if (error instanceof RetryJob && error.retryAfter != null) {
    body.retry_after = Math.min(Math.max(0, Number(error.retryAfter)), MAX_RETRY_AFTER);
  }
  return body;
}

export class Puller {
  constructor(baseUrl, apiKey, { log = defaultLog, timeoutMs = 30000 } = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" };
    this.log = log;
    this.timeoutMs = timeoutMs;
    this._stopRequested = false;
    this._stops = new Set();
  }

  /** Ends every consume once its current long poll and its running handlers finish. */
  stop() {
    this._stopRequested = true;
    for (const stop of this._stops) stop();
  }

  async consume(queue, handler, { concurrency = 1, visibility = 60, wait = 20, signal } = {}) {
    if (!(concurrency >= 1)) throw new RangeError("concurrency must be at least 1");
    if (!(visibility >= 1 && visibility <= 3600)) throw new RangeError("visibility: 1-3600 s");
    if (!(wait >= 0 && wait <= 20)) throw new RangeError("wait: 0-20 s");
    let stopping = this._stopRequested || Boolean(signal?.aborted);
    let wakeStop = () => {};
    const stopped = new Promise((resolve) => {
      wakeStop = resolve;
    });
    const stop = () => {
      stopping = true;
      wakeStop();
    };
    this._stops.add(stop);
    signal?.addEventListener("abort", stop, { once: true });
    const running = new Set();
    let failures = 0;
    try {
      while (!stopping) {
        const free = concurrency - running.size;
        if (free <= 0) {
          await Promise.race([stopped, ...running]);
          continue;
        }
        let jobs;
        try {
          jobs = await this._pull(queue, Math.min(free, MAX_PULL), visibility, wait);
        } catch (error) {
          if (!(error instanceof Unavailable)) throw error;
          const delay = error.retryAfter || backoff(failures);
          failures += 1;
          this.log("warning", `pull from ${queue} failed (${error.message}); again in ${delay.toFixed(1)} s`);
          await sleepUnless(delay * 1000, stopped);
          continue;
        }
        if (failures) this.log("info", `pull from ${queue} works again`);
        failures = 0;
        for (const body of jobs) {
          const work = this._work(new PulledJob(queue, body, visibility), handler);
          running.add(work);
          work.then(() => running.delete(work));
        }
      }
    } finally {
      await Promise.allSettled([...running]);
      this._stops.delete(stop);
      signal?.removeEventListener("abort", stop);
      if (!this._stops.size) this._stopRequested = false;
    }
  }

  async _pull(queue, count, visibility, wait) {
    let response;
    try {
      response = await fetch(`${this.baseUrl}/v1/queues/${encodeURIComponent(queue)}/pull`, {
        method: "POST",
        headers: this.headers,
        body: JSON.stringify({ max: count, visibility, wait }),
        signal: AbortSignal.timeout(Math.round(wait * 1000 + this.timeoutMs)),
      });
    } catch (error) {
      throw new Unavailable(String(error?.cause?.code ?? error?.message ?? error));
    }
    if (transient(response.status)) {
      await response.body?.cancel();
      throw new Unavailable(`HTTP ${response.status}`, retryAfterOf(response));
    }
    if (!response.ok) {
      throw new Error(`pull from ${queue}: HTTP ${response.status}: ${JSON.stringify(await detailOf(response))}`);
    }
    return (await response.json()).jobs;
  }

  async _work(job, handler) {
    const holding = (work) => work.catch((error) => this._lose(job, error));
    const flusher = holding(this._flush(job));
    const extender = holding(this._extend(job));
    try {
      const [action, body] = await this._run(job, handler);
      job._close();
      job._finish();
      await Promise.all([flusher, extender]); // an extend in flight ends before the settle
      if (job.abandoned) return;
      const reply = await this._settle(job, action, body);
      this.log("info", `job ${job.id} attempt ${job.attempt}: ${reply.status}`);
    } catch (error) {
      this._lose(job, error);
    } finally {
      job._close();
      job._finish();
    }
  }

  // Acks or nacks. A result the gateway refuses (422: not a generation's result) fails the job
  // now: every attempt would return it the same way.
  async _settle(job, action, body) {
    try {
      return await this._call(job, action, body);
    } catch (error) {
      if (action !== "ack" || !(error instanceof JobLost) || error.status !== 422) throw error;
      this.log("error", `job ${job.id} attempt ${job.attempt}: the result was refused (${error.message})`);
      return await this._call(job, "nack", nackBody(new TerminalJob(`the worker's result was refused: ${error.message}`)));
    }
  }

  async _run(job, handler) {
    let returned;
    try {
      returned = await handler(job);
    } catch (error) {
      const kind = error instanceof TerminalJob ? "fails for good" : error instanceof RetryJob ? "asks for a retry" : "failed";
      const why = kind === "failed" ? (error?.stack ?? error) : error.message;
      if (!job.abandoned) this.log(kind === "failed" ? "warning" : "info", `job ${job.id} attempt ${job.attempt} ${kind}: ${why}`);
      return ["nack", nackBody(error)];
    }
    try {
      return ["ack", { result: resultOf(job, returned) }];
    } catch (error) {
      this.log("error", `job ${job.id} attempt ${job.attempt}: ${error.message}`);
      return ["nack", nackBody(new TerminalJob(error.message))]; // every attempt would do the same
    }
  }

  // A job that is no longer this worker's: a stale receipt (quiet), a refusal, or a bug.
  _lose(job, error) {
    const lost = error instanceof JobLost;
    if (job._abandon(error?.message ?? String(error))) {
      const level = !lost ? "error" : error.quiet ? "info" : "warning";
      this.log(level, `job ${job.id} attempt ${job.attempt} abandoned: ${lost ? error.message : error?.stack ?? error}`);
    }
  }

  // Posts what the handler emits, in order, one call at a time: each call's seq numbers its
  // first event, so a call resent after a lost answer appends nothing twice.
  async _flush(job) {
    for (;;) {
      const woken = job._woken();
      while (!job.abandoned) {
        const { seq, batch } = job._takeBatch();
        if (!batch.length) break;
        const reply = await this._call(job, "events", { events: batch, seq });
        job._sent += batch.length;
        if (reply.cancel_requested) job._cancelled = true;
      }
      if (job._closed || job.abandoned) return;
      await woken;
    }
  }

  // Holds the job while its handler runs: an extend once a third of the visibility passed
  // since the last call that renewed it (an events call renews it too).
  async _extend(job) {
    let handled = false;
    job._done.then(() => (handled = true));
    while (!handled && !job.abandoned) {
      const due = job.heldAt + (job.visibility * 1000) / 3;
      const now = performance.now();
      if (now < due) {
        await sleepUnless(due - now, job._done);
        continue;
      }
      const reply = await this._call(job, "extend", { visibility: job.visibility });
      if (reply.cancel_requested) job._cancelled = true;
    }
  }

  // POSTs to the job's route, resending after a dropped connection, a 5xx or a 429 until the
  // visibility held when it was first sent runs out (the receipt is dead then, and the job
  // goes back in line by itself).
  async _call(job, action, body) {
    const path = `/v1/queues/${encodeURIComponent(job.queue)}/jobs/${encodeURIComponent(job.id)}/${action}`;
    const payload = JSON.stringify({ receipt: job.receipt, ...body });
    const giveUpAt = job.deadline; // fixed: an extend that works must not keep a failing call going
    for (let failures = 0; ; failures += 1) {
      const sentAt = performance.now();
      let problem;
      let retryAfter = null;
      try {
        const response = await fetch(`${this.baseUrl}${path}`, {
          method: "POST",
          headers: this.headers,
          body: payload,
          signal: AbortSignal.timeout(Math.round(Math.min(this.timeoutMs, Math.max(1000, job.deadline - sentAt)))),
        });
        if (response.ok) {
          if (action === "events" || action === "extend") job.heldAt = Math.max(job.heldAt, sentAt);
          return await response.json();
        }
        if (response.status === 409) throw new JobLost(`${action}: ${await detailOf(response)}`, { quiet: true });
        if (!transient(response.status)) {
          const detail = JSON.stringify(await detailOf(response));
          throw new JobLost(`${action}: HTTP ${response.status}: ${detail}`, { status: response.status });
        }
        await response.body?.cancel();
        problem = `HTTP ${response.status}`;
        retryAfter = retryAfterOf(response);
      } catch (error) {
        if (error instanceof JobLost) throw error;
        problem = String(error?.cause?.code ?? error?.message ?? error);
      }
      const delay = retryAfter || backoff(failures);
      if (performance.now() + delay * 1000 >= giveUpAt) {
        throw new JobLost(`${action}: no answer before the visibility ran out (${problem})`);
      }
      this.log("debug", `job ${job.id}: ${action} failed (${problem}); again in ${delay.toFixed(1)} s`);
      await sleep(delay * 1000);
    }
  }
}
