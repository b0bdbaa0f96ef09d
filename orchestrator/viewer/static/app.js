// The page of `orchestrator view`: hash routes over the server's JSON API (docs/viewer.md).
// Answers are untrusted model output: every text reaches the page through textContent, never
// innerHTML, so nothing a model writes can become markup or script.
"use strict";

const POLL_MS = 3000;
const PAGE_SIZE = 50;
const FILTERS = ["study", "experiment", "condition", "variant", "strategy", "model", "status", "q"];
const SECTIONS = ["overview", "answers", "detail", "effect-view", "history"];

const $ = (sel) => document.querySelector(sel);
let facets = null;        // /api/facets, fetched once
let pollTimer = null;     // the overview's refresh while tasks are pending
let lastList = "#/answers"; // where #detail-close returns to
let routeSerial = 0;      // a slow answer for a route left since is dropped

// --- small helpers -----------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = String(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k.startsWith("data-")) node.setAttribute(k, String(v));
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function digits(n) { return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"); }

function num(x, places = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return digits(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
  return x.toFixed(places);
}

// A robust estimate beside the mean, where a study has one (numbers): "estimate [low, high]".
function robust(e) {
  if (e.robust === null || e.robust === undefined) return "";
  return e.robust_low === null || e.robust_low === undefined ? num(e.robust)
    : `${num(e.robust)} [${num(e.robust_low)}, ${num(e.robust_high)}]`;
}

// What a reader must know before trusting the mean: a few answers carry it, or some are implausible.
function warnings(e) {
  const out = [];
  if (e.dominated) out.push("a few answers dominate the mean");
  if (e.implausible) out.push(`${digits(e.implausible)} outside the plausible range`);
  return out;
}

function usd(x) { return x === null || x === undefined ? "" : "$" + Number(x).toFixed(4); }

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

function showError(message, fix) {
  const banner = $("#error-banner");
  clear(banner).append(el("strong", { text: message || "error" }));
  if (fix) banner.append(el("span", { class: "fix", text: " " + fix }));
  banner.append(el("button", { type: "button", class: "dismiss", text: "×", onclick: () => { banner.hidden = true; } }));
  banner.hidden = false;
}

async function api(path) {
  let resp;
  try {
    resp = await fetch(path, { headers: { Accept: "application/json" } });
  } catch (e) {
    showError("the viewer's server does not answer", "is `orchestrator view` still running?");
    throw e;
  }
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) {
    const err = body && body.error ? body.error : `HTTP ${resp.status} on ${path}`;
    showError(err, body ? body.fix : null);
    throw new Error(err);
  }
  return body;
}

function table(node, headers, rows) {
  const head = clear(node.tHead || node.createTHead());
  head.append(el("tr", {}, ...headers.map((h) => el("th", { text: h }))));
  const body = clear(node.tBodies[0] || node.createTBody());
  for (const r of rows) body.append(r);
  return body;
}

function show(id) {
  for (const s of SECTIONS) $("#" + s).hidden = s !== id;
  $("#nav-overview").classList.toggle("active", id === "overview");
  $("#nav-answers").classList.toggle("active", id === "answers");
  $("#nav-history").classList.toggle("active", id === "history");
}

// --- overview ----------------------------------------------------------------------------

function counts(byStatus) {
  return Object.entries(byStatus || {}).map(([s, n]) => `${s} ${digits(n)}`).join(", ");
}

function settingsCell(s) {
  // scalars inline; a nested setting (a simulated model's planted effects) folded away
  const entries = Object.entries(s || {}).filter(([, v]) => v !== null && v !== undefined && v !== "");
  const flat = entries.filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k}=${v}`).join("  ");
  const cell = el("td", { class: "settings" }, el("span", { text: flat }));
  for (const [k, v] of entries.filter(([, v]) => typeof v === "object")) {
    cell.append(el("details", {}, el("summary", { text: k }), pre(JSON.stringify(v, null, 2))));
  }
  return cell;
}

function renderOverview(data) {
  const run = data.run || {};
  clear($("#run-header")).append(
    el("h1", { text: `${run.campaign} / ${run.runId}` }),
    el("dl", { class: "facts" },
      ...[["started", run.createdAt], ["software", run.software], ["seed", run.seed],
          ["plan", run.planHash], ["tasks", digits(run.tasks)], ["spend", usd(data.spendUsd)]]
        .flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v === null || v === undefined ? "" : v })])));
  const note = $("#overview-note");
  note.hidden = !data.note;
  note.textContent = data.note || "";

  table($("#models"), ["model", "settings", "progress", "status", "spend"], (data.models || []).map((m) => {
    const pct = m.tasks ? Math.round((100 * m.done) / m.tasks) : 0;
    return el("tr", { "data-model-key": m.key },
      el("td", {}, el("span", { text: m.label }), el("br"), el("code", { class: "muted", text: m.key })),
      settingsCell(m.settings),
      el("td", { class: "progress" },
        el("span", { class: "done", text: `${digits(m.done)} / ${digits(m.tasks)}` }),
        el("span", { class: "bar" }, el("span", { class: "fill", style: `width:${pct}%` })),
        m.pending ? el("span", { class: "pending", text: ` ${digits(m.pending)} pending` }) : null),
      el("td", { text: counts(m.byStatus) }),
      el("td", { class: "num", text: usd(m.spendUsd) }));
  }));

  const sc = clear($("#status-counts"));
  for (const [status, n] of Object.entries(data.statusCounts || {})) {
    sc.append(el("a", { class: `status-count status-${status}`, "data-status": status,
                        href: "#/answers" + query({ status }) },
      el("span", { class: "label", text: status }), " ", el("span", { class: "n", text: digits(n) })));
  }

  table($("#effects"), ["study", "measure", "experiment", "strategy", "model", "effect", "95% CI", "p", "n", "robust [95% CI]", "", ""],
    (data.effects || []).map((e) => el("tr", {},
      el("td", { text: e.study }), el("td", { text: e.measure }), el("td", { text: e.experiment }),
      el("td", { text: e.strategy ?? "" }), el("td", { text: e.model }),
      el("td", { class: "num", text: num(e.effect) }),
      el("td", { class: "num", text: e.ci_low === null || e.ci_low === undefined ? "" : `[${num(e.ci_low)}, ${num(e.ci_high)}]` }),
      el("td", { class: "num", text: num(e.p) }), el("td", { class: "num", text: digits(e.n) }),
      el("td", { class: "num robust", text: robust(e) }),
      el("td", { class: "warn", text: warnings(e).join("; ") }),
      el("td", {}, el("button", { type: "button", class: "show-answers", text: "answers",
        onclick: () => { location.hash = "#/effect" + query({ study: e.study, measure: e.measure,
          experiment: e.experiment, strategy: e.strategy, model: e.modelKey }); } })))));
  $("#updated-at").textContent = data.updatedAt ? `updated ${data.updatedAt}` : "";
}

let stillRunning = false;  // the last overview had tasks pending: keep refreshing, errors or not
async function loadOverview(serial) {
  try {
    const data = await api("/api/overview");
    if (serial !== routeSerial) return;
    renderOverview(data);
    stillRunning = (data.models || []).some((m) => m.pending > 0);
  } finally {  // one failed refresh (a file being rewritten, a hiccup) must not end them
    if (stillRunning && serial === routeSerial) {
      pollTimer = setTimeout(() => loadOverview(serial).catch(() => {}), POLL_MS);
    }
  }
}

// --- answers browser ---------------------------------------------------------------------

function option(value, text) { return el("option", { value: String(value), text: String(text) }); }

function fillSelect(name, values, experiment) {
  const select = $(`#filters select[name="${name}"]`);
  const current = select.value;
  clear(select).append(option("", "all"));
  if (name === "model") for (const m of values) select.append(option(m.key, m.label));
  else if (name === "condition") {
    const seen = new Map();
    for (const c of values) {
      if (experiment && c.experiment !== experiment) continue;
      const label = experiment ? `${c.index}: ${c.label}` : `${c.index}`;
      if (!seen.has(c.index)) seen.set(c.index, label);
    }
    for (const [index, label] of [...seen.entries()].sort((a, b) => a[0] - b[0])) select.append(option(index, label));
  } else for (const v of values) select.append(option(v, v));
  select.value = current;
}

