// What both pages share: the event vocabulary of a job's stream, the one rule that turns its
// events into visible text, the fold of a generation's parts (Transcript), the API key kept in
// this browser, one fetch helper that turns the gateway's {"detail": ...} answers into errors,
// event-id ordering and time formatting.

// A job stream's event types (genq_contract.events on the server; a test keeps both equal).
export const EVENT = Object.freeze({
  CHUNK: "chunk",
  REASONING: "reasoning",
  TOOL_CALL: "tool_call",
  TOOL_ARGS: "tool_args",
  TOOL_DONE: "tool_done",
  PROGRESS: "progress",
  RESTARTED: "restarted",
  COMPLETED: "completed",
  FAILED: "failed",
  CANCELLED: "cancelled",
});
export const EVENT_TYPES = Object.freeze(Object.values(EVENT));
// The terminal events, which are also the final statuses of a job record.
export const TERMINAL = new Set([EVENT.COMPLETED, EVENT.FAILED, EVENT.CANCELLED]);

// The text of a chunk event's data (a string; an object's text, for other emitters).
export function chunkText(data) {
  if (typeof data === "string") return data;
  if (data && typeof data === "object") return data.text ?? data.delta ?? data.content ?? "";
  return data == null ? "" : String(data);
}

// The visible-text rule (genq.visible_text on the server), one event at a time: `chunk`
// appends its text, `restarted` drops everything shown so far (a new attempt starts over),
// every other event leaves the text alone. Returns {reset, append}: clear first if `reset`,
// then append `append`, so a page can add text nodes instead of rewriting the whole box.
export function textChange(type, data) {
  return { reset: type === EVENT.RESTARTED, append: type === EVENT.CHUNK ? chunkText(data) : "" };
}

// The text shown after `events` ({type, data} objects, in stream order).
export function visibleText(events) {
  let shown = "";
  for (const { type, data } of events) {
    const { reset, append } = textChange(type, data);
    shown = (reset ? "" : shown) + append;
  }
  return shown;
}

// ---- a generation's parts ----------------------------------------------------------------

// The largest tool-call index a part may carry (genq_contract.parts.MAX_TOOL_INDEX).
const MAX_TOOL_INDEX = 1023;

const isIndex = (v) => Number.isInteger(v) && v >= 0 && v <= MAX_TOOL_INDEX;
const isText = (v) => typeof v === "string";
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// A tool part's data when it validates (genq_contract.parts.parse_part), else null.
function toolPart(type, data) {
  if (!isObject(data) || !isIndex(data.index)) return null;
  if (type === EVENT.TOOL_ARGS) return isText(data.delta) ? data : null;
  if (!isText(data.id) || !isText(data.name)) return null;
  return type === EVENT.TOOL_DONE && !isText(data.arguments) ? null : data;
}

// The fold of a generation's events (genq_contract.transcript.Transcript on the server; a test
// holds both to the same answer): chunks add to the text, reasoning to the reasoning, tool
// parts build the calls by index (a tool_done's arguments replace the pieces), `restarted`
// starts over, `completed` gives the finish reason and the usage. A part that does not
// validate is skipped, as is an argument piece of a call that never started.
export class Transcript {
  constructor() {
    this.clear();
  }

  clear() {
    this.text = "";
    this.reasoningText = "";
    this.calls = new Map(); // index -> {id, name, pieces, whole}: in the order calls started
    this.finishReason = null;
    this.usage = null;
  }

  // The reasoning text; null when the model streamed none.
  get reasoning() {
    return this.reasoningText === "" ? null : this.reasoningText;
  }

  // [{index, id, name, arguments, done}] in the order the calls started; `done` once a
  // tool_done gave the whole call.
  get toolCalls() {
    return [...this.calls].map(([index, c]) => ({
      index,
      id: c.id,
      name: c.name,
      arguments: c.whole ?? c.pieces.join(""),
      done: c.whole !== null,
    }));
  }

  add(type, data) {
    if (type === EVENT.CHUNK) {
      if (isText(data)) this.text += data;
    } else if (type === EVENT.REASONING) {
      if (isText(data)) this.reasoningText += data;
    } else if (type === EVENT.TOOL_CALL || type === EVENT.TOOL_ARGS || type === EVENT.TOOL_DONE) {
      this.addToolPart(type, data);
    } else if (type === EVENT.RESTARTED) {
      this.clear();
    } else if (type === EVENT.COMPLETED) {
      const result = isObject(data) ? data : {};
      this.finishReason = isText(result.finish_reason) ? result.finish_reason : null;
      this.usage = isObject(result.usage) ? result.usage : null;
    }
  }

