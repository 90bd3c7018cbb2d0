// The generate page: submit a prompt, stream the generation through one EventSource, stop it;
// the caller's recent generations, any of which reopens here (following it if it still runs).
//
// Resume design (no duplicated text, ever):
// - The job id is in the address (`/?job=<id>`); its watch token and events URL are kept in
//   localStorage, so a refresh or a new tab of this browser can follow the same job.
// - A snapshot {lastEventId, text, terminal} is kept in sessionStorage. The two fields are
//   written together from one consistent state, so the text always holds exactly the events up
//   to lastEventId. A refresh restores the text and reopens the stream with `?after=lastEventId`.
// - Without a snapshot (a new tab) the page replays the stream from its first event and builds
//   the text from nothing.
// - Every reconnect, ours or after an error, is opened by the page with `?after=` of the last
//   event it applied: the browser's own retry is never used, so it never matters whether the
//   server prefers `Last-Event-ID` or `?after=`. An event at or below the last applied id is
//   ignored, so a server that replays too much cannot duplicate text either.
// - The reasoning and the tool calls are folded by a Transcript (api.js) and kept in the same
//   snapshot, so they resume exactly as the text does.
// - `restarted` clears the text and the parts; `completed` carries the result, which is
//   authoritative.
import {
  ApiError,
  EVENT,
  EVENT_TYPES,
  TERMINAL,
  Transcript,
  compareEventIds,
  el,
  formatAgo,
  local,
  newIdempotencyKey,
  request,
  session,
  setupKeyField,
  sleep,
  textChange,
} from "./api.js";
import { PartsView } from "./generation_parts.js";

const $ = (id) => document.getElementById(id);
const main = $("main");
const form = $("generate-form");
const modelSelect = $("model");
const promptBox = $("prompt");
const generateButton = $("generate");
const stopButton = $("stop");
const output = $("output");
const statusText = $("status");
const attemptText = $("attempt");
const jobInfo = $("job-info");
const keyInput = $("api-key");
const parts = new PartsView({ reasoning: $("reasoning"), reasoningText: $("reasoning-text"), toolCalls: $("tool-calls") });

const POST_RETRY_DELAYS_MS = [400, 1000, 2000, 4000];
const PENDING_KEY_TTL_MS = 10 * 60 * 1000;
const JOB_MEMORY_MS = 24 * 3600 * 1000;

let modelsLoaded = false;
let submitting = false;
let job = null; // {id, token, eventsUrl}
let lastEventId = null; // id of the last event applied to `text`
let text = "";
let transcript = new Transcript(); // the reasoning and tool calls of the events up to lastEventId
let terminal = null; // "completed" | "failed" | "cancelled" | "missing"
let restarts = 0;
let source = null; // the page's only EventSource
let lastEventAt = 0;
let reconnectDelay = 500;
let reconnectTimer = null;
let pollTimer = null;
let countdownTimer = null;
let retryUntil = 0;
let terminalSeenInRecord = false;
let snapshotTimer = null;
let lastRecord = null; // the last job record fetched, for the attempt line

// ---- status line -------------------------------------------------------------------------

function setStatus(state, message) {
  clearInterval(countdownTimer);
  countdownTimer = null;
  retryUntil = 0;
  main.dataset.state = state;
  if (statusText.textContent !== message) statusText.textContent = message;
  updateButtons();
}

// "Retrying in N s": the status sentence is announced once; the ticking number sits in an
// aria-live="off" span so a screen reader is not interrupted every second.
function showRetrying(seconds, attempt) {
  const until = Date.now() + Math.max(0, seconds) * 1000;
  if (main.dataset.state === "retrying" && Math.abs(until - retryUntil) < 1500) return;
  setStatus("retrying", "");
  retryUntil = until;
  const count = el("span", { "aria-live": "off" });
  const tick = () => {
    count.textContent = String(Math.max(0, Math.ceil((retryUntil - Date.now()) / 1000)));
  };
  tick();
  const verb = attempt > 0 ? "Retrying" : "Starting";
  statusText.replaceChildren(`${verb} in `, count, " s");
  countdownTimer = setInterval(tick, 250);
}

function showAttempt(record) {
  lastRecord = record;
  const parts = [];
  if (record.attempt && record.max_attempts && (record.attempt > 1 || restarts > 0)) {
    parts.push(`attempt ${record.attempt} of ${record.max_attempts}`);
  }
  if (record.error && terminal === null && !TERMINAL.has(record.status)) parts.push(`last error: ${record.error}`);
  attemptText.textContent = parts.join(" · ");
}

