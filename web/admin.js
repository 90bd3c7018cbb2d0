// The operations dashboard: queue counts, the Jobs view (admin_jobs.js), the 24-hour chart,
// spend per tenant and model with the budgets (admin_spend.js), dead letters with retry and
// purge, the audit log, and one job's record with its event stream live.
//
// Everything but the job's events is polled (a few small JSON requests every few seconds), so
// the page holds at most one EventSource: browsers allow six connections per origin.
import {
  ApiError,
  EVENT,
  EVENT_TYPES,
  TERMINAL,
  compareEventIds,
  el,
  formatAgo,
  formatDuration,
  formatTime,
  niceMax,
  request,
  selectCell,
  selectRow,
  setupKeyField,
  svg,
  textChange,
  toDate,
} from "./api.js";
import { loadJobs, setQueue, setupJobs } from "./admin_jobs.js";
import { formatUsd, loadBudgets, loadSpend, setupSpend } from "./admin_spend.js";

const $ = (id) => document.getElementById(id);
const api = (path, options = {}) => request(path, { ...options, auth: "admin" });
const queuePath = (queue) => `/v1/queues/${encodeURIComponent(queue)}`;
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

let queueNames = [];
let selectedQueue = null;
let deadEntries = [];
let deadSignature = null;
const selectedIds = new Set();
let historyBuckets = [];
let historyProblem = null; // why the history could not be loaded, shown in the chart
let chartIndex = -1;

// ---- problems ----------------------------------------------------------------------------

function showProblem(err) {
  let message = `The gateway did not answer: ${err.message}`;
  if (err instanceof ApiError && err.status === 401) {
    message = "The gateway refused the key. Set an admin API key under Settings.";
    $("settings").open = true;
  } else if (err instanceof ApiError && err.status === 403) {
    message = "This key does not have the admin role.";
    $("settings").open = true;
  }
  if ($("banner").textContent !== message) $("banner").textContent = message;
}

const clearProblem = () => {
  $("banner").textContent = "";
};

// ---- queues ------------------------------------------------------------------------------

// Accepts {queues: [{name, ...}]}, {queues: {name: {...}}} or a bare list.
function normalizeQueues(answer) {
  let list = answer?.queues ?? answer;
  if (list && !Array.isArray(list) && typeof list === "object") {
    list = Object.entries(list).map(([name, stats]) => ({ name, ...stats }));
  }
  return (list || []).map((q) => ({ ...q, name: q.name ?? q.queue ?? q.prefix }));
}

async function loadQueues() {
  const queues = normalizeQueues(await api("/v1/queues"));
  clearProblem();
  queueNames = queues.map((q) => q.name);
  const body = $("queues").tBodies[0];
  const rows = queues.map((q) =>
    el(
      "tr",
      { class: q.name === selectedQueue ? "selected" : null },
      el(
        "td",
        { "data-label": "Queue" },
        el("a", { href: `#queue=${encodeURIComponent(q.name)}`, onclick: (ev) => selectQueue(q.name, ev) }, q.name),
      ),
      el("td", { class: "num", "data-label": "Waiting" }, q.waiting ?? 0),
      el("td", { class: "num", "data-label": "Scheduled" }, q.scheduled ?? 0),
      el("td", { class: "num", "data-label": "Active" }, q.active ?? 0),
      el("td", { class: `num${q.dead ? " nonzero-dead" : ""}`, "data-label": "Dead" }, q.dead ?? 0),
      el("td", { class: "num", "data-label": "Oldest waiting" }, q.waiting ? formatDuration(q.oldest_wait) : "—"),
      // A provider's 429 pauses its whole queue (shared cooldown); viewers are open event streams.
      el("td", { class: "num", "data-label": "Cooldown" }, q.cooldown_remaining > 0 ? formatDuration(q.cooldown_remaining) : "—"),
      el("td", { class: "num", "data-label": "Viewers" }, q.viewers ?? "—"),
    ),
  );
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No queues yet."))]));
  $("queues-updated").textContent = `Updated ${formatTime(Date.now())}`;

  const select = $("queue");
  const options = queueNames.map((name) => el("option", { value: name, text: name }));
  if (select.options.length !== options.length || queueNames.some((n, i) => select.options[i].value !== n)) {
    select.replaceChildren(...options);
  }
  if (!selectedQueue || !queueNames.includes(selectedQueue)) {
    const fromHash = hashParams().get("queue");
    await selectQueue(queueNames.includes(fromHash) ? fromHash : queueNames[0] ?? null);
  } else {
    select.value = selectedQueue;
  }
}

