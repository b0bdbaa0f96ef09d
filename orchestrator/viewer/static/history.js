// `orchestrator view CAMPAIGN_DIR`: the history of the campaign's runs and the comparison of
// its last two (the server's /api/history: nightly/history.py and compare.py as_json). Loaded
// before app.js, whose helpers (el, clear, table, api, num) it uses when it runs.
"use strict";

function cellText(v) {
  if (v === null || v === undefined) return "";
  if (Array.isArray(v)) return v.map(cellText).join(", ");
  if (typeof v === "number") return num(v);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// One row per object, one column per key (the union, in first-seen order).
function genericTable(rows, cls) {
  const keys = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  const node = el("table", { class: cls || "rows" });
  table(node, keys, rows.map((r) => el("tr", {}, ...keys.map((k) => el("td", { text: cellText(r[k]) })))));
  return node;
}

function side(s) { return s ? `${s.campaign || ""}/${s.runId || s.run || ""}` : ""; }

async function loadHistory(serial) {
  const data = await api("/api/history");
  if (serial !== routeSerial) return;
  clear($("#history-runs")).append(genericTable(data.runs || [], "rows"));
  const out = clear($("#history-compare"));
  const c = data.comparison;
  if (!c) {
    out.append(el("p", { class: "muted", text: "fewer than two runs: nothing to compare yet" }));
    return;
  }
  out.append(el("p", { text: `${side(c.a)} compared with ${side(c.b)}; plan ` +
                               (c.plan && c.plan.same ? "the same" : "changed") }));
  const flagged = Object.entries(c.counts || {}).filter(([, n]) => n);
  out.append(el("p", { id: "history-flags", class: flagged.length ? "flagged" : "muted",
                       text: flagged.length ? "flags: " + flagged.map(([k, n]) => `${k} ${n}`).join(", ")
                                            : "no flags: nothing changed beyond chance" }));
  if ((c.flags || []).length) out.append(el("h3", { text: "Flags" }), genericTable(c.flags));
  out.append(el("h3", { text: "Effects, run to run" }), genericTable(c.effects || []));
}

// The History link shows only where there is a history (a campaign folder).
async function probeHistory() {
  try {
    const resp = await fetch("/api/history", { headers: { Accept: "application/json" } });
    $("#nav-history").hidden = !resp.ok;
  } catch (e) { /* the server is gone: app.js says so on its next request */ }
}
