// The dashboard's Batches panel: every tenant's batches, newest first (`GET
// /v1/admin/batches`, admin key): tenant, endpoint, status, and progress (lines finished of
// the total, failed ones counted), with a Cancel button on a batch still running
// (`POST /v1/admin/batches/{id}/cancel`). Polled every 2 s while a batch runs and the page is
// visible (10 s otherwise), at once on Refresh and after a cancel.
import { ApiError, el, formatTime, gatewayConfig, request } from "./api.js";

const $ = (id) => document.getElementById(id);
const COLUMNS = 7;
const RUNNING = new Set(["validating", "in_progress", "finalizing", "cancelling"]);
const CANCELLABLE = new Set(["validating", "in_progress"]);
// The status badge, in the colors style.css gives job statuses.
const BADGE = {
  validating: "waiting",
  in_progress: "active",
  finalizing: "active",
  completed: "completed",
  failed: "failed",
  cancelling: "scheduled",
  cancelled: "scheduled",
  expired: "scheduled",
};

let loading = null;
let running = false;

function message(text) {
  return el("tr", {}, el("td", { colspan: COLUMNS, class: "empty" }, text));
}

function progress(batch) {
  const { total = 0, completed = 0, failed = 0 } = batch.request_counts ?? {};
  const done = completed + failed;
  return el(
    "td",
    { "data-label": "Progress" },
    el("progress", { max: String(Math.max(total, 1)), value: String(done), "aria-label": `${done} of ${total} lines finished` }),
    ` ${done} / ${total}`,
    failed ? el("span", { class: "error" }, ` (${failed} failed)`) : "",
  );
}

async function cancel(batch, button) {
  button.disabled = true;
  try {
    await request(`/v1/admin/batches/${encodeURIComponent(batch.id)}/cancel`, { method: "POST", auth: "admin" });
    $("batches-status").textContent = `Cancelling ${batch.id}.`;
  } catch (err) {
    $("batches-status").textContent = `Cancel failed: ${err.message}`;
    button.disabled = false;
  }
  await loadBatches();
}

function row(batch) {
  const actions = el("td", { "data-label": "Actions" });
  if (CANCELLABLE.has(batch.status)) {
    const button = el("button", { type: "button", class: "danger", "data-cancel": batch.id }, "Cancel");
    button.addEventListener("click", () => cancel(batch, button));
    actions.append(button);
  }
  return el(
    "tr",
    { "data-batch": batch.id, "data-status": batch.status },
    el("td", { "data-label": "Created" }, formatTime(batch.created_at * 1000)),
    el("td", { "data-label": "Batch", class: "mono" }, batch.id),
    el("td", { "data-label": "Tenant" }, batch.tenant ?? ""),
    el("td", { "data-label": "Endpoint", class: "mono" }, batch.endpoint),
    el("td", { "data-label": "Status" }, el("span", { class: `badge ${BADGE[batch.status] ?? ""}` }, batch.status.replace("_", " "))),
    progress(batch),
    actions,
  );
}

export async function loadBatches() {
  if (loading) return loading;
  loading = (async () => {
    const body = $("batches").tBodies[0];
    try {
      const answer = await request("/v1/admin/batches?limit=50", { auth: "admin" });
      const batches = answer?.batches ?? [];
      running = batches.some((b) => RUNNING.has(b.status));
      body.replaceChildren(...(batches.length ? batches.map(row) : [message("No batches yet.")]));
      $("batches-updated").textContent = `Updated ${formatTime(Date.now())}`;
    } catch (err) {
      const denied = err instanceof ApiError && (err.status === 401 || err.status === 403);
      body.replaceChildren(message(denied ? "Set an admin API key under Settings to see batches." : `Batches unavailable: ${err.message}`));
    }
  })();
  try {
    await loading;
  } finally {
    loading = null;
  }
}

function schedule() {
  setTimeout(async () => {
    if (!document.hidden) await loadBatches();
    schedule();
  }, running ? 2000 : 10000);
}

async function setup() {
  // admin.js fills in the dev admin key once the config answers: load after it did.
  await gatewayConfig();
  $("batches-refresh").addEventListener("click", () => loadBatches());
  $("admin-key").addEventListener("change", () => loadBatches());
  document.addEventListener("visibilitychange", () => !document.hidden && loadBatches());
  await loadBatches();
  schedule();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
else setup();
