// The dashboard's Jobs view: one queue's jobs by status (with counts), filtered by tenant and
// model or found by id / idempotency key, a page at a time; cancel, retry or delete one job, the
// selected ones or all of a status (each bulk action confirms how many); the enqueue dialog.
//
// Polled like the rest of the dashboard; the rows are rebuilt only when the answer changed, so
// a checkbox or a focused button survives the poll.
import { ApiError, el, formatAgo, formatTime, request, selectCell, selectRow } from "./api.js";

const $ = (id) => document.getElementById(id);
const api = (path, options = {}) => request(path, { ...options, auth: "admin" });
const queuePath = (queue) => `/v1/queues/${encodeURIComponent(queue)}`;
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const PAGE_SIZE = 25;

// What each action may touch: a row shows the buttons its status allows; the "all" buttons
// appear on the tabs they apply to (the contract's statuses for {"all": true}).
const ACTIONS = {
  cancel: { label: "Cancel", doing: "Cancelling…", done: "Cancelled", statuses: ["waiting", "scheduled", "active"] },
  retry: { label: "Retry", doing: "Retrying…", done: "Retried", statuses: ["failed", "cancelled"] },
  delete: { label: "Delete", doing: "Deleting…", done: "Deleted", statuses: ["completed", "failed", "cancelled"] },
};
const STATUSES = ["waiting", "scheduled", "active", "completed", "failed", "cancelled"];

const view = {
  queue: null,
  status: "",
  tenant: "",
  model: "",
  q: "",
  cursors: [null], // the cursor of each page seen, so "Newer" can go back
  page: 0,
  next: null,
  rows: [],
  counts: {},
  signature: null,
  asked: 0, // listings asked for: an answer that a newer one overtook is not shown
};
const selected = new Set();
let models = []; // [{id, owned_by}] from GET /v1/models
let onChanged = () => {}; // the dashboard reloads its counts, dead letters and audit log

const reason = () => $("jobs-reason").value.trim() || null;

function setStatus(text) {
  $("jobs-status").textContent = text;
}

// ---- listing -----------------------------------------------------------------------------

export async function loadJobs() {
  const queue = view.queue;
  if (!queue) return;
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  for (const name of ["status", "tenant", "model", "q"]) if (view[name]) params.set(name, view[name]);
  const cursor = view.cursors[view.page];
  if (cursor) params.set("cursor", cursor);
  // A poll of the tab before may answer after the tab clicked since: its rows would replace
  // the new ones until the next poll, and "select all" would select them.
  const ticket = ++view.asked;
  let answer;
  try {
    answer = await api(`${queuePath(queue)}/jobs?${params}`);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    if (ticket !== view.asked) return;
    view.signature = null;
    view.rows = [];
    setStatus(`Could not list the jobs: ${err.message}`);
    renderRows(`No jobs listed: ${err.message}`);
    return;
  }
  if (ticket !== view.asked) return;
  view.counts = answer.counts ?? {};
  view.next = answer.next_cursor ?? null;
  renderTabs();
  renderPager();
  const signature = JSON.stringify(answer.jobs);
  if (signature === view.signature) return;
  view.signature = signature;
  view.rows = answer.jobs ?? [];
  const present = new Set(view.rows.map((j) => j.id));
  for (const id of [...selected]) if (!present.has(id)) selected.delete(id);
  renderRows();
}

function renderTabs() {
  const total = STATUSES.reduce((sum, s) => sum + (Number(view.counts[s]) || 0), 0);
  for (const tab of $("jobs-tabs").querySelectorAll("button")) {
    const status = tab.dataset.status;
    const n = status ? Number(view.counts[status]) || 0 : total;
    tab.querySelector(".count").textContent = String(n);
    tab.setAttribute("aria-pressed", String(status === view.status));
  }
  // "All of this status": the server snapshots the ids of the status (and tenant), so the
  // buttons hide while a model filter or a search narrows the rows to something it cannot.
  const narrowed = Boolean(view.model || view.q);
  const n = Number(view.counts[view.status]) || 0;
  const act = $("jobs-act-all");
  const action = Object.keys(ACTIONS).find((a) => a !== "delete" && ACTIONS[a].statuses.includes(view.status)) ??
    (view.status === "completed" ? "delete" : null);
  act.hidden = narrowed || !action;
  if (action) {
    act.dataset.action = action;
    act.textContent = `${ACTIONS[action].label} all ${n} ${view.status}`;
    act.className = action === "delete" ? "danger" : "";
    act.disabled = n === 0;
  }
  const del = $("jobs-delete-all");
  del.hidden = narrowed || !["failed", "cancelled"].includes(view.status);
  del.textContent = `Delete all ${n} ${view.status}`;
  del.disabled = n === 0;
}