async function ensureFacets() {
  if (!facets) facets = await api("/api/facets");
  for (const name of FILTERS) if (name !== "q" && name !== "condition") fillSelect(name, facets[name] || []);
}

function filtersFromForm() {
  const out = {};
  for (const name of FILTERS) {
    const v = $(`#filters [name="${name}"]`).value.trim();
    if (v) out[name] = v;
  }
  return out;
}

function goAnswers(params) { location.hash = "#/answers" + query(params); }

function answerRow(r) {
  const cond = r.conditionLabel ? `${r.condition}: ${r.conditionLabel}` : r.condition;
  return el("tr", { "data-task-id": r.taskId, class: `status-${r.status}`, tabIndex: 0,
                    onclick: () => { location.hash = "#/answer/" + encodeURIComponent(r.taskId); } },
    el("td", { text: r.experiment }), el("td", { text: cond ?? "" }), el("td", { text: r.variant ?? "" }),
    el("td", { text: r.strategy ?? "" }), el("td", { text: r.model ?? r.modelKey }),
    el("td", { class: "status", text: r.status }), el("td", { class: "answer", text: r.answer ?? "" }),
    el("td", { class: "raw", text: r.raw ?? "", title: r.raw ?? "" }));
}

const ANSWER_HEADERS = ["experiment", "condition", "variant", "strategy", "model", "status", "answer", "raw"];

