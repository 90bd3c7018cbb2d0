// The dashboard's Webhook endpoints panel (admin key): every tenant's endpoints
// (`GET /v1/webhooks`); "Deliveries" shows one endpoint's delivery log, newest first
// (`GET /v1/webhooks/{id}/deliveries`): when, event, type, webhook-id (the same on every retry),
// attempt, HTTP status or error, outcome; "Send test" POSTs it a signed sample event now
// (`POST /v1/webhooks/{id}/test`) and shows the log again. The log is polled every 10 s while the
// page is visible.
import { ApiError, el, formatTime, gatewayConfig, request } from "./api.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 10000;
const BADGE = { delivered: "completed", retrying: "scheduled", given_up: "failed" };
const LABEL = { delivered: "delivered", retrying: "retrying", given_up: "given up" };

let chosen = null;

function message(columns, text) {
  return el("tr", {}, el("td", { colspan: columns, class: "empty" }, text));
}

function failure(err, what) {
  const denied = err instanceof ApiError && (err.status === 401 || err.status === 403);
  return denied ? `Set an admin API key under Settings to see ${what}.` : `${what} unavailable: ${err.message}`;
}

function endpointRow(endpoint) {
  return el(
    "tr",
    { "data-endpoint": endpoint.id, class: endpoint.id === chosen ? "selected" : "" },
    el("td", { "data-label": "Endpoint", class: "mono" }, endpoint.id),
    el("td", { "data-label": "Tenant" }, endpoint.tenant),
    el("td", { "data-label": "Name" }, endpoint.name),
    el("td", { "data-label": "URL", class: "mono" }, endpoint.url),
    el("td", { "data-label": "Events" }, endpoint.event_types.join(", ")),
    el(
      "td",
      { "data-label": "Actions" },
      el("button", { type: "button", class: "deliveries", onclick: () => showDeliveries(endpoint.id) }, "Deliveries"),
      " ",
      el("button", { type: "button", class: "send-test", onclick: () => sendTest(endpoint.id) }, "Send test"),
    ),
  );
}

function deliveryRow(entry) {
  const result = entry.status != null ? String(entry.status) : entry.error ?? "—";
  return el(
    "tr",
    { "data-webhook-id": entry.webhook_id, "data-attempt": entry.attempt },
    el("td", { "data-label": "When" }, formatTime(entry.at)),
    el("td", { "data-label": "Event", class: "mono" }, entry.event_id),
    el("td", { "data-label": "Type" }, entry.event_type),
    el("td", { "data-label": "webhook-id", class: "mono" }, entry.webhook_id),
    el("td", { class: "num", "data-label": "Attempt" }, entry.attempt),
    el("td", { class: entry.status != null && entry.status < 300 ? "" : "error", "data-label": "Result", title: entry.error ?? "" }, result),
    el("td", { "data-label": "Outcome" }, el("span", { class: `badge ${BADGE[entry.outcome] ?? ""}` }, LABEL[entry.outcome] ?? entry.outcome)),
  );
}

export async function loadEndpoints() {
  const body = $("webhooks").tBodies[0];
  try {
    const answer = await request("/v1/webhooks", { auth: "admin" });
    const endpoints = answer?.endpoints ?? [];
    body.replaceChildren(...(endpoints.length ? endpoints.map(endpointRow) : [message(6, "No webhook endpoints.")]));
    $("webhooks-status").textContent = `${endpoints.length} endpoint${endpoints.length === 1 ? "" : "s"}; updated ${formatTime(Date.now())}.`;
  } catch (err) {
    body.replaceChildren(message(6, failure(err, "Webhook endpoints")));
    $("webhooks-status").textContent = "";
  }
}

export async function showDeliveries(endpointId) {
  chosen = endpointId;
  for (const row of $("webhooks").tBodies[0].rows) row.classList.toggle("selected", row.dataset.endpoint === chosen);
  $("webhook-deliveries-of").textContent = `of ${endpointId}`;
  const body = $("webhook-deliveries").tBodies[0];
  try {
    const answer = await request(`/v1/webhooks/${encodeURIComponent(endpointId)}/deliveries?limit=50`, { auth: "admin" });
    const entries = answer?.data ?? [];
    body.replaceChildren(...(entries.length ? entries.map(deliveryRow) : [message(7, "No deliveries yet.")]));
    $("webhook-deliveries-status").textContent = `${entries.length} attempt${entries.length === 1 ? "" : "s"} shown, newest first; updated ${formatTime(Date.now())}.`;
  } catch (err) {
    body.replaceChildren(message(7, failure(err, "Deliveries")));
    $("webhook-deliveries-status").textContent = "";
  }
}

async function sendTest(endpointId) {
  try {
    const answer = await request(`/v1/webhooks/${encodeURIComponent(endpointId)}/test`, {
      method: "POST",
      auth: "admin",
      body: { event_type: "response.completed" },
    });
    $("webhooks-status").textContent = `Test event sent to ${endpointId}: HTTP ${answer.status_code}.`;
  } catch (err) {
    $("webhooks-status").textContent = `Test event to ${endpointId} failed: ${err.message}`;
  }
  await showDeliveries(endpointId);
}

async function setup() {
  await gatewayConfig();
  $("webhooks-refresh").addEventListener("click", async () => {
    await loadEndpoints();
    if (chosen) await showDeliveries(chosen);
  });
  $("admin-key").addEventListener("change", () => loadEndpoints());
  setInterval(() => !document.hidden && chosen && showDeliveries(chosen), POLL_MS);
  loadEndpoints();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
else setup();