function renderPager() {
  $("jobs-newer").disabled = view.page === 0;
  $("jobs-older").disabled = !view.next;
  $("jobs-page").textContent = `Page ${view.page + 1}`;
}

function rowButtons(job) {
  return Object.entries(ACTIONS)
    .filter(([, a]) => a.statuses.includes(job.status))
    .map(([name, a]) =>
      el(
        "button",
        {
          type: "button",
          class: `small${name === "delete" ? " danger" : ""}`,
          "data-action": name,
          "aria-label": `${a.label} job ${job.id}`,
          onclick: () => rowAction(name, job),
        },
        a.label,
      ),
    );
}

function renderRows(emptyText) {
  const body = $("jobs").tBodies[0];
  const active = document.activeElement;
  const focused = active && body.contains(active) ? [active.closest("tr")?.dataset.jobId, active.dataset.action ?? "check"] : null;
  const rows = view.rows.map((job) => {
    const checked = selected.has(job.id);
    const href = `#job=${encodeURIComponent(job.id)}&queue=${encodeURIComponent(job.queue ?? view.queue)}`;
    return el(
      "tr",
      { class: checked ? "selected" : null, "data-job-id": job.id, "data-status": job.status },
      selectCell(job.id, checked, (ev) => toggle(job.id, ev.target.checked), { "data-action": "check" }),
      el("td", { "data-label": "Job" }, el("a", { href, class: "mono" }, job.id)),
      el("td", { "data-label": "Status" }, el("span", { class: `badge ${job.status}` }, job.status)),
      el("td", { "data-label": "Tenant" }, job.tenant ?? "—"),
      el("td", { "data-label": "Model" }, job.model ?? "—"),
      el("td", { class: "num", "data-label": "Attempts" }, job.max_attempts ? `${job.attempt} of ${job.max_attempts}` : job.attempt ?? "—"),
      el("td", { "data-label": "Created" }, formatTime(job.created_at), el("br"), el("span", { class: "muted small" }, formatAgo(job.created_at))),
      el("td", { "data-label": "Actions" }, el("span", { class: "actions" }, rowButtons(job))),
    );
  });
  const empty = emptyText ?? (view.q ? `No job matches ${view.q}.` : "No jobs here.");
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "empty" }, empty))]));
  if (focused?.[0]) body.querySelector(`tr[data-job-id="${CSS.escape(focused[0])}"] [data-action="${focused[1]}"]`)?.focus();
  updateSelection();
}

function toggle(id, on) {
  selectRow($("jobs"), selected, id, on);
  updateSelection();
}

// A bulk button is enabled when at least one selected job is in a status it can act on.
function updateSelection() {
  const chosen = view.rows.filter((j) => selected.has(j.id));
  for (const [name, a] of Object.entries(ACTIONS)) {
    const button = $(`jobs-${name}-selected`);
    const n = chosen.filter((j) => a.statuses.includes(j.status)).length;
    button.disabled = n === 0;
    button.textContent = n === 0 ? `${a.label} selected` : `${a.label} ${n} selected`;
  }
  const all = $("jobs-select-all");
  all.checked = view.rows.length > 0 && chosen.length === view.rows.length;
  all.indeterminate = chosen.length > 0 && chosen.length < view.rows.length;
}

// ---- actions -----------------------------------------------------------------------------

async function afterAction() {
  view.signature = null;
  await Promise.allSettled([loadJobs(), onChanged()]);
}