async function selectQueue(name, ev) {
  ev?.preventDefault();
  if (name === selectedQueue) return;
  selectedQueue = name;
  $("queue").value = name ?? "";
  for (const row of $("queues").tBodies[0].rows) {
    row.classList.toggle("selected", row.cells[0]?.textContent === name);
  }
  deadSignature = null;
  selectedIds.clear();
  $("dead-status").textContent = "";
  if (!name) return;
  await whileLoading(Promise.allSettled([loadDead(), loadHistory(), setQueue(name)]));
}

// While sections load (the page's first load, a queue's), the ones above a table grow and move
// it, and a click aimed at the table could land elsewhere: <main> says aria-busy meanwhile
// (the page starts with it), and browser tests wait for it to go.
let loading = 0;
async function whileLoading(work) {
  if (loading++ === 0) $("main").setAttribute("aria-busy", "true");
  try {
    return await work;
  } finally {
    if (--loading === 0) $("main").removeAttribute("aria-busy");
  }
}

$("queue").addEventListener("change", (ev) => selectQueue(ev.target.value));

// ---- history chart -----------------------------------------------------------------------

function normalizeBuckets(answer) {
  const list = answer?.buckets ?? answer?.history ?? answer?.lag_history ?? answer ?? [];
  return (Array.isArray(list) ? list : []).map((b) => ({
    start: b.start ?? b.at ?? b.ts,
    depth: Number(b.peak_depth ?? b.depth ?? 0) || 0,
    wait: b.longest_wait ?? b.wait ?? null,
  }));
}

async function loadHistory() {
  if (!selectedQueue) return;
  const queue = selectedQueue;
  let answer;
  try {
    answer = await api(`${queuePath(queue)}/history`);
    historyProblem = null;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    answer = [];
    historyProblem = `History unavailable: ${err.message}`;
  }
  if (queue !== selectedQueue) return;
  historyBuckets = normalizeBuckets(answer);
  renderChart();
  renderHistoryTable();
}

// The same for a wait in seconds, in clock-friendly steps (2 s ... 30 s, 1 min ... 30 min, 1 h ...).
const WAIT_STEPS = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400];
function niceWaitMax(seconds) {
  return WAIT_STEPS.find((v) => v >= seconds) ?? niceMax(seconds);
}

// Axis labels must stay short: "30s", "10m", "4h".
function shortDuration(seconds) {
  if (seconds < 60) return `${+seconds.toFixed(1)}s`;
  if (seconds < 3600) return `${+(seconds / 60).toFixed(1)}m`;
  return `${+(seconds / 3600).toFixed(1)}h`;
}

const clockLabel = (value) => {
  const d = toDate(value);
  return d ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" }) : "";
};

function bucketSummary(b) {
  const wait = b.wait == null ? "no wait recorded" : `longest wait ${formatDuration(b.wait)}`;
  return `${clockLabel(b.start)}: peak depth ${b.depth}, ${wait}`;
}