async function loadAnswers(params, serial) {
  await ensureFacets();
  for (const name of FILTERS) {
    if (name === "condition") fillSelect("condition", facets.condition || [], params.experiment);
    const input = $(`#filters [name="${name}"]`);
    if (input !== document.activeElement) input.value = params[name] ?? ""; // never under the typist's cursor
  }
  const page = Math.max(1, parseInt(params.page || "1", 10) || 1);
  const filters = {};
  for (const name of FILTERS) if (params[name]) filters[name] = params[name];
  const data = await api("/api/answers" + query({ ...filters, page, size: PAGE_SIZE }));
  if (serial !== routeSerial) return;
  lastList = location.hash || "#/answers";
  $("#answers-total").textContent = digits(data.total);
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  $("#page-info").textContent = `page ${digits(data.page)} of ${digits(pages)}`;
  $("#prev-page").disabled = data.page <= 1;
  $("#next-page").disabled = data.page >= pages;
  $("#prev-page").onclick = () => goAnswers({ ...filters, page: data.page - 1 });
  $("#next-page").onclick = () => goAnswers({ ...filters, page: data.page + 1 });
  table($("#answers-table"), ANSWER_HEADERS, data.rows.map(answerRow));
}

// --- one result --------------------------------------------------------------------------

function pre(text, cls) { return el("pre", { class: cls || "", text: text ?? "" }); }

function asText(x) {
  if (x === null || x === undefined) return "";
  return typeof x === "string" ? x : JSON.stringify(x, null, 2);
}

