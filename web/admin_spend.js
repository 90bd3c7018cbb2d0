// The dashboard's Spend section: cost per UTC day stacked by tenant (`GET /v1/usage`, grouped
// by day and tenant), the same range by tenant and model as a table (grouped by tenant and
// model: the server's sums, not the page's), a 7/30-day range switch, and every tenant's budget
// (`GET /v1/budgets`) with a form that sets (PUT) or removes (DELETE) one.
//
// Costs come as USD floats summed by the server from integer nano-dollars; the page only
// formats them.
import { ApiError, el, niceMax, request, svg } from "./api.js";

const $ = (id) => document.getElementById(id);
const api = (path, options = {}) => request(path, { ...options, auth: "admin" });
const COLORS = 8; // .spend-0 ... .spend-7 in style.css; the eighth is "other tenants"
const OTHER = "other tenants";

const view = {
  days: 7,
  range: null, // {from, to, days: ["YYYY-MM-DD", ...]}
  byDay: [], // [{day, tenant, cost_usd, ...}] as the server answered
  byModel: [], // [{tenant, model, ...}]
  total: null,
  problem: null,
  stacks: [], // per day: {day, total, parts: [{tenant, cost, color}]}
  tenants: [], // legend order: [{tenant, color}]
  index: -1,
};
let budgets = [];
let budgetsSignature = null;
let onChanged = () => {};

// "$0.000150" for a few tokens' worth, "$12.34" from $100 up.
export function formatUsd(value) {
  if (value == null || !Number.isFinite(Number(value))) return "—";
  const n = Number(value);
  return n >= 100 ? `$${n.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}` : `$${n.toFixed(6)}`;
}

const formatCount = (n) => (n == null ? "—" : Number(n).toLocaleString("en-US"));
const shortUsd = (n) => (n === 0 ? "$0" : n >= 1 ? `$${+n.toFixed(2)}` : `$${+n.toPrecision(2)}`);

// The last `days` UTC days, today last.
function utcRange(days) {
  const today = new Date();
  const list = [];
  for (let i = days - 1; i >= 0; i -= 1) {
    const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i));
    list.push(d.toISOString().slice(0, 10));
  }
  return { from: list[0], to: list[list.length - 1], days: list };
}

function usagePath(range, groupBy) {
  const params = new URLSearchParams({ from: range.from, to: range.to, group_by: groupBy, tenant: "*" });
  return `/v1/usage?${params}`;
}

export async function loadSpend() {
  const range = utcRange(view.days);
  let daily;
  let models;
  try {
    [daily, models] = await Promise.all([api(usagePath(range, "day,tenant")), api(usagePath(range, "tenant,model"))]);
    view.problem = null;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    daily = models = null;
    view.problem = `Usage unavailable: ${err.message}`;
  }
  if (range.days.length !== view.days) return; // the range changed while this was loading
  view.range = range;
  view.byDay = daily?.data ?? [];
  view.byModel = models?.data ?? [];
  view.total = models?.total ?? null;
  buildStacks();
  renderChart();
  renderLegend();
  renderModels();
}

// Tenants in order of cost over the range; past the seventh they share one color ("other").
function buildStacks() {
  const perTenant = new Map();
  for (const row of view.byDay) perTenant.set(row.tenant, (perTenant.get(row.tenant) ?? 0) + Number(row.cost_usd));
  const order = [...perTenant.entries()].filter(([, cost]) => cost > 0).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const color = new Map(order.map(([tenant], i) => [tenant, Math.min(i, COLORS - 1)]));
  view.tenants = order.slice(0, COLORS - 1).map(([tenant], i) => ({ tenant, color: i }));
  if (order.length >= COLORS) view.tenants.push({ tenant: OTHER, color: COLORS - 1 });
  view.stacks = view.range.days.map((day) => {
    const parts = view.byDay
      .filter((row) => row.day === day && Number(row.cost_usd) > 0)
      .map((row) => ({ tenant: row.tenant, cost: Number(row.cost_usd), color: color.get(row.tenant) }))
      .sort((a, b) => a.color - b.color);
    return { day, parts, total: parts.reduce((sum, p) => sum + p.cost, 0) };
  });
}

function daySummary(stack) {
  if (!stack.parts.length) return `${stack.day}: no spend`;
  const parts = stack.parts.map((p) => `${p.tenant} ${formatUsd(p.cost)}`).join(", ");
  return `${stack.day}: ${formatUsd(stack.total)} (${parts})`;
}

