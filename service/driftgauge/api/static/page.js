// The drill-down page: checks -> day grid -> a day's hours -> an hour's prefixes -> keys.
// Plain DOM, no framework, no network beyond this server's own /api/v1. The bearer token
// lives in this script's memory only: never in the URL, the history or browser storage.
"use strict";

const API = "api/v1";
const GRID_DAYS = 28;
const KEYS_PER_PAGE = 50;
const STATUS_TEXT = {
  ok: "ok", drift: "drift", settling: "settling", error: "error",
  nothing_judged: "nothing judged", running: "running",
};
let token = "";
let shown = 0;  // counts navigations: only the latest one draws the view

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// A status is shown as its own word; anything unknown or missing is never shown as ok.
function badge(status) {
  if (status === null || status === undefined) {
    return h("span", { class: "badge s-none" }, "no finished run");
  }
  const known = Object.prototype.hasOwnProperty.call(STATUS_TEXT, status);
  return h("span", { class: `badge s-${known ? status : "other"}` },
           known ? STATUS_TEXT[status] : String(status));
}

function differs(node) {
  return node.differs
    ? h("span", { class: "badge s-drift" }, "differs")
    : h("span", { class: "badge s-ok" }, "matches");
}

class ApiError extends Error {
  constructor(status, detail) {
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
  }
}

function detailText(body) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  }
  return JSON.stringify(body);
}

async function api(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined) query.set(k, String(v));
  }
  const url = `${API}${path}${query.size ? "?" + query : ""}`;
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(url, { headers, cache: "no-store" });
  } catch (exc) {
    throw new ApiError(0, `the server did not answer (${exc.message})`);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (exc) {
    if (resp.ok) throw new ApiError(resp.status, "the answer was not JSON");
  }
  if (!resp.ok) {
    let detail = body ? detailText(body) : resp.statusText;
    if (resp.status === 401) detail += " (enter a bearer token above)";
    throw new ApiError(resp.status, detail);
  }
  return body;
}

function enc(part) { return encodeURIComponent(part); }

function link(hash, ...children) {
  return h("a", { href: "#" + hash }, ...children);
}

// An hour's label within its day, unique even where the clocks go back: 02:00+01:00.
function hourParam(label) { return label.slice(11, 16) + label.slice(19); }

function agg(side) { return `${side.count} rows, ${side.distinct_keys} keys`; }

function nodeTable(nodes, hrefOf, first) {
  if (!nodes.length) return null;
  return h("table", { class: "nodes" },
    h("thead", {}, h("tr", {}, h("th", {}, first), h("th", {}, "status"),
                     h("th", {}, "source"), h("th", {}, "reader"), h("th", {}, "compared"))),
    h("tbody", {}, nodes.map((n) => h("tr", { class: n.differs ? "differs" : "same" },
      h("td", {}, link(hrefOf(n), n.level === "hour" ? hourParam(n.label) : n.label)),
      h("td", {}, differs(n)), h("td", {}, agg(n.source)), h("td", {}, agg(n.reader)),
      h("td", {}, n.fetched ? "row by row" : (n.children.length ? "split" : "by aggregate"))))));
}

function isoDay(d) { return d.toISOString().slice(0, 10); }

function dayRange(since, until) {
  const out = [];
  for (let d = new Date(since + "T00:00:00Z"); isoDay(d) <= until;
       d.setUTCDate(d.getUTCDate() + 1)) out.push(isoDay(d));
  return out;
}

// The counts a cell shows: missing, extra and mismatched always, duplicates when any.
const COUNTS = [["missing", "\u2212"], ["extra", "+"], ["mismatched", "\u2260"],
                ["duplicates", "\u00d7"]];

function countsText(b) {
  return COUNTS.map(([kind]) => `${kind} ${b[kind]}`).join(", ");
}

function cellCounts(b) {
  if (!(b.missing || b.extra || b.mismatched || b.duplicates)) return null;
  return h("span", { class: "counts", "aria-hidden": "true" },
    COUNTS.filter(([kind]) => kind !== "duplicates" || b[kind]).map(([kind, sign]) =>
      h("span", { class: `n n-${kind}`, "data-kind": kind, "data-count": b[kind] },
        sign + b[kind])));
}

