// The dashboard's Alert deliveries panel: every webhook POST of a dead-letter alert, newest
// first (`GET /v1/alerts?limit=`, admin key): when, webhook, queue, the dead job (a link that
// opens it in the Job section), the attempt, the HTTP status or the error, and the outcome
// (delivered; retrying, with backoff; given up). Polled every 10 s while the page is visible,
// at once on Refresh or when the number of rows shown changes.
import { ApiError, el, formatTime, gatewayConfig, request } from "./api.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 10000;
const COLUMNS = 7;
// The outcome's badge, in the colors style.css gives job statuses.
const BADGE = { delivered: "completed", retrying: "scheduled", given_up: "failed" };
const LABEL = { delivered: "delivered", retrying: "retrying", given_up: "given up" };

let loading = null;

function message(text) {
  return el("tr", {}, el("td", { colspan: COLUMNS, class: "empty" }, text));
}

function jobLink(entry) {
  const hash = `#job=${encodeURIComponent(entry.job_id)}&queue=${encodeURIComponent(entry.queue)}`;
  return el("a", { href: hash, class: "mono" }, entry.job_id);
}

function row(entry) {
  const result = entry.status != null ? String(entry.status) : entry.error ?? "—";
  return el(
    "tr",
    { "data-delivery": entry.delivery, "data-attempt": entry.attempt },
    el("td", { "data-label": "When" }, formatTime(entry.at)),
    el("td", { "data-label": "Webhook" }, entry.webhook),
    el("td", { "data-label": "Queue" }, entry.queue),
    el("td", { "data-label": "Job" }, jobLink(entry)),
    el("td", { class: "num", "data-label": "Attempt" }, entry.attempt),
    el("td", { class: entry.status != null && entry.status < 300 ? "" : "error", "data-label": "Result", title: entry.error ?? "" }, result),
    el("td", { "data-label": "Outcome" }, el("span", { class: `badge ${BADGE[entry.outcome] ?? ""}` }, LABEL[entry.outcome] ?? entry.outcome)),
  );
}

export async function loadAlerts() {
  if (loading) return loading;
  loading = (async () => {
    const limit = Number($("alerts-limit").value) || 50;
    const body = $("alerts").tBodies[0];
    try {
      const answer = await request(`/v1/alerts?limit=${limit}`, { auth: "admin" });
      const entries = answer?.entries ?? [];
      body.replaceChildren(...(entries.length ? entries.map(row) : [message("No alert deliveries yet.")]));
      $("alerts-status").textContent = `${entries.length} attempt${entries.length === 1 ? "" : "s"} shown, newest first; updated ${formatTime(Date.now())}.`;
    } catch (err) {
      const denied = err instanceof ApiError && (err.status === 401 || err.status === 403);
      body.replaceChildren(message(denied ? "Set an admin API key under Settings to see alert deliveries." : `Alert deliveries unavailable: ${err.message}`));
      $("alerts-status").textContent = "";
    }
  })();
  try {
    await loading;
  } finally {
    loading = null;
  }
}

async function setup() {
  // admin.js fills in the dev admin key once the config answers: load after it did.
  await gatewayConfig();
  $("alerts-refresh").addEventListener("click", () => loadAlerts());
  $("alerts-limit").addEventListener("change", () => loadAlerts());
  $("admin-key").addEventListener("change", () => loadAlerts());
  setInterval(() => !document.hidden && loadAlerts(), POLL_MS);
  document.addEventListener("visibilitychange", () => !document.hidden && loadAlerts());
  loadAlerts();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
else setup();