// Drawn at the element's real pixel width (redrawn on resize), so text never gets squeezed.
function renderChart() {
  const chart = $("chart");
  const title = $("chart-title");
  const width = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 720);
  const height = 240;
  const pad = { left: 40, right: 44, top: 12, bottom: 26 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.replaceChildren(title);

  const buckets = historyBuckets;
  if (buckets.length === 0) {
    chart.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, historyProblem ?? "No history recorded yet"));
    return;
  }
  const depthMax = niceMax(Math.max(...buckets.map((b) => b.depth)));
  const waitMax = niceWaitMax(Math.max(...buckets.map((b) => Number(b.wait) || 0)));
  const step = plotW / buckets.length;
  const yDepth = (v) => pad.top + plotH * (1 - v / depthMax);
  const yWait = (v) => pad.top + plotH * (1 - v / waitMax);

  for (const f of [0, 0.5, 1]) {
    const y = pad.top + plotH * (1 - f);
    chart.append(
      svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y, y2: y }),
      svg("text", { x: pad.left - 6, y: y + 4, "text-anchor": "end" }, String(Math.round(depthMax * f))),
      svg("text", { x: width - pad.right + 6, y: y + 4 }, shortDuration(waitMax * f)),
    );
  }
  const labelEvery = width < 520 ? 12 : 6; // every 6 h on a phone, every 3 h otherwise
  const points = [];
  buckets.forEach((b, i) => {
    const x = pad.left + i * step;
    if (b.depth > 0) {
      const y = yDepth(b.depth);
      chart.append(svg("rect", { class: "bar", x: x + 1, y, width: Math.max(1, step - 2), height: pad.top + plotH - y }));
    }
    if (b.wait != null) points.push([x + step / 2, yWait(Number(b.wait))]);
    if (i % labelEvery === 0) {
      chart.append(svg("text", { x, y: height - 8 }, clockLabel(b.start)));
    }
  });
  if (points.length) {
    chart.append(svg("polyline", { class: "wait-line", points: points.map((p) => p.join(",")).join(" ") }));
    for (const [x, y] of points) chart.append(svg("circle", { class: "wait-dot", cx: x, cy: y, r: 2.5 }));
  }
  // One transparent full-height target per step: native tooltip on hover, readout on tap.
  buckets.forEach((b, i) => {
    const hit = svg(
      "rect",
      { class: `hit${i === chartIndex ? " current" : ""}`, x: pad.left + i * step, y: pad.top, width: step, height: plotH, "data-index": i },
      svg("title", {}, bucketSummary(b)),
    );
    chart.append(hit);
  });
}

function showBucket(index) {
  if (!historyBuckets.length) return;
  chartIndex = Math.max(0, Math.min(historyBuckets.length - 1, index));
  for (const hit of $("chart").querySelectorAll(".hit")) {
    hit.classList.toggle("current", Number(hit.dataset.index) === chartIndex);
  }
  $("chart-readout").textContent = bucketSummary(historyBuckets[chartIndex]);
}

$("chart").addEventListener("pointerover", (ev) => {
  if (ev.target.dataset?.index != null) showBucket(Number(ev.target.dataset.index));
});
$("chart").addEventListener("click", (ev) => {
  if (ev.target.dataset?.index != null) showBucket(Number(ev.target.dataset.index));
});
$("chart").addEventListener("keydown", (ev) => {
  const moves = { ArrowLeft: -1, ArrowRight: 1 };
  if (ev.key in moves) showBucket((chartIndex < 0 ? historyBuckets.length : chartIndex) + moves[ev.key]);
  else if (ev.key === "Home") showBucket(0);
  else if (ev.key === "End") showBucket(historyBuckets.length - 1);
  else return;
  ev.preventDefault();
});
new ResizeObserver(() => renderChart()).observe($("chart"));

function renderHistoryTable() {
  const rows = historyBuckets
    .filter((b) => b.depth > 0 || b.wait != null)
    .map((b) =>
      el(
        "tr",
        {},
        el("td", {}, formatTime(b.start)),
        el("td", { class: "num" }, b.depth),
        el("td", { class: "num" }, b.wait == null ? "—" : formatDuration(b.wait)),
      ),
    );
  $("history-table").tBodies[0].replaceChildren(
    ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 3, class: "empty" }, "Nothing recorded in the last 24 hours."))]),
  );
}

// ---- dead letters ------------------------------------------------------------------------

function normalizeDead(answer) {
  const list = answer?.entries ?? answer?.dead ?? answer?.jobs ?? answer ?? [];
  return (Array.isArray(list) ? list : []).map((d) => (typeof d === "string" ? { id: d } : d));
}