function renderChart() {
  const chart = $("spend-chart");
  const title = $("spend-chart-title");
  const width = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 720);
  const height = 240;
  const pad = { left: 64, right: 12, top: 12, bottom: 26 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.replaceChildren(title);
  const stacks = view.stacks;
  if (view.problem || !stacks.some((s) => s.total > 0)) {
    const text = view.problem ?? `No spend in the last ${view.days} days`;
    chart.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, text));
    return;
  }
  const top = niceMax(Math.max(...stacks.map((s) => s.total)));
  const y = (v) => pad.top + plotH * (1 - v / top);
  for (const f of [0, 0.5, 1]) {
    chart.append(
      svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y(top * f), y2: y(top * f) }),
      svg("text", { x: pad.left - 6, y: y(top * f) + 4, "text-anchor": "end" }, shortUsd(top * f)),
    );
  }
  const step = plotW / stacks.length;
  const labelEvery = Math.ceil(stacks.length / Math.max(1, Math.floor(plotW / 56)));
  stacks.forEach((stack, i) => {
    const x = pad.left + i * step;
    let base = 0;
    for (const part of stack.parts) {
      const y0 = y(base + part.cost);
      chart.append(
        svg("rect", {
          class: `spend-bar spend-${part.color}`,
          x: x + 2,
          y: y0,
          width: Math.max(1, step - 4),
          height: Math.max(1, y(base) - y0),
          "data-day": stack.day,
          "data-tenant": part.tenant,
          "data-cost": part.cost,
        }),
      );
      base += part.cost;
    }
    if (i % labelEvery === 0) chart.append(svg("text", { x: x + step / 2, y: height - 8, "text-anchor": "middle" }, stack.day.slice(5)));
  });
  stacks.forEach((stack, i) => {
    const cls = `hit${i === view.index ? " current" : ""}`;
    chart.append(svg("rect", { class: cls, x: pad.left + i * step, y: pad.top, width: step, height: plotH, "data-index": i }, svg("title", {}, daySummary(stack))));
  });
}

function showDay(index) {
  if (!view.stacks.length) return;
  view.index = Math.max(0, Math.min(view.stacks.length - 1, index));
  for (const hit of $("spend-chart").querySelectorAll(".hit")) hit.classList.toggle("current", Number(hit.dataset.index) === view.index);
  $("spend-readout").textContent = daySummary(view.stacks[view.index]);
}

function renderLegend() {
  $("spend-legend").replaceChildren(
    ...view.tenants.map(({ tenant, color }) =>
      el("span", { "data-tenant": tenant }, el("span", { class: `swatch spend-${color}`, "aria-hidden": "true" }), tenant),
    ),
  );
}

const COUNT_COLUMNS = [
  ["prompt_tokens", "Prompt tokens"],
  ["completion_tokens", "Completion tokens"],
  ["cached_tokens", "Cached tokens"],
  ["attempts", "Attempts"],
];

function modelRow(cells, row) {
  return el(
    "tr",
    {},
    ...cells,
    ...COUNT_COLUMNS.map(([name, label]) => el("td", { class: "num", "data-label": label }, formatCount(row[name]))),
    el("td", { class: "num", "data-label": "Cost" }, formatUsd(row.cost_usd)),
  );
}

function renderModels() {
  const rows = view.byModel.map((row) =>
    modelRow([el("td", { "data-label": "Tenant" }, row.tenant ?? "—"), el("td", { "data-label": "Model" }, row.model ?? "—")], row),
  );
  const empty = el("tr", {}, el("td", { colspan: 7, class: "empty" }, view.problem ?? `No usage in the last ${view.days} days.`));
  $("spend-models").tBodies[0].replaceChildren(...(rows.length ? rows : [empty]));
  const foot = $("spend-models").tFoot;
  foot.replaceChildren(...(view.total && rows.length ? [modelRow([el("th", { scope: "row", colspan: 2, "data-label": "Total" }, "Total")], view.total)] : []));
  const range = view.range;
  $("spend-total").textContent = view.total
    ? `${formatUsd(view.total.cost_usd)} from ${range.from} to ${range.to} (UTC), every tenant`
    : "";
}

async function setRange(days) {
  view.days = days;
  view.index = -1;
  $("spend-readout").textContent = "";
  for (const b of $("spend-range").querySelectorAll("button")) b.setAttribute("aria-pressed", String(Number(b.dataset.days) === days));
  try {
    await loadSpend();
  } catch (err) {
    $("spend-total").textContent = `Could not load the usage: ${err.message}`; // a refused key: the banner says more at the next poll
  }
}

// ---- budgets -------------------------------------------------------------------------------

// [field, column, is a limit (null: "none")]
const BUDGET_COLUMNS = [
  ["daily_usd", "Daily limit", true],
  ["spent_today_usd", "Spent today", false],
  ["monthly_usd", "Monthly limit", true],
  ["spent_month_usd", "Spent this month", false],
  ["reserved_usd", "Reserved", false],
];