function renderDetail(data) {
  const r = data.record || {};
  const usage = r.usage || {};
  const tokens = Object.keys(usage).length
    ? `${digits(usage.prompt_tokens ?? usage.input_tokens)} in, ${digits(usage.completion_tokens ?? usage.output_tokens)} out` : "";
  const model = r.model || {};
  const facts = [
    ["task", r.taskId], ["study", data.study], ["experiment", r.experimentSlug],
    ["condition", `${r.conditionIndex ?? ""}${data.conditionLabel ? ": " + data.conditionLabel : ""}`],
    ["variant", r.variant], ["strategy", r.strategy], ["sample", r.sample],
    ["model", [model.provider, model.name].filter(Boolean).join("/") + (r.servedModel ? ` (served: ${r.servedModel})` : "")],
    ["status", r.status], ["attempts", r.attempts], ["latency", r.latencyMs === null || r.latencyMs === undefined ? "" : `${num(r.latencyMs, 1)} ms`],
    ["tokens", tokens], ["cost", usd(r.costUsd)], ["finished", r.finishedAt],
  ];
  const body = clear($("#detail-body"));
  body.append(el("h2", { text: `result ${r.taskId || ""}` }),
    el("dl", { class: "facts", id: "detail-facts" },
      ...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { class: `fact-${k}`, text: v ?? "" })])));
  const messages = el("div", { id: "detail-messages" });
  for (const m of data.messages || []) {
    messages.append(el("div", { class: `message role-${m.role}` },
      el("div", { class: "role", text: m.role }), pre(asText(m.content), "content")));
  }
  body.append(el("h3", { text: "messages" }), messages);
  const response = r.response || {};
  body.append(el("h3", { text: "raw answer" }), pre(response.raw ?? "", "raw-answer"));
  if (typeof response.reasoning === "string") {  // a reasoning model's own trace, folded
    body.append(el("details", { id: "detail-reasoning" },
      el("summary", { text: "the model's reasoning (kept apart from its answer)" }),
      pre(response.reasoning, "reasoning-text")));
  }
  body.append(el("h3", { text: "parsed answer" }), pre(data.parsed ? asText(data.parsed) : "(none)", "parsed-answer"));
  if (r.error) body.append(el("h3", { text: "error" }), pre(asText(r.error), "error-text"));
  body.append(el("details", {}, el("summary", { text: "full record" }), pre(asText(r), "record")));
}

async function loadDetail(taskId, serial, part) {
  const data = await api("/api/answer/" + encodeURIComponent(taskId) + (part ? "?part=" + part : ""));
  if (serial !== routeSerial) return;
  renderDetail(data);
  // A text over a megabyte comes a part at a time: say so, and offer the next and previous.
  for (const [name, p] of Object.entries(data.parts || {})) {
    const note = el("p", { class: "parts-note", id: `parts-${name}`,
      text: `${name}: part ${p.part} of ${p.parts} (a megabyte each) `});
    const go = (n) => () => loadDetail(taskId, routeSerial, n);
    if (p.part > 1) note.append(el("button", { text: "previous part", onclick: go(p.part - 1) }));
    if (p.part < p.parts) note.append(el("button", { text: "next part", onclick: go(p.part + 1) }));
    $("#detail-body").append(note);
  }
}

// --- an effect's answers, side by side ---------------------------------------------------

function distribution(items) {
  const box = el("div", { class: "distribution" });
  const max = Math.max(1, ...items.map((d) => d.count));
  for (const d of items) {
    box.append(el("div", { class: "dist-row", "data-answer": d.answer ?? "", "data-count": d.count },
      el("span", { class: "dist-answer", text: d.answer ?? "(none)", title: d.answer ?? "" }),
      el("span", { class: "dist-bar" }, el("span", { class: "fill", style: `width:${(100 * d.count) / max}%` })),
      el("span", { class: "dist-count", text: digits(d.count) })));
  }
  return box;
}