async function loadDead() {
  if (!selectedQueue) return;
  const queue = selectedQueue;
  const answer = await api(`${queuePath(queue)}/dead?count=100`);
  if (queue !== selectedQueue) return;
  const entries = normalizeDead(answer);
  const total = answer?.total ?? entries.length;
  $("dead-count").textContent = total > entries.length ? `${entries.length} shown of ${total}` : plural(total, "job");
  const signature = JSON.stringify(entries);
  if (signature === deadSignature) return; // unchanged: keep the rows, and the keyboard focus in them
  deadSignature = signature;
  deadEntries = entries;
  const present = new Set(entries.map((d) => d.id));
  for (const id of [...selectedIds]) if (!present.has(id)) selectedIds.delete(id);
  renderDead();
}

function renderDead() {
  const body = $("dead").tBodies[0];
  const active = document.activeElement;
  const focusedId = active && $("dead").contains(active) ? active.dataset.jobId : null;
  const rows = deadEntries.map((d) => {
    const checked = selectedIds.has(d.id);
    const error = d.error == null ? "" : String(d.error);
    return el(
      "tr",
      { class: checked ? "selected" : null, "data-job-id": d.id },
      selectCell(d.id, checked, (ev) => toggleSelected(d.id, ev.target.checked), { "data-job-id": d.id }),
      el(
        "td",
        { "data-label": "Job" },
        el("a", { href: `#job=${encodeURIComponent(d.id)}&queue=${encodeURIComponent(selectedQueue)}`, class: "mono" }, d.id),
      ),
      el("td", { "data-label": "Reason" }, el("span", { class: `badge ${d.reason ?? ""}` }, d.reason ?? "—")),
      el("td", { class: "num", "data-label": "Attempts" }, d.attempts ?? "—"),
      el("td", { class: "error", "data-label": "Error", title: error.length > 300 ? error : null }, error.length > 300 ? `${error.slice(0, 300)}…` : error || "—"),
      el("td", { "data-label": "Died" }, formatTime(d.died_at), el("br"), el("span", { class: "muted small" }, formatAgo(d.died_at))),
      el("td", { "data-label": "Payload" }, payloadDetails(d.id)),
    );
  });
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 7, class: "empty" }, "No dead letters."))]));
  if (focusedId) body.querySelector(`input[data-job-id="${CSS.escape(focusedId)}"]`)?.focus();
  updateDeadButtons();
}

// A dead letter's request, fetched when its row is opened (and kept while the row stays).
const deadPayloads = new Map(); // id -> text
const openPayloads = new Set();

function payloadDetails(id) {
  const pre = el("pre", { class: "json" }, deadPayloads.get(id) ?? "Loading…");
  const details = el("details", { class: "payload", open: openPayloads.has(id) }, el("summary", {}, "Show"), pre);
  details.addEventListener("toggle", async () => {
    if (!details.open) {
      openPayloads.delete(id);
      return;
    }
    openPayloads.add(id);
    if (deadPayloads.has(id)) return;
    try {
      const record = await api(`${queuePath(selectedQueue)}/jobs/${encodeURIComponent(id)}`);
      deadPayloads.set(id, pretty(record.payload));
    } catch (err) {
      pre.textContent = `Could not load the payload: ${err.message}`;
      return;
    }
    pre.textContent = deadPayloads.get(id);
  });
  if (openPayloads.has(id) && !deadPayloads.has(id)) queueMicrotask(() => details.dispatchEvent(new Event("toggle")));
  return details;
}

function toggleSelected(id, on) {
  selectRow($("dead"), selectedIds, id, on);
  updateDeadButtons();
}

function updateDeadButtons() {
  const none = selectedIds.size === 0;
  $("retry-selected").disabled = none;
  $("purge-selected").disabled = none;
  $("retry-selected").textContent = none ? "Retry selected" : `Retry ${selectedIds.size} selected`;
  $("purge-selected").textContent = none ? "Purge selected" : `Purge ${selectedIds.size} selected`;
  $("retry-all").disabled = deadEntries.length === 0;
  $("purge-all").disabled = deadEntries.length === 0;
  const all = $("dead-select-all");
  all.checked = deadEntries.length > 0 && selectedIds.size === deadEntries.length;
  all.indeterminate = selectedIds.size > 0 && selectedIds.size < deadEntries.length;
}

