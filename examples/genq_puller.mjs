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
// - the handler gets a job: id, payload, attempt, maxAttempts, queue, receipt, emit(data, type),
//   progress(0..1), text, reasoning and toolCalls (emitted so far), cancelled, abandoned.
//   emit(text) streams text (a chunk); emit(text, "reasoning") reasoning; a tool call goes as
//   emit({index, id, name}, "tool_call"), emit({index, delta}, "tool_args") for each piece of its
//   JSON arguments and emit({index, id, name, arguments}, "tool_done") (index 0-1023; the ack
//   sends the tool_done of a call that has none). Any other type or shape throws OutputError
//   (a TypeError naming the field), as the gateway would refuse it. emit and progress only
//   buffer: the buffer is posted to .../jobs/{id}/events, one call at a time, each numbered
//   with `seq`, so a call resent after a lost answer appends nothing twice;
// - while the handler runs, the job's visibility is extended every third of it (an events call
//   renews it too); `cancelled` turns true when the gateway answers cancel_requested;
// - the handler's return is acked as {text, model, finish_reason, usage, reasoning?,
//   tool_calls?}: undefined or null acks what was emitted; a string is the whole text (the
//   part not yet emitted is emitted first); an object gives any of those keys (text, reasoning
//   and tool_calls [{id, name, arguments}]: what was emitted, model: the payload's,
//   finish_reason: "tool_calls" when there are calls, else "stop", usage: null by default).
//   A returned text or reasoning that continues the emitted one has its rest emitted, and each
//   call of the result gets its tool_done, so the stream adds up to the result. A result of
//   another shape throws OutputError and fails the job;
// - a throw nacks with its message: RetryJob(message, {retryAfter}) chooses the delay in
//   seconds, TerminalJob (or an OutputError of emit) fails the job without a retry;
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
const MAX_PIECE = 8000; // characters of one text event (chunk, reasoning, a piece of arguments)
const MAX_BATCH_CHARS = 32000; // text per events call: under the gateway's body limit
const MAX_BATCH_EVENTS = 500; // events per call (the gateway's limit)
const MAX_ERROR = 2000;
const MAX_RETRY_AFTER = 86400;
const MAX_TOOL_INDEX = 1023;
const MAX_TOOL_CALLS = 1024;
const RESULT_KEYS = ["text", "model", "finish_reason", "usage", "reasoning", "tool_calls"];
// The generation's parts and their fields, as the gateway checks them (genq_contract.parts).
const PART_FIELDS = {
  tool_call: ["index", "id", "name"],
  tool_args: ["index", "delta"],
  tool_done: ["index", "id", "name", "arguments"],
};
const CALL_FIELDS = ["id", "name", "arguments"];

/** What a handler emitted or returned is not a generation's output; the message names the field. */
export class OutputError extends TypeError {
  constructor(message) {
    super(message);
    this.name = "OutputError";
  }
}

const kindOf = (value) => (value === null ? "null" : Array.isArray(value) ? "array" : typeof value);
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

function checkString(value, where) {
  if (typeof value !== "string") throw new OutputError(`${where} is a string, not ${kindOf(value)}`);
  return value;
}

function checkIndex(value, where) {
  if (!Number.isInteger(value)) throw new OutputError(`${where} is an integer, not ${kindOf(value)}`);
  if (value < 0 || value > MAX_TOOL_INDEX) {
    throw new OutputError(`${where} is from 0 to ${MAX_TOOL_INDEX}, not ${value}`);
  }
  return value;
}

// value's `names` (other keys dropped, as the gateway drops them), each checked.
function checkFields(value, names, what) {
  if (!isObject(value)) throw new OutputError(`${what} is an object of ${names.join(", ")}, not ${kindOf(value)}`);
  const checked = {};
  for (const name of names) {
    if (!(name in value)) throw new OutputError(`${what} has no ${name}`);
    const check = name === "index" ? checkIndex : checkString;
    checked[name] = check(value[name], `${what}'s ${name}`);
  }
  return checked;
}