async function rowAction(action, job) {
  const queue = view.queue;
  const path = `${queuePath(queue)}/jobs/${encodeURIComponent(job.id)}`;
  if (action === "delete" && !window.confirm(`Delete job ${job.id}? Its record and output are gone for good.`)) return;
  try {
    if (action === "delete") {
      const why = reason();
      await api(why ? `${path}?${new URLSearchParams({ reason: why })}` : path, { method: "DELETE" });
      setStatus(`Deleted job ${job.id}.`);
    } else {
      const answer = await api(`${path}/${action}`, { method: "POST", body: { reason: reason() } });
      if (action === "cancel" && answer && !answer.ok) setStatus(`Job ${job.id} had already finished (${answer.status}).`);
      else setStatus(`${ACTIONS[action].done} job ${job.id}.`);
    }
  } catch (err) {
    setStatus(`Could not ${action} job ${job.id}: ${err.message}`);
  }
  selected.delete(job.id);
  await afterAction();
}

// `ids` null: every job of the current tab's status (and tenant filter), as the server lists
// them when the request arrives.
async function bulkAction(action, ids) {
  const queue = view.queue;
  const status = view.status;
  const tenant = view.tenant || null;
  const count = ids === null ? Number(view.counts[status]) || 0 : ids.length;
  const which = ids === null ? `all ${plural(count, `${status} job`)}` : plural(count, "selected job");
  const scope = `in ${queue}${ids === null && tenant ? ` of tenant ${tenant}` : ""}`;
  const warning = action === "delete" ? " They are deleted for good." : "";
  if (!window.confirm(`${ACTIONS[action].label} ${which} ${scope}?${warning}`)) return;
  const body = ids === null ? { all: true, status, reason: reason() } : { ids, reason: reason() };
  if (ids === null && tenant) body.tenant = tenant;
  setStatus(ACTIONS[action].doing);
  try {
    const answer = await api(`${queuePath(queue)}/jobs/${action}`, { method: "POST", body });
    const { count: acted, matched } = answer;
    setStatus(
      acted === matched
        ? `${ACTIONS[action].done} ${plural(acted, "job")}.`
        : `${ACTIONS[action].done} ${acted} of ${plural(matched, "job")} (the others had moved on).`,
    );
    selected.clear();
  } catch (err) {
    setStatus(`Could not ${action}: ${err.message}`);
  }
  await afterAction();
}

// ---- filters, tabs, pages ----------------------------------------------------------------

function restart() {
  view.cursors = [null];
  view.page = 0;
  view.signature = null;
  selected.clear();
  return loadJobs();
}

export function setQueue(queue) {
  if (queue === view.queue) return Promise.resolve();
  view.queue = queue;
  fillModels();
  setStatus("");
  return restart();
}

function fillModels() {
  const mine = models.filter((m) => m.owned_by === view.queue).map((m) => m.id);
  const list = mine.length ? mine : models.map((m) => m.id);
  for (const [id, first] of [["jobs-model", "any"], ["enqueue-model", null]]) {
    const select = $(id);
    const keep = select.value;
    const options = list.map((m) => el("option", { value: m, text: m }));
    select.replaceChildren(...(first ? [el("option", { value: "", text: first })] : []), ...options);
    if ([...select.options].some((o) => o.value === keep)) select.value = keep;
  }
}

async function loadModels() {
  try {
    const answer = await api("/v1/models");
    models = (answer?.data ?? []).map((m) => ({ id: m.id, owned_by: m.owned_by }));
  } catch {
    models = [];
  }
  fillModels();
}

// ---- the enqueue dialog ------------------------------------------------------------------

function openEnqueue() {
  $("enqueue-queue").textContent = view.queue ?? "";
  $("enqueue-error").textContent = "";
  if (!$("enqueue-tenant").value && view.tenant) $("enqueue-tenant").value = view.tenant;
  $("enqueue-dialog").showModal();
  ($("enqueue-tenant").value ? $("enqueue-prompt") : $("enqueue-tenant")).focus();
}