$("dead-select-all").addEventListener("change", (ev) => {
  for (const d of deadEntries) ev.target.checked ? selectedIds.add(d.id) : selectedIds.delete(d.id);
  renderDead();
});

// `ids` null means every dead letter of the queue.
async function deadAction(action, ids) {
  const queue = selectedQueue;
  if (!queue) return;
  const what = ids === null ? `every dead letter in ${queue}` : plural(ids.length, "dead letter");
  if (action === "purge" && !window.confirm(`Purge ${what}? They are deleted for good.`)) return;
  if (action === "retry" && ids === null && !window.confirm(`Retry ${what}?`)) return;
  const buttons = ["retry-selected", "purge-selected", "retry-all", "purge-all"].map($);
  for (const b of buttons) b.disabled = true;
  $("dead-status").textContent = action === "retry" ? "Retrying…" : "Purging…";
  try {
    const count = await (action === "retry" ? retryDead(queue, ids) : purgeDead(queue, ids));
    $("dead-status").textContent = `${action === "retry" ? "Retried" : "Purged"} ${plural(Number(count), "job")}.`;
    selectedIds.clear();
  } catch (err) {
    $("dead-status").textContent = `Could not ${action}: ${err.message}`;
  }
  deadSignature = null;
  await Promise.allSettled([loadDead(), loadAudit(), loadQueues()]);
  updateDeadButtons();
}

async function purgeDead(queue, ids) {
  const answer = await api(`${queuePath(queue)}/dead/purge`, {
    method: "POST",
    body: ids === null ? { all: true } : { ids }, // the API refuses `{}`: "all" must be explicit
  });
  return answer?.count ?? answer?.purged ?? (ids ? ids.length : 0);
}

// One request for the lot (`POST .../dead/retry`, recorded once in the audit log). A gateway
// with only the per-job route (`POST .../dead/{id}/retry`) gets one request per job instead.
async function retryDead(queue, ids) {
  try {
    const answer = await api(`${queuePath(queue)}/dead/retry`, { method: "POST", body: ids === null ? { all: true } : { ids } });
    return answer?.count ?? answer?.retried ?? (ids ? ids.length : 0);
  } catch (err) {
    if (!(err instanceof ApiError) || ![404, 405].includes(err.status)) throw err;
  }
  const targets = ids ?? deadEntries.map((d) => d.id);
  let count = 0;
  for (const id of targets) {
    try {
      await api(`${queuePath(queue)}/dead/${encodeURIComponent(id)}/retry`, { method: "POST" });
      count += 1;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err; // 404: no longer dead
    }
  }
  return count;
}

$("retry-selected").addEventListener("click", () => deadAction("retry", [...selectedIds]));
$("purge-selected").addEventListener("click", () => deadAction("purge", [...selectedIds]));
$("retry-all").addEventListener("click", () => deadAction("retry", null));
$("purge-all").addEventListener("click", () => deadAction("purge", null));

// ---- audit log ---------------------------------------------------------------------------

async function loadAudit() {
  let answer;
  try {
    answer = await api("/v1/audit?limit=50");
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    const row = el("tr", {}, el("td", { colspan: 6, class: "empty" }, `Audit log unavailable: ${err.message}`));
    $("audit").tBodies[0].replaceChildren(row);
    return;
  }
  const entries = answer?.entries ?? answer?.audit ?? answer ?? [];
  const rows = (Array.isArray(entries) ? entries : []).map((a) =>
    el(
      "tr",
      {},
      el("td", { "data-label": "When" }, formatTime(a.at ?? a.when ?? a.time)),
      el("td", { "data-label": "Who" }, a.actor ?? a.who ?? a.tenant ?? "—"),
      el("td", { "data-label": "Action" }, a.action ?? "—"),
      el("td", { "data-label": "Queue" }, a.queue ?? "—"),
      el("td", { class: "num", "data-label": "Jobs" }, a.count ?? (Array.isArray(a.ids) ? a.ids.length : "—")),
      el("td", { class: "error", "data-label": "Reason" }, a.reason ?? "—"),
    ),
  );
  $("audit").tBodies[0].replaceChildren(
    ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 6, class: "empty" }, "No operator actions yet."))]),
  );
}