function renderEffect(data, params) {
  const e = data.effect || {};
  clear($("#effect-header")).append(
    el("h2", { text: `${e.experiment ?? params.experiment} · ${e.measure ?? params.measure}` }),
    el("p", {}, `${e.study ?? params.study} · ${e.model ?? params.model}${e.strategy ? " · " + e.strategy : ""} · effect `,
      el("strong", { text: num(e.effect) }),
      e.ci_low === null || e.ci_low === undefined ? "" : ` [${num(e.ci_low)}, ${num(e.ci_high)}]`,
      e.p === null || e.p === undefined ? "" : ` p=${num(e.p)}`, e.n ? ` n=${digits(e.n)}` : "",
      robust(e) ? ` · robust ${robust(e)}` : ""));
  if (warnings(e).length) {
    $("#effect-header").append(el("p", { class: "note", id: "effect-warnings", text: warnings(e).join("; ") }));
  }
  if (data.scope === "study") {  // the effect pools experiments: its answers are the study's
    $("#effect-header").append(el("p", { class: "note", id: "effect-scope",
      text: "This study's effects pool several experiments, which the results do not name: these are all of the study's answers for this model, by condition." }));
  }
  const cols = clear($("#effect-columns"));
  for (const c of data.conditions || []) {
    const filters = { study: params.study, experiment: data.scope === "study" ? null : params.experiment,
                      condition: data.scope === "study" ? null : c.index, strategy: params.strategy, model: params.model };
    const rows = el("table", { class: "rows" },
      el("thead", {}, el("tr", {}, ...["status", "answer", "raw"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...(c.rows || []).map((r) => el("tr", {
        "data-task-id": r.taskId, class: `status-${r.status}`,
        onclick: () => { location.hash = "#/answer/" + encodeURIComponent(r.taskId); } },
        el("td", { class: "status", text: r.status }), el("td", { class: "answer", text: r.answer ?? "" }),
        el("td", { class: "raw", text: r.raw ?? "" })))));
    cols.append(el("div", { class: "condition-column", "data-index": c.index },
      el("h3", { text: `${c.index}: ${c.label ?? ""}` }),
      el("p", { class: "muted" }, el("span", { class: "condition-total", text: digits(c.total) }), " answers · ",
        el("a", { href: "#/answers" + query(filters), text: "browse all" })),
      distribution(c.distribution || []), rows));
  }
}

async function loadEffect(params, serial) {
  const data = await api("/api/effect" + query(params));
  if (serial !== routeSerial) return;
  lastList = location.hash;
  renderEffect(data, params);
}

// --- routing -----------------------------------------------------------------------------

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, qs] = h.split("?", 2);
  return { path: path || "overview", params: Object.fromEntries(new URLSearchParams(qs || "")) };
}

async function route() {
  const serial = ++routeSerial;
  clearTimeout(pollTimer);
  $("#error-banner").hidden = true;
  const { path, params } = parseHash();
  const hash = location.hash;
  delete document.body.dataset.ready;
  try {
    if (path.startsWith("answer/")) {
      show("detail");
      await loadDetail(decodeURIComponent(path.slice("answer/".length)), serial);
    } else if (path === "answers") {
      show("answers");
      await loadAnswers(params, serial);
    } else if (path === "history") {
      show("history");
      await loadHistory(serial);
    } else if (path === "effect") {
      show("effect-view");
      await loadEffect(params, serial);
    } else {
      show("overview");
      await loadOverview(serial);
    }
  } catch (e) {
    if (!(e instanceof Error)) showError(String(e));
    else if ($("#error-banner").hidden) showError(e.message);
  }
  // what the browser tests wait for: this route's answer is on the page
  if (serial === routeSerial) document.body.dataset.ready = hash;
}

let typing = null;
function wireFilters() {
  const form = $("#filters");
  form.addEventListener("submit", (ev) => { ev.preventDefault(); goAnswers(filtersFromForm()); });
  form.addEventListener("change", (ev) => {
    const f = filtersFromForm();
    if (ev.target.name === "experiment") delete f.condition; // conditions belong to an experiment
    goAnswers(f);
  });
  $('#filters [name="q"]').addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => goAnswers(filtersFromForm()), 400);
  });
  $("#filters-clear").addEventListener("click", () => goAnswers({}));
  $("#detail-close").addEventListener("click", () => { location.hash = lastList; });
  $("#effect-close").addEventListener("click", () => { location.hash = "#/overview"; });
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => { wireFilters(); probeHistory(); route(); });