// The action button that last had focus: when it gets disabled the browser drops focus to
// <body>, and a keyboard user would have to start over from the top of the page.
let focusedAction = null;
for (const button of [generateButton, stopButton]) {
  button.addEventListener("focus", () => {
    focusedAction = button;
  });
}
document.addEventListener("focusin", (ev) => {
  if (ev.target !== generateButton && ev.target !== stopButton) focusedAction = null;
});

function updateButtons() {
  const busy = submitting || (job !== null && terminal === null);
  generateButton.disabled = busy || !modelsLoaded;
  stopButton.disabled = !(job !== null && terminal === null) || stopButton.dataset.stopping === "1";
  const lost = document.activeElement === document.body || document.activeElement === focusedAction;
  if (focusedAction?.disabled && lost) {
    const next = [stopButton, generateButton].find((b) => !b.disabled);
    next?.focus({ preventScroll: true });
  }
}

// ---- the text ----------------------------------------------------------------------------

function keepScrolledToEnd(write) {
  const atEnd = output.scrollHeight - output.scrollTop - output.clientHeight < 24;
  write();
  if (atEnd) output.scrollTop = output.scrollHeight;
}

function appendText(delta) {
  if (!delta) return;
  text += delta;
  // Appending a text node (not rewriting the whole box) lets aria-live announce only the new words.
  keepScrolledToEnd(() => output.append(document.createTextNode(delta)));
}

function setText(value) {
  text = value;
  keepScrolledToEnd(() => {
    output.textContent = value;
  });
}

// The result of `completed` is the truth. If the streamed text differs (a trimmed stream, a
// lost chunk) the page shows the result and marks the box, which the browser tests look for.
function applyResult(result) {
  const final = typeof result === "string" ? result : result?.text;
  if (typeof final !== "string") return;
  if (final !== text) {
    output.dataset.mismatch = "true";
    console.warn("genq: streamed text differed from the result; showing the result");
    setText(final);
  }
  // The parts too: a page that settles from the record, or a call a cut stream left unfinished.
  const fromResult = Transcript.restore(typeof result === "string" ? { text: result } : result);
  const [given, streamed] = [fromResult.asJSON(), transcript.asJSON()];
  const differs = given.reasoning !== streamed.reasoning || JSON.stringify(given.tool_calls) !== JSON.stringify(streamed.tool_calls);
  if (differs || transcript.toolCalls.some((call) => !call.done)) setParts(fromResult);
}

function setParts(value) {
  transcript = value;
  parts.render(transcript);
}

// ---- persistence -------------------------------------------------------------------------

const jobKey = (id) => `genq.job.${id}`;
const snapshotKey = (id) => `genq.snapshot.${id}`;

function rememberJob(extra = {}) {
  const previous = local.getJSON(jobKey(job.id)) || {};
  local.setJSON(jobKey(job.id), { ...previous, ...extra, token: job.token, eventsUrl: job.eventsUrl, at: Date.now() });
}

function forgetOldJobs() {
  try {
    for (let i = localStorage.length - 1; i >= 0; i--) {
      const name = localStorage.key(i);
      if (!name?.startsWith("genq.job.")) continue;
      const saved = local.getJSON(name);
      if (!saved || Date.now() - (saved.at || 0) > JOB_MEMORY_MS) localStorage.removeItem(name);
    }
  } catch {
    // storage disabled
  }
}

function saveSnapshotNow() {
  clearTimeout(snapshotTimer);
  snapshotTimer = null;
  if (!job) return;
  session.setJSON(snapshotKey(job.id), {
    lastEventId,
    text,
    parts: transcript.save(),
    terminal,
    restarts,
    status: statusText.textContent,
  });
}

function saveSnapshotSoon() {
  snapshotTimer ??= setTimeout(saveSnapshotNow, 150);
}

window.addEventListener("pagehide", saveSnapshotNow);

// ---- the stream --------------------------------------------------------------------------

function closeStream() {
  if (source) {
    source.close();
    source = null;
  }
}