// data of an event of `type` as the stream will hold it.
function checkPart(type, data) {
  if (type === "chunk" || type === "reasoning") return checkString(data, `a ${type}`);
  const names = Object.hasOwn(PART_FIELDS, type) ? PART_FIELDS[type] : null;
  if (!names) {
    throw new OutputError(`emit takes a type of chunk, reasoning, ${Object.keys(PART_FIELDS).join(", ")}, not ${JSON.stringify(type)}`);
  }
  return checkFields(data, names, `a ${type} part`);
}

// The keys a handler's result gives, checked (tool_calls as a list of {id, name, arguments}).
function checkResult(fields) {
  const unknown = Object.keys(fields).filter((key) => !RESULT_KEYS.includes(key));
  if (unknown.length) throw new OutputError(`a handler's result has only ${RESULT_KEYS}; not ${unknown}`);
  const checked = { ...fields };
  if ("text" in fields) checkString(fields.text, "a result's text");
  for (const key of ["model", "finish_reason", "reasoning"]) {
    if (fields[key] != null) checkString(fields[key], `a result's ${key}`);
  }
  if (fields.usage != null && !isObject(fields.usage)) {
    throw new OutputError(`a result's usage is an object or null, not ${kindOf(fields.usage)}`);
  }
  if ("tool_calls" in fields) {
    const calls = fields.tool_calls;
    if (!Array.isArray(calls)) throw new OutputError(`a result's tool_calls is an array, not ${kindOf(calls)}`);
    if (calls.length > MAX_TOOL_CALLS) {
      throw new OutputError(`a result has at most ${MAX_TOOL_CALLS} tool_calls, not ${calls.length}`);
    }
    checked.tool_calls = calls.map((call, n) => checkFields(call, CALL_FIELDS, `a result's tool_calls[${n}]`));
  }
  return checked;
}