// ---- one job -----------------------------------------------------------------------------

let jobView = null; // {id, queue, token, eventsUrl, source, lastEventId, chunkRow, chunks, terminal}

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

async function fetchJob(id, queue, { withToken = true } = {}) {
  try {
    return await api(`${queuePath(queue)}/jobs/${encodeURIComponent(id)}`);
  } catch (err) {
    // Until the admin job route exists, the tenant route answers for the key's own jobs.
    if (!(err instanceof ApiError) || (err.status !== 404 && err.status !== 405)) throw err;
  }
  const path = `/v1/generations/${encodeURIComponent(id)}`;
  const record = await api(path);
  if (withToken && !record.watch_token) {
    try {
      Object.assign(record, await api(`${path}/token`, { method: "POST" }));
    } catch {
      // no events for this one; the record still shows
    }
  }
  return record;
}

// "12 prompt + 30 completion tokens, $0.000051 (estimated)": the API's usage shape in words.
function describeUsage(usage) {
  const cached = usage.cached_tokens ? ` (${usage.cached_tokens} cached)` : "";
  const estimated = usage.estimated ? " (estimated)" : "";
  return `${usage.prompt_tokens ?? 0} prompt${cached} + ${usage.completion_tokens ?? 0} completion tokens, ${formatUsd(usage.cost_usd)}${estimated}`;
}

function pretty(value) {
  if (value === undefined || value === null) return "—";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Null until the handler reports progress: "no progress" rather than a misleading 0%.
function formatProgress(value) {
  return typeof value === "number" ? `${Math.round(value * 100)}%` : "no progress";
}

const definitions = (fields) => fields.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]);

// The summary is the current attempt (its number, when it started and ended, the last error);
// the table below it lists every attempt that ended.
function renderRecord(record) {
  $("job-record").replaceChildren(
    ...definitions([
      ["Status", el("span", { class: `badge ${record.status ?? ""}` }, record.status ?? "—")],
      ["Queue", record.queue ?? jobView.queue],
      ["Model", record.model ?? "—"],
      ["Progress", formatProgress(record.progress)],
      ["Priority", record.priority ?? "—"],
      ["Tenant", record.tenant ?? "—"],
      ["Idempotency key", record.idempotency_key ?? "—"],
      ["Created", formatTime(record.created_at)],
    ]),
  );
  const ran = record.started_at && record.finished_at ? formatDuration(record.finished_at - record.started_at) : "—";
  $("job-attempts").replaceChildren(
    ...definitions([
      ["Attempts", record.max_attempts ? `${record.attempt ?? 0} of ${record.max_attempts}` : record.attempt ?? "—"],
      ["Started", formatTime(record.started_at)],
      ["Finished", formatTime(record.finished_at)],
      ["Ran for", ran],
      ["Next try", record.status === "scheduled" && record.retry_in != null ? `in ${formatDuration(record.retry_in)}` : "—"],
      ["Last error", record.error ?? "—"],
    ]),
  );
  const history = (record.attempts ?? []).map((a) =>
    el(
      "tr",
      {},
      el("td", { class: "num", "data-label": "Attempt" }, a.attempt),
      el("td", { "data-label": "Started" }, formatTime(a.started_at)),
      el("td", { "data-label": "Ended" }, formatTime(a.ended_at)),
      el("td", { "data-label": "Outcome" }, el("span", { class: `badge ${a.outcome}` }, a.outcome)),
      el("td", { "data-label": "Model" }, a.model ?? "—"),
      el("td", { "data-label": "Usage" }, a.usage ? describeUsage(a.usage) : "none reported"),
      el("td", { "data-label": "Error" }, a.error ?? "—"),
    ),
  );
  const none = el("tr", {}, el("td", { colspan: 7, class: "empty" }, "No attempt has ended yet."));
  $("job-history").tBodies[0].replaceChildren(...(history.length ? history : [none]));
  const usage = record.usage ?? (record.result && typeof record.result === "object" ? record.result.usage : null);
  const answered = record.answered_by ? ` Answered by ${record.answered_by}.` : "";
  $("job-usage").textContent = usage
    ? `${describeUsage(usage)}, every attempt summed.${answered}`
    : "No usage reported.";
  $("job-payload").textContent = pretty(record.payload);
  $("job-result").textContent = pretty(record.result ?? record.text);
  $("job-cancel").disabled = TERMINAL.has(record.status);
  $("job-retry").disabled = !["failed", "cancelled"].includes(record.status);
  $("job-delete").disabled = !TERMINAL.has(record.status);
}