function openStream() {
  closeStream();
  clearTimeout(reconnectTimer);
  const url = new URL(job.eventsUrl, location.href);
  url.searchParams.set("token", job.token);
  if (lastEventId) url.searchParams.set("after", lastEventId);
  else url.searchParams.delete("after");
  const es = new EventSource(url);
  source = es;
  for (const type of EVENT_TYPES) es.addEventListener(type, onEvent);
  es.addEventListener("error", () => {
    if (source !== es) return;
    closeStream(); // reconnect ourselves, with ?after= of the last applied event
    if (terminal === null) scheduleReconnect();
  });
}

function onEvent(ev) {
  if (ev.target !== source || terminal !== null) return;
  const id = ev.lastEventId || null;
  if (id && lastEventId && compareEventIds(id, lastEventId) <= 0) return; // already applied
  let data = null;
  try {
    data = ev.data ? JSON.parse(ev.data) : null;
  } catch {
    data = ev.data;
  }
  if (id) lastEventId = id;
  lastEventAt = Date.now();
  reconnectDelay = 500;
  terminalSeenInRecord = false;

  const { reset, append } = textChange(ev.type, data);
  if (reset) setText("");
  appendText(append);
  transcript.add(ev.type, data);
  parts.update(ev.type, data, transcript);
  switch (ev.type) {
    case EVENT.CHUNK:
    case EVENT.REASONING:
    case EVENT.TOOL_CALL:
    case EVENT.TOOL_ARGS:
    case EVENT.TOOL_DONE:
    case EVENT.PROGRESS:
      if (main.dataset.state !== "running") setStatus("running", "Running");
      break;
    case EVENT.RESTARTED:
      restarts += 1;
      delete output.dataset.mismatch;
      setStatus("running", "Restarted: an earlier attempt stopped, its text was discarded");
      refreshRecord(); // the attempt number for the status line
      saveSnapshotNow();
      return;
    case EVENT.COMPLETED:
      applyResult(data);
      finish(EVENT.COMPLETED, "Completed");
      return;
    case EVENT.FAILED:
      finish(EVENT.FAILED, `Failed: ${typeof data === "string" ? data : JSON.stringify(data)}`);
      return;
    case EVENT.CANCELLED:
      finish(EVENT.CANCELLED, "Cancelled");
      return;
  }
  saveSnapshotSoon();
}

function scheduleReconnect() {
  clearTimeout(reconnectTimer);
  const delay = reconnectDelay;
  reconnectDelay = Math.min(reconnectDelay * 2, 10000);
  if (delay >= 2000) setStatus("reconnecting", "Connection lost, reconnecting…");
  reconnectTimer = setTimeout(async () => {
    const watched = job;
    const record = await refreshRecord(); // may settle the page from the record (expired stream)
    if (job !== watched || terminal !== null || source !== null) return;
    if (record === null && delay >= 2000) {
      // The record did not answer to the watch token either: it may have expired.
      const fresh = await newWatchToken(watched.id);
      if (fresh?.watch_token && job === watched) {
        job.token = fresh.watch_token;
        rememberJob();
      }
    }
    if (job === watched && terminal === null && source === null) openStream();
  }, delay);
}

// `GET /v1/generations/{id}`: drives "waiting", "retrying in N s" and the attempt number, which
// the event stream does not carry, and settles the page when the stream cannot (expired).
async function refreshRecord() {
  if (!job) return null;
  const watched = job;
  let record;
  try {
    const url = `/v1/generations/${encodeURIComponent(watched.id)}?token=${encodeURIComponent(watched.token)}`;
    record = await request(url);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && job === watched && terminal === null && !source) {
      closeStream();
      finish("missing", "This generation no longer exists (finished ones are kept for a while only)");
    }
    return null;
  }
  if (job !== watched || terminal !== null || !record) return record;
  if (record.watch_token && record.watch_token !== job.token) {
    job.token = record.watch_token; // a fresh token from the gateway outlives the first one
    rememberJob();
  }
  showAttempt(record);
  const quiet = Date.now() - lastEventAt > 1000;
  switch (record.status) {
    case "waiting":
      if (quiet) setStatus("waiting", "Waiting in the queue");
      break;
    case "scheduled": {
      const seconds = record.retry_in ?? (record.run_at ? record.run_at - Date.now() / 1000 : null);
      if (seconds == null) setStatus("retrying", record.attempt > 0 ? "Retrying soon" : "Scheduled");
      else showRetrying(seconds, record.attempt || 0);
      break;
    }
    case "active":
      if (!["running"].includes(main.dataset.state)) setStatus("running", "Running");
      break;
    default:
      if (TERMINAL.has(record.status)) {
        // The stream delivers the terminal event itself; settle from the record only when
        // there is no stream, or the record has said so twice in a row.
        if (source === null || terminalSeenInRecord) settleFromRecord(record);
        else terminalSeenInRecord = true;
      }
  }
  return record;
}