// A text event's data: the text, or a piece of call `index`'s arguments.
const textEvent = (type, text, index) => ({ type, data: index === null ? text : { index, delta: text } });
const indexOf = (event) => (isObject(event.data) ? event.data.index : null);
const textOf = (event) => (isObject(event.data) ? event.data.delta : event.data);
// The text an event carries, counted against MAX_BATCH_CHARS.
const charsOf = (data) =>
  typeof data === "string" ? data.length : isObject(data) ? Object.values(data).reduce((n, v) => n + (typeof v === "string" ? v.length : 0), 0) : 0;

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
    this._reasoning = [];
    this._calls = new Map(); // index -> {id, name, pieces, whole}: the emitted calls, as readers fold them
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

  /** The text emitted so far. */
  get text() {
    return this._text.join("");
  }

  /** The reasoning emitted so far; null when there was none. */
  get reasoning() {
    return this._reasoning.length ? this._reasoning.join("") : null;
  }

  /** The tool calls emitted so far, [{id, name, arguments}], in the order they started. */
  get toolCalls() {
    return [...this._calls.values()].map(({ id, name, pieces, whole }) => ({ id, name, arguments: whole ?? pieces.join("") }));
  }

  get deadline() {
    return this.heldAt + this.visibility * 1000;
  }

  /** Appends data to the generation's output as an event of `type` (see the header); returns at once. */
  emit(data, type = "chunk") {
    const shown = checkPart(type, data);
    if (this._closed || shown === "") return; // no text: no event (and reasoning stays null)
    this._fold(type, shown);
    if (type === "chunk" || type === "reasoning") this._queueText(type, shown, null);
    else if (type === "tool_args") this._queueText(type, shown.delta, shown.index);
    else this._pending.push({ type, data: shown });
    this._notify();
  }

  // The same fold as every reader's (genq_contract.transcript): a call starts once, its pieces
  // add up until a tool_done gives the whole call.
  _fold(type, data) {
    if (type === "chunk") this._text.push(data);
    else if (type === "reasoning") this._reasoning.push(data);
    else {
      const call = this._calls.get(data.index);
      if (type === "tool_call") {
        if (!call) this._calls.set(data.index, { id: data.id, name: data.name, pieces: [], whole: null });
      } else if (type === "tool_args") {
        if (call && call.whole === null) call.pieces.push(data.delta);
      } else if (!call) this._calls.set(data.index, { id: data.id, name: data.name, pieces: [], whole: data.arguments });
      else Object.assign(call, { id: data.id, name: data.name, whole: data.arguments });
    }
  }

  // Queues a text delta (of call `index`'s arguments unless null) in pieces of at most
  // MAX_PIECE, joined to the last pending event of the same type and call.
  _queueText(type, text, index) {
    for (let start = 0; start < text.length; start += MAX_PIECE) {
      const piece = text.slice(start, start + MAX_PIECE);
      const last = this._pending.at(-1);
      if (last?.type === type && indexOf(last) === index && textOf(last).length + piece.length <= MAX_PIECE) {
        Object.assign(last, textEvent(type, textOf(last) + piece, index));
      } else this._pending.push(textEvent(type, piece, index));
    }
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
      const size = charsOf(this._pending[0].data);
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

// Emits the rest of `whole` when it continues what was emitted, so the events add up to the result.
function continueWith(job, type, whole, emitted, log) {
  if (whole.startsWith(emitted)) job.emit(whole.slice(emitted.length), type);
  else {
    const name = type === "chunk" ? "text" : type;
    log("warning", `job ${job.id}: the result's ${name} does not continue the ${name} emitted`);
  }
}

// Ends the stream with `calls`, as the result holds them: the call emitted at the same place
// gets a tool_done unless one already closed it with these fields, and a call never emitted is
// added as a tool_done at an index no emitted call uses.
function closeCalls(job, calls, log) {
  const emitted = [...job._calls.entries()];
  const shown = job.toolCalls;
  let free = 0;
  calls.forEach((call, place) => {
    let index;
    if (place < emitted.length) {
      const [at, state] = emitted[place];
      const same = ["id", "name", "arguments"].every((key) => shown[place][key] === call[key]);
      if (state.whole !== null && same) return;
      index = at;
    } else {
      while (job._calls.has(free)) free += 1;
      index = free;
    }
    job.emit({ index, ...call }, "tool_done");
  });
  if (emitted.length > calls.length) log("warning", `job ${job.id}: the result leaves out tool calls that were emitted`);
}

function resultOf(job, returned, log) {
  let fields;
  if (returned === undefined || returned === null) fields = {};
  else if (typeof returned === "string") fields = { text: returned };
  else if (isObject(returned)) fields = checkResult(returned);
  else throw new OutputError(`a handler returns nothing, a string or an object of ${RESULT_KEYS}, not ${kindOf(returned)}`);
  const text = fields.text ?? job.text;
  continueWith(job, "chunk", text, job.text, log);
  const reasoning = "reasoning" in fields ? fields.reasoning : job.reasoning;
  continueWith(job, "reasoning", reasoning ?? "", job.reasoning ?? "", log);
  const calls = fields.tool_calls ?? job.toolCalls;
  closeCalls(job, calls, log);
  const model = job.payload && typeof job.payload === "object" ? job.payload.model : null;
  const result = {
    text,
    model: fields.model ?? model ?? null,
    finish_reason: fields.finish_reason ?? (calls.length ? "tool_calls" : "stop"),
    usage: fields.usage ?? null,
  };
  if (reasoning != null) result.reasoning = reasoning;
  if (calls.length) result.tool_calls = calls;
  return result;
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
      if (error instanceof OutputError) { // a part every attempt would emit the same wrong way
        this.log("error", `job ${job.id} attempt ${job.attempt}: ${error.message}`);
        return ["nack", nackBody(new TerminalJob(error.message))];
      }
      const kind = error instanceof TerminalJob ? "fails for good" : error instanceof RetryJob ? "asks for a retry" : "failed";
      const why = kind === "failed" ? (error?.stack ?? error) : error.message;
      if (!job.abandoned) this.log(kind === "failed" ? "warning" : "info", `job ${job.id} attempt ${job.attempt} ${kind}: ${why}`);
      return ["nack", nackBody(error)];
    }
    try {
      return ["ack", { result: resultOf(job, returned, this.log) }];
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