async function enqueue(ev) {
  ev.preventDefault();
  const form = $("enqueue-form");
  if (!form.reportValidity()) return;
  const queue = view.queue;
  const tenant = $("enqueue-tenant").value.trim();
  const body = {
    tenant,
    model: $("enqueue-model").value,
    prompt: $("enqueue-prompt").value,
    priority: Number($("enqueue-priority").value) || 0,
    delay_ms: Math.round((Number($("enqueue-delay").value) || 0) * 1000),
  };
  const params = $("enqueue-params").value.trim();
  if (params) {
    try {
      body.params = JSON.parse(params);
    } catch {
      $("enqueue-error").textContent = "Params must be a JSON object.";
      $("enqueue-params").focus();
      return;
    }
  }
  const attempts = $("enqueue-attempts").value;
  if (attempts) body.max_attempts = Number(attempts);
  const why = $("enqueue-reason").value.trim();
  if (why) body.reason = why;
  const key = $("enqueue-key").value.trim();
  const button = $("enqueue-submit");
  button.disabled = true;
  $("enqueue-error").textContent = "";
  try {
    const answer = await api(`${queuePath(queue)}/jobs`, {
      method: "POST",
      body,
      headers: key ? { "Idempotency-Key": key } : {},
    });
    $("enqueue-dialog").close();
    $("enqueue-prompt").value = "";
    $("enqueue-key").value = "";
    $("enqueue-reason").value = "";
    $("enqueue-params").value = "";
    const href = `#job=${encodeURIComponent(answer.id)}&queue=${encodeURIComponent(queue)}`;
    const what = answer.deduplicated ? "Already enqueued with that key:" : "Enqueued";
    $("jobs-status").replaceChildren(`${what} job `, el("a", { href, class: "mono", id: "enqueued-link" }, answer.id), ` for tenant ${tenant}.`);
    await afterAction();
  } catch (err) {
    $("enqueue-error").textContent = `Could not enqueue: ${err.message}`;
  } finally {
    button.disabled = false;
  }
}

// ---- wiring ------------------------------------------------------------------------------

export function setupJobs({ changed }) {
  onChanged = changed;
  for (const tab of $("jobs-tabs").querySelectorAll("button")) {
    tab.addEventListener("click", () => {
      view.status = tab.dataset.status;
      renderTabs();
      restart();
    });
  }
  $("jobs-filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    view.tenant = $("jobs-tenant").value.trim();
    view.model = $("jobs-model").value;
    view.q = $("jobs-q").value.trim();
    setStatus("");
    restart();
  });
  $("jobs-clear").addEventListener("click", () => {
    $("jobs-filters").reset();
    view.tenant = view.model = view.q = "";
    setStatus("");
    restart();
  });
  $("jobs-older").addEventListener("click", () => {
    if (!view.next) return;
    view.cursors[view.page + 1] = view.next;
    view.page += 1;
    view.signature = null;
    loadJobs();
  });
  $("jobs-newer").addEventListener("click", () => {
    if (view.page === 0) return;
    view.page -= 1;
    view.signature = null;
    loadJobs();
  });
  $("jobs-select-all").addEventListener("change", (ev) => {
    for (const j of view.rows) ev.target.checked ? selected.add(j.id) : selected.delete(j.id);
    renderRows();
  });
  for (const name of Object.keys(ACTIONS)) {
    $(`jobs-${name}-selected`).addEventListener("click", () => {
      const ids = view.rows.filter((j) => selected.has(j.id) && ACTIONS[name].statuses.includes(j.status)).map((j) => j.id);
      if (ids.length) bulkAction(name, ids);
    });
  }
  $("jobs-act-all").addEventListener("click", (ev) => bulkAction(ev.target.dataset.action, null));
  $("jobs-delete-all").addEventListener("click", () => bulkAction("delete", null));
  $("enqueue-open").addEventListener("click", openEnqueue);
  $("enqueue-cancel").addEventListener("click", () => $("enqueue-dialog").close());
  $("enqueue-form").addEventListener("submit", enqueue);
  return loadModels();
}