  addToolPart(type, data) {
    const part = toolPart(type, data);
    if (part === null) return;
    const call = this.calls.get(part.index);
    if (type === EVENT.TOOL_CALL) {
      if (!call) this.calls.set(part.index, { id: part.id, name: part.name, pieces: [], whole: null });
    } else if (type === EVENT.TOOL_ARGS) {
      if (call && call.whole === null) call.pieces.push(part.delta);
    } else if (!call) {
      this.calls.set(part.index, { id: part.id, name: part.name, pieces: [], whole: part.arguments });
    } else {
      Object.assign(call, { id: part.id, name: part.name, whole: part.arguments });
    }
  }

  // {text, reasoning, tool_calls: [{id, name, arguments}], finish_reason, usage}, as the
  // server's Transcript.as_json.
  asJSON() {
    return {
      text: this.text,
      reasoning: this.reasoning,
      tool_calls: this.toolCalls.map(({ id, name, arguments: args }) => ({ id, name, arguments: args })),
      finish_reason: this.finishReason,
      usage: this.usage,
    };
  }

  // Everything the fold holds (calls in progress too), for a page to keep and restore.
  save() {
    return { ...this.asJSON(), tool_calls: this.toolCalls };
  }

  // A fold from what save() gave, or from a result ({text, reasoning, tool_calls, ...}), whose
  // calls are whole.
  static restore(saved) {
    const transcript = new Transcript();
    if (!isObject(saved)) return transcript;
    if (isText(saved.text)) transcript.text = saved.text;
    if (isText(saved.reasoning)) transcript.reasoningText = saved.reasoning;
    const calls = Array.isArray(saved.tool_calls) ? saved.tool_calls : [];
    calls.forEach((c, n) => {
      if (!isObject(c) || !isText(c.id) || !isText(c.name) || !isText(c.arguments)) return;
      const index = isIndex(c.index) ? c.index : n;
      const done = c.done ?? true;
      transcript.calls.set(index, { id: c.id, name: c.name, pieces: [c.arguments], whole: done ? c.arguments : null });
    });
    transcript.finishReason = isText(saved.finish_reason) ? saved.finish_reason : null;
    transcript.usage = isObject(saved.usage) ? saved.usage : null;
    return transcript;
  }
}

export class ApiError extends Error {
  constructor(status, detail, headers) {
    super(detail || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.headers = headers;
  }
}

// FastAPI answers {"detail": "text"} or, for validation errors, {"detail": [{loc, msg}, ...]}.
function detailText(data) {
  if (data == null) return "";
  if (typeof data === "string") return data;
  const detail = data.detail ?? data;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => (d && d.msg ? `${(d.loc || []).slice(1).join(".")} ${d.msg}`.trim() : String(d))).join("; ");
  }
  return JSON.stringify(detail);
}

function storageGet(store, name) {
  try {
    return store.getItem(name);
  } catch {
    return null; // storage disabled (private mode, sandboxed frame)
  }
}

function storageSet(store, name, value) {
  try {
    if (value == null || value === "") store.removeItem(name);
    else store.setItem(name, value);
  } catch {
    // Quota or disabled storage: the page keeps working, only resume-after-refresh is lost.
  }
}

export const local = {
  get: (name) => storageGet(window.localStorage, name),
  set: (name, value) => storageSet(window.localStorage, name, value),
  getJSON: (name) => parseJSON(storageGet(window.localStorage, name)),
  setJSON: (name, value) => storageSet(window.localStorage, name, value == null ? null : JSON.stringify(value)),
};

export const session = {
  getJSON: (name) => parseJSON(storageGet(window.sessionStorage, name)),
  setJSON: (name, value) => storageSet(window.sessionStorage, name, value == null ? null : JSON.stringify(value)),
};