// `POST /v1/generations/{id}/token` with the API key; null when it cannot be had.
async function newWatchToken(id) {
  try {
    return await request(`/v1/generations/${encodeURIComponent(id)}/token`, { method: "POST" });
  } catch {
    return null;
  }
}

function settleFromRecord(record) {
  if (record.status === EVENT.COMPLETED) {
    applyResult(record.result ?? record); // the record holds the result's text, reasoning and tool calls
    finish(EVENT.COMPLETED, "Completed");
  } else if (record.status === EVENT.FAILED) {
    finish(EVENT.FAILED, `Failed: ${record.error ?? "unknown error"}`);
  } else {
    finish(EVENT.CANCELLED, "Cancelled");
  }
}

function finish(kind, message) {
  terminal = kind;
  closeStream();
  clearTimeout(reconnectTimer);
  clearInterval(pollTimer);
  pollTimer = null;
  delete stopButton.dataset.stopping;
  setStatus(kind, message);
  if (lastRecord) showAttempt(lastRecord); // drops "last error" once the job has settled
  saveSnapshotNow();
  loadRecent();
}

function startWatching() {
  delete stopButton.dataset.stopping;
  updateButtons();
  openStream();
  clearInterval(pollTimer);
  pollTimer = setInterval(() => {
    if (terminal === null && Date.now() - lastEventAt > 1000) refreshRecord();
  }, 1000);
  refreshRecord();
}

function showJob(id) {
  const link = $("job-link");
  link.href = `/?job=${encodeURIComponent(id)}`;
  $("job-id").textContent = id;
  jobInfo.hidden = false;
  markCurrent();
}

// ---- recent generations ------------------------------------------------------------------

// `GET /v1/generations`: the key's own generations across every model, newest first. The
// first page is polled; "Show older" appends the next ones.
const RECENT_PAGE = 10;
let recentItems = [];
let recentCursor = null;
let recentPages = 1;
let recentSignature = null;

async function fetchRecent(cursor) {
  const params = new URLSearchParams({ limit: String(RECENT_PAGE) });
  if (cursor) params.set("cursor", cursor);
  return request(`/v1/generations?${params}`);
}

async function loadRecent() {
  let items = [];
  let cursor = null;
  try {
    for (let page = 0; page < recentPages; page++) {
      const answer = await fetchRecent(cursor);
      items = items.concat(answer?.generations ?? []);
      cursor = answer?.next_cursor ?? null;
      if (!cursor) break;
    }
  } catch (err) {
    $("recent-status").textContent = `Could not list your generations: ${err.message}`;
    return;
  }
  recentItems = items;
  recentCursor = cursor;
  renderRecent();
}

async function loadOlder() {
  const button = $("recent-more");
  button.disabled = true;
  try {
    const answer = await fetchRecent(recentCursor);
    recentItems = recentItems.concat(answer?.generations ?? []);
    recentCursor = answer?.next_cursor ?? null;
    recentPages += 1;
    renderRecent();
  } catch (err) {
    $("recent-status").textContent = `Could not list your generations: ${err.message}`;
  } finally {
    button.disabled = false;
  }
}

// What the list shows of a generation: the prompt if this browser sent it, else its text.
function recentLabel(g) {
  const saved = local.getJSON(jobKey(g.id));
  if (saved?.prompt) return saved.prompt;
  if (g.text) return g.text;
  return g.error ? `(${g.error})` : "(no text yet)";
}

function renderRecent() {
  const signature = JSON.stringify([recentItems, recentCursor]);
  if (signature !== recentSignature) {
    recentSignature = signature;
    const list = $("recent");
    const focusedId = list.contains(document.activeElement) ? document.activeElement.dataset.jobId : null;
    list.replaceChildren(
      ...recentItems.map((g) =>
        el(
          "li",
          {},
          el(
            "a",
            { href: `/?job=${encodeURIComponent(g.id)}`, "data-job-id": g.id, onclick: (ev) => openRecent(ev, g.id) },
            el("span", { class: `badge ${g.status}` }, g.status),
            el("span", { class: "recent-text" }, recentLabel(g)),
            el("span", { class: "muted small" }, `${g.model ?? ""} · ${formatAgo(g.created_at)}`),
          ),
        ),
      ),
    );
    if (focusedId) list.querySelector(`a[data-job-id="${CSS.escape(focusedId)}"]`)?.focus();
    $("recent-status").textContent = recentItems.length ? "" : "No generations yet.";
    $("recent-more").hidden = !recentCursor;
  }
  markCurrent();
}