// The job view's own buttons: the same routes as the Jobs view's rows.
async function jobAction(action) {
  const view = jobView;
  if (!view) return;
  const path = `${queuePath(view.queue)}/jobs/${encodeURIComponent(view.id)}`;
  if (action === "delete" && !window.confirm(`Delete job ${view.id}? Its record and output are gone for good.`)) return;
  const why = $("jobs-reason").value.trim() || null;
  try {
    if (action === "delete") {
      await api(why ? `${path}?${new URLSearchParams({ reason: why })}` : path, { method: "DELETE" });
    } else {
      await api(`${path}/${action}`, { method: "POST", body: { reason: why } });
    }
  } catch (err) {
    $("job-status").textContent = `Could not ${action} job ${view.id}: ${err.message}`;
    return;
  }
  await Promise.allSettled([loadJobs(), loadDead(), loadAudit(), loadQueues()]);
  if (jobView !== view) return;
  if (action === "delete") {
    closeJobStream();
    $("job-view").hidden = true;
    $("job-status").textContent = `Deleted job ${view.id}.`;
  } else if (action === "retry") {
    await openJob(view.id, view.queue); // a new attempt: follow its stream from the start
    $("job-status").textContent = `Retried job ${view.id}.`;
  } else {
    await refreshJobRecord();
    $("job-status").textContent = `Cancelled job ${view.id}.`;
  }
}

$("job-cancel").addEventListener("click", () => jobAction("cancel"));
$("job-retry").addEventListener("click", () => jobAction("retry"));
$("job-delete").addEventListener("click", () => jobAction("delete"));

async function openJob(id, queue) {
  closeJobStream();
  id = id.trim();
  if (!id) return;
  queue = queue || selectedQueue;
  $("job-id-input").value = id;
  $("job-status").textContent = "Loading…";
  let record;
  try {
    record = await fetchJob(id, queue);
  } catch (err) {
    $("job-view").hidden = true;
    $("job-status").textContent = err instanceof ApiError && err.status === 404 ? `No job ${id} in ${queue}.` : `Could not load job ${id}: ${err.message}`;
    return;
  }
  jobView = {
    id,
    queue,
    token: record.watch_token,
    eventsUrl: record.events_url || `/v1/generations/${encodeURIComponent(id)}/events`,
    source: null,
    lastEventId: null,
    chunkRow: null,
    chunks: 0,
    terminal: TERMINAL.has(record.status),
  };
  $("job-status").textContent = "";
  renderRecord(record);
  $("job-text").textContent = "";
  $("job-events").tBodies[0].replaceChildren();
  $("job-view").hidden = false;
  const wanted = `#job=${encodeURIComponent(id)}&queue=${encodeURIComponent(queue)}`;
  if (location.hash !== wanted) history.replaceState(null, "", wanted);
  if (jobView.token) openJobStream();
  else $("job-live").textContent = "(no watch token from the gateway: events unavailable)";
}

function closeJobStream() {
  if (jobView?.source) {
    jobView.source.close();
    jobView.source = null;
  }
  $("job-live").textContent = "";
}

function openJobStream() {
  const view = jobView;
  const url = new URL(view.eventsUrl, location.href);
  url.searchParams.set("token", view.token);
  if (view.lastEventId) url.searchParams.set("after", view.lastEventId);
  const es = new EventSource(url);
  view.source = es;
  $("job-live").textContent = "(live)";
  for (const type of EVENT_TYPES) es.addEventListener(type, (ev) => onJobEvent(view, ev));
  es.addEventListener("error", () => {
    if (view.source !== es) return;
    es.close();
    view.source = null;
    $("job-live").textContent = view.terminal ? "(ended)" : "(reconnecting…)";
    if (!view.terminal) setTimeout(() => jobView === view && !view.source && openJobStream(), 2000);
  });
}