function budgetCells(b) {
  return BUDGET_COLUMNS.map(([name, label, limit]) =>
    el("td", { class: "num", "data-label": label }, b[name] == null ? (limit ? "none" : "—") : formatUsd(b[name])),
  );
}

export async function loadBudgets() {
  let answer;
  try {
    answer = await api("/v1/budgets");
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    budgetsSignature = null;
    $("budgets").tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "empty" }, `Budgets unavailable: ${err.message}`)));
    return;
  }
  const list = Array.isArray(answer) ? answer : answer?.budgets ?? [];
  const signature = JSON.stringify(list);
  if (signature === budgetsSignature) return; // keep the focus on a row's button across polls
  budgetsSignature = signature;
  budgets = list;
  const rows = budgets.map((b) =>
    el(
      "tr",
      { "data-tenant": b.tenant },
      el("td", { "data-label": "Tenant" }, b.tenant),
      ...budgetCells(b),
      // "admin": this API (Remove drops it); "settings": GENQ_TENANT_BUDGETS; "none": no budget.
      el("td", { "data-label": "Set by" }, b.source ?? "—"),
      el("td", { "data-label": "Actions" }, el("button", { type: "button", class: "small", "data-action": "edit", onclick: () => editBudget(b) }, "Edit")),
    ),
  );
  const empty = el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No budgets: every tenant spends without a limit."));
  $("budgets").tBodies[0].replaceChildren(...(rows.length ? rows : [empty]));
}

function editBudget(b) {
  $("budget-tenant").value = b.tenant;
  $("budget-daily").value = b.daily_usd ?? "";
  $("budget-monthly").value = b.monthly_usd ?? "";
  $("budget-status").textContent = "";
  $("budget-daily").focus();
}

// An empty field is "no limit of that kind".
function limitValue(id) {
  const text = $(id).value.trim();
  return text === "" ? null : Number(text);
}

async function saveBudget(ev) {
  ev.preventDefault();
  const tenant = $("budget-tenant").value.trim();
  if (!$("budget-form").reportValidity() || !tenant) return;
  const body = { daily_usd: limitValue("budget-daily"), monthly_usd: limitValue("budget-monthly") };
  await budgetAction(tenant, "PUT", body, `Saved the budget of ${tenant}.`);
}

async function removeBudget() {
  const tenant = $("budget-tenant").value.trim();
  if (!tenant) {
    $("budget-status").textContent = "Name the tenant whose budget to remove.";
    return;
  }
  if (!window.confirm(`Remove the budget of ${tenant}? Only a budget from the gateway's settings then applies.`)) return;
  await budgetAction(tenant, "DELETE", undefined, `Removed the budget of ${tenant}.`);
}

async function budgetAction(tenant, method, body, done) {
  const buttons = [$("budget-save"), $("budget-remove")];
  for (const b of buttons) b.disabled = true;
  $("budget-status").textContent = method === "PUT" ? "Saving…" : "Removing…";
  try {
    await api(`/v1/budgets/${encodeURIComponent(tenant)}`, { method, body });
    $("budget-status").textContent = done;
  } catch (err) {
    $("budget-status").textContent = `Could not ${method === "PUT" ? "save" : "remove"} the budget of ${tenant}: ${err.message}`;
  } finally {
    for (const b of buttons) b.disabled = false;
  }
  budgetsSignature = null;
  await Promise.allSettled([loadBudgets(), onChanged()]);
}

export function setupSpend({ changed } = {}) {
  onChanged = changed ?? onChanged;
  for (const b of $("spend-range").querySelectorAll("button")) b.addEventListener("click", () => setRange(Number(b.dataset.days)));
  $("budget-form").addEventListener("submit", saveBudget);
  $("budget-remove").addEventListener("click", removeBudget);
  const chart = $("spend-chart");
  chart.addEventListener("pointerover", (ev) => ev.target.dataset?.index != null && showDay(Number(ev.target.dataset.index)));
  chart.addEventListener("click", (ev) => ev.target.dataset?.index != null && showDay(Number(ev.target.dataset.index)));
  chart.addEventListener("keydown", (ev) => {
    const moves = { ArrowLeft: -1, ArrowRight: 1 };
    if (ev.key in moves) showDay((view.index < 0 ? view.stacks.length : view.index) + moves[ev.key]);
    else if (ev.key === "Home") showDay(0);
    else if (ev.key === "End") showDay(view.stacks.length - 1);
    else return;
    ev.preventDefault();
  });
  new ResizeObserver(() => view.range && renderChart()).observe(chart);
}