function markCurrent() {
  for (const a of $("recent").querySelectorAll("a")) {
    if (job && a.dataset.jobId === job.id) a.setAttribute("aria-current", "true");
    else a.removeAttribute("aria-current");
  }
}

// Opens a listed generation in place: the address changes as a reload would show it.
function openRecent(ev, id) {
  if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return; // new tab
  ev.preventDefault();
  if (job?.id === id) return;
  saveSnapshotNow();
  history.pushState(null, "", `/?job=${encodeURIComponent(id)}`);
  resumeFromAddress();
}

function resetForJob(next) {
  closeStream();
  clearTimeout(reconnectTimer);
  clearInterval(pollTimer);
  job = next;
  lastEventId = null;
  terminal = null;
  restarts = 0;
  lastEventAt = 0;
  reconnectDelay = 500;
  terminalSeenInRecord = false;
  lastRecord = null;
  delete output.dataset.mismatch;
  attemptText.textContent = "";
  setText("");
  setParts(new Transcript());
}

// ---- submit and stop ---------------------------------------------------------------------

// One Idempotency-Key per submission. It is kept (with the body it was made for) until the
// gateway answers, so a retried POST, or a resubmit of the same form after a refresh that
// interrupted the POST, reuses it and the generation is billed once.
function idempotencyKeyFor(body) {
  const serialized = JSON.stringify(body);
  const pending = session.getJSON("genq.pendingSubmit");
  if (pending && pending.body === serialized && Date.now() - pending.at < PENDING_KEY_TTL_MS) return pending.key;
  const key = newIdempotencyKey();
  session.setJSON("genq.pendingSubmit", { key, body: serialized, at: Date.now() });
  return key;
}

async function postGeneration(body, key) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await request("/v1/generations", { method: "POST", body, headers: { "Idempotency-Key": key } });
    } catch (err) {
      const transient = !(err instanceof ApiError) || err.status >= 500 || err.status === 429 || err.status === 408;
      if (!transient || attempt >= POST_RETRY_DELAYS_MS.length) throw err;
      let wait = POST_RETRY_DELAYS_MS[attempt];
      const retryAfter = Number(err.headers?.get?.("retry-after"));
      if (Number.isFinite(retryAfter) && retryAfter > 0) wait = Math.max(wait, retryAfter * 1000);
      setStatus("submitting", "The gateway did not answer, sending again…");
      await sleep(wait);
    }
  }
}

async function submit() {
  if (submitting || (job !== null && terminal === null)) return; // one submission at a time
  const prompt = promptBox.value.trim();
  if (!prompt) {
    setStatus("idle", "Write a prompt first");
    promptBox.focus();
    return;
  }
  if (!modelSelect.value) return;
  submitting = true;
  resetForJob(null); // the previous generation's text goes; its address stays until the new one is known
  jobInfo.hidden = true;
  setStatus("submitting", "Submitting…");
  const body = { model: modelSelect.value, prompt };
  try {
    const key = idempotencyKeyFor(body);
    const answer = await postGeneration(body, key);
    session.setJSON("genq.pendingSubmit", null);
    resetForJob({
      id: answer.id,
      token: answer.watch_token,
      eventsUrl: answer.events_url || `/v1/generations/${encodeURIComponent(answer.id)}/events`,
    });
    rememberJob({ model: body.model, prompt: body.prompt });
    history.replaceState(null, "", `/?job=${encodeURIComponent(answer.id)}`);
    showJob(answer.id);
    submitting = false;
    setStatus(answer.status === "active" ? "running" : "waiting", answer.status === "active" ? "Running" : "Waiting in the queue");
    saveSnapshotNow();
    startWatching();
    loadRecent();
  } catch (err) {
    if (err instanceof ApiError && err.status < 500) session.setJSON("genq.pendingSubmit", null);
    submitting = false;
    setStatus("error", `Could not start the generation: ${err.message}`);
  }
}