function eventTime(id) {
  const ms = Number(String(id).split("-")[0]);
  return Number.isFinite(ms) && ms > 0 ? formatTime(ms) : "—";
}

function onJobEvent(view, ev) {
  if (jobView !== view) return;
  const id = ev.lastEventId;
  if (id && view.lastEventId && compareEventIds(id, view.lastEventId) <= 0) return;
  if (id) view.lastEventId = id;
  let data = null;
  try {
    data = ev.data ? JSON.parse(ev.data) : null;
  } catch {
    data = ev.data;
  }
  const body = $("job-events").tBodies[0];
  const log = body.closest(".event-log");
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 24;
  const { reset, append } = textChange(ev.type, data);
  if (reset) $("job-text").textContent = "";
  if (append) $("job-text").append(document.createTextNode(append));
  if (ev.type === EVENT.CHUNK) {
    // Consecutive chunks share one row, so a long generation stays a short table.
    if (!view.chunkRow) {
      view.chunks = 0;
      view.chunkRow = el("tr", {}, el("td", {}, eventTime(id)), el("td", {}, EVENT.CHUNK), el("td", { class: "muted" }, ""));
      body.append(view.chunkRow);
    }
    view.chunks += 1;
    view.chunkRow.cells[1].textContent = view.chunks === 1 ? EVENT.CHUNK : `${EVENT.CHUNK} ×${view.chunks}`;
    view.chunkRow.cells[2].textContent = `last id ${id}`;
  } else {
    view.chunkRow = null;
    const shown = ev.type === EVENT.COMPLETED ? `${pretty(data?.text ?? data).slice(0, 200)}` : pretty(data).slice(0, 200);
    body.append(el("tr", {}, el("td", {}, eventTime(id)), el("td", {}, el("span", { class: `badge ${ev.type}` }, ev.type)), el("td", { class: "error" }, shown)));
  }
  if (atEnd) log.scrollTop = log.scrollHeight;
  if (TERMINAL.has(ev.type)) {
    view.terminal = true;
    closeJobStream();
    $("job-live").textContent = "(ended)";
    refreshJobRecord();
  }
}

async function refreshJobRecord() {
  const view = jobView;
  if (!view) return;
  const record = await fetchJob(view.id, view.queue, { withToken: false });
  if (jobView === view) renderRecord(record);
}

$("job-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  openJob($("job-id-input").value, selectedQueue);
});

window.addEventListener("hashchange", () => {
  const params = hashParams();
  if (params.get("job")) {
    openJob(params.get("job"), params.get("queue"));
    $("job-section").scrollIntoView({ block: "start" });
  } else if (params.get("queue") && queueNames.includes(params.get("queue"))) {
    selectQueue(params.get("queue"));
  }
});

// ---- polling -----------------------------------------------------------------------------

// Runs `load` every `ms` while the tab is visible, never two at once.
function every(ms, load) {
  let busy = false;
  const tick = async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      await load();
    } catch (err) {
      showProblem(err);
    } finally {
      busy = false;
    }
  };
  setInterval(tick, ms);
  return tick;
}

async function init() {
  await setupKeyField($("admin-key"), "admin", () => refreshAll());
  await setupJobs({ changed: () => Promise.allSettled([loadQueues(), loadDead(), loadAudit()]) });
  setupSpend({ changed: () => Promise.allSettled([loadAudit()]) });
  const ticks = [
    every(2000, loadQueues),
    every(3000, loadDead),
    every(5000, loadAudit),
    every(3000, loadJobs),
    every(60000, loadHistory),
    every(15000, loadSpend),
    every(5000, loadBudgets),
    every(3000, async () => {
      if (jobView && !jobView.terminal) await refreshJobRecord();
    }),
  ];
  const refreshAll = async () => {
    deadSignature = null;
    for (const tick of ticks) await tick();
  };
  document.addEventListener("visibilitychange", () => !document.hidden && refreshAll());
  await whileLoading(refreshAll());
  const params = hashParams();
  if (params.get("job")) openJob(params.get("job"), params.get("queue"));
}

init();