function grid(check, answer) {
  const byDay = new Map(answer.days.map((b) => [b.day, b]));
  return h("div", { class: "grid", "data-check": check },
    dayRange(answer.since, answer.until).map((day) => {
      const b = byDay.get(day);
      const status = b ? b.status : "none";
      const text = b ? (STATUS_TEXT[b.status] || b.status) : "no result";
      const known = !b || Object.prototype.hasOwnProperty.call(STATUS_TEXT, b.status);
      const title = `${day}: ${text}` + (b ? ` \u2014 ${countsText(b)}` : "")
        + (b && b.reasons.length ? ` (${b.reasons.join("; ")})` : "");
      const cell = h("span", { class: `cell s-${known ? status : "other"}`, title,
                               "data-day": day, "data-status": status },
                     h("span", { class: "cell-day" }, day.slice(8)),
                     b ? cellCounts(b) : null,
                     h("span", { class: "sr" }, b ? `${text}, ${countsText(b)}` : text));
      return b ? h("a", { href: `#/checks/${enc(check)}/days/${day}`, class: "cell-link",
                          "aria-label": title }, cell) : cell;
    }));
}

// The SVG namespace as the HTML parser gives it, so the file names no URL at all.
const SVG = (() => {
  const tpl = document.createElement("template");
  tpl.innerHTML = "<svg></svg>";
  return tpl.content.firstChild.namespaceURI;
})();

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
  for (const child of children) {
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Differing keys a day: what the trend chart plots, one point per judged day.
function driftOf(b) { return b.missing + b.extra + b.mismatched; }

function trend(check, answer) {
  const days = dayRange(answer.since, answer.until);
  const judged = answer.days.filter((b) => days.includes(b.day));
  const W = 420; const H = 90; const L = 34; const R = 8; const T = 8; const B = 18;
  const top = Math.max(1, ...judged.map(driftOf));
  const x = (day) => L + (days.length > 1 ? (days.indexOf(day) * (W - L - R)) / (days.length - 1) : 0);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const drifting = judged.filter((b) => driftOf(b) > 0);
  const worst = judged.reduce((a, b) => (a && driftOf(a) >= driftOf(b) ? a : b), null);
  const summary = judged.length
    ? `${judged.length} judged days from ${days[0]} to ${days[days.length - 1]}; `
      + `${drifting.length} with differing keys; most ${worst ? driftOf(worst) : 0}`
      + (worst && driftOf(worst) ? ` on ${worst.day}` : "") + "."
    : "No day in the window was judged.";
  const id = `trend-${check.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const svg = s("svg", { class: "trend", "data-check": check, role: "img", width: W, height: H,
                         viewBox: `0 0 ${W} ${H}`, "aria-labelledby": `${id}-t ${id}-d` },
    s("title", { id: `${id}-t` }, `${check}: differing keys per day (missing + extra + mismatched)`),
    s("desc", { id: `${id}-d` }, summary),
    s("line", { class: "axis", x1: L, y1: y(0), x2: W - R, y2: y(0) }),
    s("text", { class: "tick", x: L - 4, y: y(top) + 4, "text-anchor": "end" }, top),
    s("text", { class: "tick", x: L - 4, y: y(0) + 4, "text-anchor": "end" }, 0),
    s("text", { class: "tick", x: L, y: H - 4 }, days[0].slice(5)),
    s("text", { class: "tick", x: W - R, y: H - 4, "text-anchor": "end" },
      days[days.length - 1].slice(5)));
  // Consecutive judged days are joined; a day without a result breaks the line.
  let run = [];
  const flush = () => {
    if (run.length > 1) {
      svg.append(s("polyline", { class: "line",
        points: run.map((b) => `${x(b.day)},${y(driftOf(b))}`).join(" ") }));
    }
    run = [];
  };
  const byDay = new Map(judged.map((b) => [b.day, b]));
  for (const day of days) { if (byDay.has(day)) run.push(byDay.get(day)); else flush(); }
  flush();
  for (const b of judged) {
    svg.append(s("circle", { class: `point p-${b.status}`, cx: x(b.day), cy: y(driftOf(b)), r: 3.5,
                             "data-day": b.day, "data-value": driftOf(b) },
      s("title", {}, `${b.day}: ${driftOf(b)} differing (${countsText(b)})`)));
  }
  return h("figure", { class: "trend-box" }, svg,
    h("figcaption", { class: "note" }, "Differing keys per day: ", summary));
}

// The newest run that failed: the latest finished one, or an earlier one from the runs list.
async function lastError(c) {
  const run = c.last_run;
  if (run && run.error) return { run, latest: true };
  const answer = await api(`/checks/${enc(c.name)}/runs`, { limit: 20 });
  const failed = answer.runs.find((r) => r.error);
  return failed ? { run: failed, latest: false } : null;
}

function errorBox(found) {
  const { run, latest } = found;
  return h("div", { class: "last-error reason", role: "status" },
    h("strong", {}, latest ? "Last run failed" : "An earlier run failed"),
    ` (run ${run.id}, ${run.trigger}, ${run.finished_at || run.started_at}): `,
    h("span", { class: "error-text" }, run.error));
}

async function checkCard(c) {
  const run = c.last_run;
  const card = h("section", { class: "check", "data-check": c.name },
    h("h2", {}, link(`/checks/${enc(c.name)}`, c.name), " ", badge(c.status),
      c.running ? h("span", { class: "badge s-running" }, "running") : null),
    c.description ? h("p", { class: "note" }, c.description) : null,
    h("p", { class: "note" },
      run ? `last run ${run.id} (${run.trigger}) finished ${run.finished_at || "—"}` : "no run yet",
      " · last success ", c.last_success_at || "never"),
  );
  try {
    const found = await lastError(c);
    if (found) card.append(errorBox(found));
  } catch (exc) {
    card.append(h("p", { class: "reason" }, `runs: ${exc.message}`));
  }
  // `until` is left to the server: today in the check's time zone, not the browser's.
  const since = isoDay(new Date(Date.now() - (GRID_DAYS - 1) * 86400000));
  try {
    const answer = await api(`/checks/${enc(c.name)}/days`, { since });
    card.append(grid(c.name, answer), trend(c.name, answer));
  } catch (exc) {
    card.append(h("p", { class: "reason" }, `days: ${exc.message}`));
  }
  return card;
}

async function viewChecks(only) {
  const answer = await api("/checks");
  const checks = answer.checks.filter((c) => !only || c.name === only);
  if (only && !checks.length) throw new ApiError(404, `no check named ${only}`);
  if (!checks.length) return [h("p", { class: "note" }, "No checks are configured.")];
  return [legend(), ...(await Promise.all(checks.map(checkCard)))];
}

function legend() {
  return h("p", { class: "legend" }, ["ok", "drift", "settling", "error"].map(
    (s) => h("span", {}, h("span", { class: `cell small s-${s}` }), STATUS_TEXT[s])),
    h("span", {}, h("span", { class: "cell small s-none" }), "no result"),
    h("span", { class: "counts-legend" }, " \u00b7 in a square: \u2212missing +extra \u2260mismatched \u00d7duplicates"));
}

function bucketSummary(b) {
  return h("div", { class: "bucket" },
    h("p", {}, badge(b.status), ` expected ${b.expected}, visible ${b.visible}, missing `,
      b.missing, ", extra ", b.extra, ", mismatched ", b.mismatched,
      ", duplicates ", b.duplicates, ` · run ${b.run_id} checked ${b.checked_at || "—"}`),
    b.reasons.length ? h("ul", { class: "reasons" }, b.reasons.map((r) => h("li", {}, r)))
                     : null);
}

async function viewDay(check, day, live) {
  const d = await api(`/checks/${enc(check)}/days/${day}`, live ? { live: true } : {});
  const base = `/checks/${enc(check)}/days/${day}`;
  // Hours computed live have no stored nodes below them: their hour views split live too.
  const hourLink = (n) => `${base}/hours/${enc(hourParam(n.label))}${live ? "?live" : ""}`;
  return [h("h2", {}, `${check} · ${day}`), bucketSummary(d.bucket),
    h("h3", {}, "Hours"),
    live ? h("p", { class: "note" }, "Hours recomputed live from both stores.") : null,
    nodeTable(d.hours, hourLink, "hour")
      || (d.hours_live_only
        ? h("p", { class: "note" }, "The run found this day's differences from its digests and ",
            "kept no hours. ", link(`${base}?live`, "Compute the hours now (live, needs a token)"))
        : h("p", { class: "note" }, "The run kept no hours for this day.")),
    d.prefixes.length ? h("h3", {}, "Prefixes over the whole day") : null,
    nodeTable(d.prefixes, (n) => `${base}/prefixes/${enc(n.label)}`, "prefix"),
    h("p", {}, link(`${base}/keys`, "All sampled keys of the day"))];
}

function findNode(nodes, label) {
  for (const n of nodes) {
    if (n.label === label) return n;
    const deeper = findNode(n.children, label);
    if (deeper) return deeper;
  }
  return null;
}

async function viewHour(check, day, hour, live) {
  const x = await api(`/checks/${enc(check)}/days/${day}/hours/${enc(hour)}`,
                      live ? { live: true } : {});
  const base = `/checks/${enc(check)}/days/${day}/hours/${enc(hour)}`;
  const out = [h("h2", {}, `${check} · ${day} · ${x.label}`),
    h("p", { class: "note" }, `${x.start} to ${x.end}`,
      live ? " · recomputed live from both stores" : ` · stored by run ${x.run_id}`)];
  if (!live && x.node) out.push(h("p", {}, differs(x.node), ` source ${agg(x.node.source)}`,
                                   `, reader ${agg(x.node.reader)}`));
  if (!live && !x.node) out.push(h("p", { class: "note" }, "The run kept no node for this hour."));
  out.push(h("h3", {}, "Key-hash prefixes"));
  out.push(nodeTable(x.prefixes, (n) => `${base}/prefixes/${enc(n.label)}${live ? "?live" : ""}`,
                     "prefix")
    || h("p", { class: "note" }, "No stored prefixes: the hour was compared as a whole."));
  if (!live) {
    out.push(h("p", {}, link(`${base}?live`, "Split by prefix now (live, needs a token)")));
  }
  out.push(h("p", {}, link(`/checks/${enc(check)}/days/${day}/keys?hour=${enc(hour)}`,
                           "Sampled keys of this hour")));
  return out;
}

async function viewPrefix(check, day, hour, prefix, live) {
  const out = [h("h2", {}, `${check} · ${day}${hour ? " · " + hour : ""} · prefix ${prefix}`)];
  if (hour) {
    const base = `/checks/${enc(check)}/days/${day}/hours/${enc(hour)}`;
    const x = await api(`/checks/${enc(check)}/days/${day}/hours/${enc(hour)}`,
                        live ? { live: true, prefix } : {});
    const children = live ? x.prefixes : ((x.node && findNode(x.prefixes, prefix)) || { children: [] }).children;
    if (children.length) {
      out.push(h("h3", {}, "Longer prefixes"));
      out.push(nodeTable(children, (n) => `${base}/prefixes/${enc(n.label)}${live ? "?live" : ""}`,
                         "prefix"));
    }
  }
  out.push(...(await keysPart(check, day, { hour, prefix })));
  return out;
}

async function keysPart(check, day, filter, offset = 0) {
  const box = h("div", { class: "keys-part" });
  const params = { hour: filter.hour || null, prefix: filter.prefix || null,
                   limit: KEYS_PER_PAGE, offset };
  const k = await api(`/checks/${enc(check)}/days/${day}/keys`, params);
  const more = async (to) => box.replaceWith(...(await keysPart(check, day, filter, to)));
  // A sample (api.sample_keys a kind) pages over the stored keys only, fewer than total.
  const count = !k.sampled ? `${k.total}`
    : k.total === null ? "a sample; the total under this filter is unknown"
    : `a sample of ${k.total}`;
  box.append(h("h3", {}, `Sampled keys (${count})`),
    k.keys.length ? h("table", { class: "keys" },
      h("thead", {}, h("tr", {}, h("th", {}, "key"), h("th", {}, "kind"), h("th", {}, "source copies"),
                       h("th", {}, "reader copies"), h("th", {}, "key hash"), h("th", {}, "event time"))),
      h("tbody", {}, k.keys.map((key) => h("tr", { class: `kind-${key.kind}` },
        h("td", { class: "key" }, key.key === null ? h("em", {}, "NULL") : key.key),
        h("td", {}, key.kind), h("td", {}, key.source_copies), h("td", {}, key.reader_copies),
        h("td", { class: "hash" }, key.key_hash || "—"), h("td", {}, key.event_time || "—")))))
      : h("p", { class: "note" }, "No sampled key matches."),
    h("p", {}, offset > 0 ? h("button", { onclick: () => more(Math.max(0, offset - KEYS_PER_PAGE)) },
                              "Previous") : null,
      k.keys.length === KEYS_PER_PAGE && (k.sampled || offset + k.keys.length < k.total)
        ? h("button", { onclick: () => more(offset + KEYS_PER_PAGE) }, "Next") : null));
  return [box];
}

function crumbs(parts) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(...parts.flatMap(([hash, text], i) =>
    [i ? " › " : null, hash ? link(hash, text) : h("span", {}, text)]).filter(Boolean));
}

async function route() {
  const [path, flags] = (location.hash.slice(1) || "/").split("?");
  const query = new URLSearchParams(flags || "");
  const live = query.has("live");
  const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
  const view = document.getElementById("view");
  const error = document.getElementById("error");
  error.hidden = true;
  const trail = [["/", "checks"]];
  let c = null; let day = null; let hour = null;
  if (seg[0] === "checks" && seg[1]) { c = seg[1]; trail.push([`/checks/${enc(c)}`, c]); }
  if (c && seg[2] === "days" && seg[3]) {
    day = seg[3]; trail.push([`/checks/${enc(c)}/days/${day}`, day]);
  }
  if (day && seg[4] === "hours" && seg[5]) {
    hour = seg[5]; trail.push([`/checks/${enc(c)}/days/${day}/hours/${enc(hour)}`, hour]);
  }
  crumbs(trail);
  const mine = ++shown;
  view.setAttribute("aria-busy", "true");
  try {
    let parts;
    const prefixAt = hour ? 6 : 4;
    if (day && seg[prefixAt] === "prefixes" && seg[prefixAt + 1]) {
      parts = await viewPrefix(c, day, hour, seg[prefixAt + 1], live);
    } else if (day && seg[4] === "keys") {
      parts = [h("h2", {}, `${c} · ${day}${query.get("hour") ? " · " + query.get("hour") : ""}`),
               ...(await keysPart(c, day, { hour: query.get("hour") }))];
    } else if (hour) parts = await viewHour(c, day, hour, live);
    else if (day) parts = await viewDay(c, day, live);
    else parts = await viewChecks(c);
    if (mine !== shown) return;  // a later navigation owns the view now
    view.replaceChildren(...parts.filter(Boolean));
  } catch (exc) {
    if (mine !== shown) return;
    error.textContent = exc.message;
    error.hidden = false;
    view.replaceChildren(h("p", { class: "note" }, "Nothing to show: see the error above."));
  }
  view.removeAttribute("aria-busy");
  // Which view is on screen, for people's tools and tests: the hash it was drawn for.
  view.dataset.shown = location.hash || "#/";
  view.dataset.drawn = String(mine);
}

function showToken() {
  document.getElementById("token-state").textContent = token ? "token in use" : "no token";
}

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("token");
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = input.value.trim();
    input.value = "";
    showToken();
    route();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    token = "";
    showToken();
    route();
  });
  window.addEventListener("hashchange", route);
  route();
});