async function stop() {
  if (!job || terminal !== null) return;
  const watched = job;
  stopButton.dataset.stopping = "1";
  updateButtons();
  statusText.textContent = "Stopping…";
  try {
    const url = `/v1/generations/${encodeURIComponent(watched.id)}/cancel?token=${encodeURIComponent(watched.token)}`;
    const answer = await request(url, { method: "POST" });
    if (job !== watched || terminal !== null) return;
    if (answer?.cancelled || answer?.status === EVENT.CANCELLED) {
      finish(EVENT.CANCELLED, "Cancelled"); // the text so far stays on the page
    } else {
      // Too late: the job had already finished; its terminal event tells how.
      delete stopButton.dataset.stopping;
      await refreshRecord();
    }
  } catch (err) {
    delete stopButton.dataset.stopping;
    setStatus(main.dataset.state, `Could not stop: ${err.message}`);
  }
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  submit();
});
promptBox.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    form.requestSubmit();
  }
});
stopButton.addEventListener("click", stop);
modelSelect.addEventListener("change", () => local.set("genq.model", modelSelect.value));

// ---- start-up ----------------------------------------------------------------------------

async function loadModels() {
  modelsLoaded = false;
  updateButtons();
  try {
    const answer = await request("/v1/models");
    const models = (answer?.data ?? []).map((m) => m.id); // OpenAI's list format
    if (models.length === 0) throw new Error("the gateway allows no model");
    const preferred = local.get("genq.model");
    modelSelect.replaceChildren(...models.map((m) => el("option", { value: m, text: m })));
    if (preferred && models.includes(preferred)) modelSelect.value = preferred;
    modelSelect.disabled = false;
    modelsLoaded = true;
    if (main.dataset.state === "error" && !job) setStatus("idle", "Idle");
  } catch (err) {
    modelSelect.replaceChildren(el("option", { value: "", text: "No models" }));
    const hint = err instanceof ApiError && err.status === 401 ? " Set your API key under Settings." : "";
    setStatus("error", `Could not load the models: ${err.message}.${hint}`);
  }
  updateButtons();
}

const addressedJob = () => new URLSearchParams(location.search).get("job");

async function resumeFromAddress() {
  const id = addressedJob();
  if (!id) return;
  if (job?.id !== id) {
    // Another generation's text and status must not stand under this address while its
    // token is fetched (Back to a running one showed the other's "Completed" meanwhile).
    resetForJob(null);
    showJob(id);
    setStatus("waiting", "Connecting…");
  }
  const saved = local.getJSON(jobKey(id));
  let token = saved?.token;
  let eventsUrl = saved?.eventsUrl;
  if (!token) {
    // Not started in this browser: the job's owner (this API key) can get a new watch token.
    const fresh = await newWatchToken(id);
    if (addressedJob() !== id) return; // the address moved on meanwhile: its own call follows it
    token = fresh?.watch_token;
    eventsUrl = fresh?.events_url;
  }
  if (!token) {
    setStatus("error", "This generation was started in another browser; it cannot be followed from here.");
    return;
  }
  resetForJob({ id, token, eventsUrl: eventsUrl || `/v1/generations/${encodeURIComponent(id)}/events` });
  showJob(id);
  if (saved?.prompt && !promptBox.value) promptBox.value = saved.prompt;
  if (saved?.model && [...modelSelect.options].some((o) => o.value === saved.model)) modelSelect.value = saved.model;

  const snapshot = session.getJSON(snapshotKey(id));
  if (snapshot && typeof snapshot.text === "string") {
    lastEventId = snapshot.lastEventId || null;
    restarts = snapshot.restarts || 0;
    setText(snapshot.text);
    setParts(Transcript.restore(snapshot.parts));
    if (snapshot.terminal) {
      terminal = snapshot.terminal;
      setStatus(snapshot.terminal, snapshot.status || snapshot.terminal);
      return;
    }
  }
  setStatus("waiting", lastEventId ? "Resuming…" : "Connecting…");
  startWatching();
}

async function init() {
  forgetOldJobs();
  await setupKeyField(keyInput, "user", () => Promise.all([loadModels(), loadRecent()]));
  await loadModels();
  await resumeFromAddress();
  await loadRecent();
  setInterval(() => {
    if (!document.hidden) loadRecent();
  }, 5000);
}

$("recent-more").addEventListener("click", loadOlder);
window.addEventListener("popstate", () => {
  saveSnapshotNow();
  if (addressedJob()) resumeFromAddress();
});

init();