function parseJSON(text) {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// The key sent as `Authorization: Bearer`. The generate page and the dashboard keep separate
// keys, because the dashboard needs one with the admin role.
const keyStorageName = { user: "genq.apiKey", admin: "genq.adminKey" };
export const apiKey = (role = "user") => local.get(keyStorageName[role]) || "";
export const saveApiKey = (role, value) => local.set(keyStorageName[role], value);

let configPromise = null;
// `GET /v1/config` -> {dev, dev_key?, dev_admin_key?}; absent or failing means "not dev".
export function gatewayConfig() {
  configPromise ??= request("/v1/config", { auth: null }).catch(() => ({ dev: false }));
  return configPromise;
}

// Fills the key field from this browser's storage, else from the dev default, and saves edits.
export async function setupKeyField(input, role, onChange) {
  input.value = apiKey(role);
  if (!input.value) {
    const config = await gatewayConfig();
    const fallback = role === "admin" ? config?.dev_admin_key ?? config?.dev_key : config?.dev_key;
    if (config?.dev && fallback) {
      input.value = fallback;
      saveApiKey(role, fallback);
    }
  }
  input.addEventListener("change", () => {
    saveApiKey(role, input.value.trim());
    onChange?.();
  });
  // The field sits in its own <form> (browsers expect password fields in one); Enter saves.
  input.form?.addEventListener("submit", (ev) => {
    ev.preventDefault();
    input.dispatchEvent(new Event("change"));
  });
}

// One JSON request. `auth` is the key role to send ("user" or "admin"), or null for none.
// Resolves to the parsed body (null for 204); rejects with ApiError on a non-2xx answer and
// with TypeError when the network failed.
export async function request(path, { method = "GET", body, headers = {}, auth = "user", signal } = {}) {
  const sent = { Accept: "application/json", ...headers };
  const key = auth ? apiKey(auth) : "";
  if (key) sent.Authorization = `Bearer ${key}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers: sent,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    signal,
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) throw new ApiError(response.status, detailText(data) || response.statusText, response.headers);
  return data;
}

// A random Idempotency-Key. crypto.randomUUID() exists only in secure contexts (https or
// localhost); getRandomValues works on a plain-http LAN address too.
export function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// Redis stream ids ("<ms>-<seq>") compared as numbers; plain string order is wrong
// ("9-0" > "10-0").
export function compareEventIds(a, b) {
  const [am, as = "0"] = String(a).split("-");
  const [bm, bs = "0"] = String(b).split("-");
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// "850 ms", "42 s", "3 min 5 s", "2 h 10 min", "3 d 4 h".
export function formatDuration(seconds) {
  if (seconds == null || !Number.isFinite(Number(seconds))) return "—";
  const s = Math.max(0, Number(seconds));
  if (s < 1) return s === 0 ? "0 s" : `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`.replace(/ 0 s$/, "");
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`.replace(/ 0 min$/, "");
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`.replace(/ 0 h$/, "");
}

// Accepts epoch seconds, epoch milliseconds or an ISO string.
export function toDate(value) {
  if (value == null || value === "") return null;
  if (typeof value === "number" || /^\d+(\.\d+)?$/.test(String(value))) {
    const n = Number(value);
    return new Date(n < 1e12 ? n * 1000 : n);
  }
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

export function formatTime(value) {
  const d = toDate(value);
  if (!d) return "—";
  const sameDay = d.toDateString() === new Date().toDateString();
  return sameDay
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })
    : d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

export function formatAgo(value) {
  const d = toDate(value);
  if (!d) return "";
  return `${formatDuration((Date.now() - d.getTime()) / 1000)} ago`;
}

// document.createElement with attributes and children, to build rows without innerHTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child != null && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// document.createElementNS for the dashboard's SVG charts.
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

// 0.83 -> 2, 3 -> 4, 7 -> 10, 23 -> 40: the next 2-4-10 step, so a chart's axis labels stay
// round (even steps only, so the middle grid line is a whole number of jobs too).
export function niceMax(value) {
  if (!(value > 0)) return 2;
  const power = 10 ** Math.floor(Math.log10(value));
  return [2, 4, 10, 20].map((m) => m * power).find((v) => v >= value);
}

// Adds or removes a row's id in a selection, and marks the row (a <tr data-job-id>) to match.
export function selectRow(table, selection, id, on) {
  if (on) selection.add(id);
  else selection.delete(id);
  table.tBodies[0].querySelector(`tr[data-job-id="${CSS.escape(id)}"]`)?.classList.toggle("selected", on);
}

// The first cell of a selectable row: its checkbox (extra attributes, e.g. data-action, merge in).
export function selectCell(id, checked, onchange, attributes = {}) {
  const box = el("input", { type: "checkbox", class: "check", checked, "aria-label": `Select job ${id}`, onchange, ...attributes });
  return el("td", {}, box);
}
