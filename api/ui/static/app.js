// opsq dashboard: refreshes the page it is on every 2 s from small JSON answers. Plain
// JavaScript, no library; the pages work without it (they are rendered on the server).
"use strict";

const every = 2000;

function pct(part, total) { return total > 0 ? (100 * part / total).toFixed(2) : "0"; }

// num writes n with its thousands separated by no-break spaces, as the server does.
function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, "\u00a0"); }

function setBar(bar, s) {
  const done = s.chunks_done, failed = s.chunks_failed, skipped = s.chunks_skipped, total = s.chunks_total;
  bar.dataset.done = done; bar.dataset.failed = failed; bar.dataset.skipped = skipped; bar.dataset.total = total;
  bar.querySelector(".done").style.width = pct(done, total) + "%";
  bar.querySelector(".failed").style.width = pct(failed, total) + "%";
  bar.querySelector(".skipped").style.width = pct(skipped, total) + "%";
  const counts = bar.nextElementSibling;
  if (counts && counts.classList.contains("counts")) counts.textContent = [done, failed, skipped, total].map(num).join(" / ");
}

// setState shows a submission's state, and whether it is paused, in the element st and
// the "paused" mark beside it.
function setState(st, s) {
  st.textContent = s.state; st.className = "state state-" + s.state;
  const p = st.parentElement.querySelector(".paused");
  if (p) p.hidden = !s.paused;
  const sch = st.parentElement.querySelector(".scheduled");
  if (sch) sch.hidden = !s.scheduled;
  const until = st.parentElement.querySelector(".scheduled-until");
  if (until) until.hidden = !s.scheduled;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// labelCells labels each cell of the table's body with its column's heading (data-l),
// which a narrow screen shows beside it (style.css), as the server's rows have.
function labelCells(table) {
  const heads = [...table.tHead.rows[0].cells].map(function (th) { return th.textContent; });
  for (const tr of table.tBodies[0].rows) {
    [...tr.cells].forEach(function (td, i) { if (heads[i]) td.dataset.l = heads[i]; });
  }
}

// fillRows replaces the rows of the table id with one per item, each filled by fill, or
// with one row saying none when there are none.
function fillRows(id, items, none, fill) {
  const table = document.getElementById(id);
  const body = table.tBodies[0];
  if (items.length === 0) {
    const tr = document.createElement("tr");
    tr.className = "none";
    cell(tr, none, "muted").colSpan = table.tHead.rows[0].cells.length;
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...items.map(function (item) {
    const tr = document.createElement("tr");
    fill(tr, item);
    return tr;
  }));
  labelCells(table);
}

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

// el makes an element with its class and text.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// refreshFailures draws the failed chunks of submission id again (the page the address
// names: its after), as the server draws them, when they changed; the rows whose errors
// were open stay open.
let lastFailures = "";
async function refreshFailures(id) {
  const table = document.getElementById("failures");
  if (!table) return;
  const after = new URLSearchParams(location.search).get("after");
  const v = await getJSON("/ui/submissions/" + id + "/failures.json" + (after ? "?after=" + encodeURIComponent(after) : ""));
  const text = JSON.stringify(v);
  if (lastFailures === "") lastFailures = text; // the page as the server drew it
  if (text === lastFailures) return;
  lastFailures = text;
  const open = new Set([...table.querySelectorAll("tr[data-chunk] details[open]")].map(function (d) { return d.closest("tr").dataset.chunk; }));
  fillRows("failures", v.failures, "no failed chunk" + (after ? " after chunk " + after : ""), function (tr, f) {
    tr.dataset.chunk = String(f.index);
    const a = el("a", "", num(f.index));
    a.href = "/ui/submissions/" + id + "/chunks/" + f.index;
    cell(tr, "").appendChild(a);
    cell(tr, f.state, "chunk-" + f.state);
    cell(tr, num(f.retries));
    const td = cell(tr, "", "err");
    if (f.errors.length === 0) return;
    const details = el("details");
    details.open = open.has(String(f.index));
    details.appendChild(el("summary", "error-text", f.last));
    const ol = el("ol", "attempts");
    for (const e of f.errors) {
      const li = el("li");
      li.appendChild(el("pre", "", e.error));
      li.appendChild(el("span", "muted", (e.consumer ? e.consumer + ", " : "") + e.at));
      ol.appendChild(li);
    }
    details.appendChild(ol);
    td.appendChild(details);
  });
  const next = document.getElementById("failures-next");
  if (next) next.hidden = !v.next;
}

// showShard fills the shard map's panel with cell c of /ui/cluster.json: what a hover
// showed, for a tap too; its button, not the tap, leads to Disable or Enable.
function showShard(c) {
  const panel = document.getElementById("shard-panel");
  if (!panel || !c) return;
  panel.hidden = false;
  panel.dataset.shard = c.shard;
  document.getElementById("panel-title").textContent = "Shard " + c.shard;
  document.getElementById("panel-state").textContent = c.state;
  document.getElementById("panel-owner").textContent = c.owner || "nobody";
  document.getElementById("panel-generation").textContent = num(c.generation);
  document.getElementById("panel-inflight").textContent = num(c.inflight);
  const a = document.getElementById("panel-action");
  const enable = c.state === "disabled";
  a.textContent = enable ? "Enable…" : "Disable…";
  a.className = enable ? "button" : "button danger";
  a.href = "/ui/cluster/confirm?action=" + (enable ? "enable" : "disable") + "&target=" + c.shard;
  for (const s of document.querySelectorAll(".shard.picked")) s.classList.remove("picked");
  const cellEl = document.getElementById("shard-" + c.shard);
  if (cellEl) cellEl.classList.add("picked");
}

let lastCluster = null;

const live = {
  async overview() {
    const v = await getJSON("/ui/overview.json");
    for (const el of document.querySelectorAll("[data-k]")) {
      const val = v[el.dataset.k];
      if (val === undefined) continue;
      el.textContent = typeof val === "number" ? num(val) : val;
      if (el.dataset.href !== undefined) {
        if (val === "—") el.removeAttribute("href"); else el.href = el.dataset.href + val;
      }
    }
    document.getElementById("chart-completed").setAttribute("d", v.chart_completed);
    document.getElementById("chart-failed").setAttribute("d", v.chart_failed);
    document.getElementById("chart-hour-completed").setAttribute("d", v.chart_hour_completed);
    document.getElementById("chart-hour-failed").setAttribute("d", v.chart_hour_failed);
    const consumers = document.querySelector("#consumers tbody");
    if (v.consumers.length === 0) {
      const tr = document.createElement("tr");
      tr.className = "none";
      cell(tr, "no consumer seen in the last hour", "muted").colSpan = 5;
      consumers.replaceChildren(tr);
    } else {
      consumers.replaceChildren(...v.consumers.map(function (c) {
        const tr = document.createElement("tr");
        cell(tr, c.name); cell(tr, num(c.inflight)); cell(tr, c.oldest_lease); cell(tr, c.last_seen); cell(tr, num(c.instances));
        return tr;
      }));
      labelCells(document.getElementById("consumers"));
    }
    fillRows("limits", v.limits, "none in force", function (tr, l) {
      cell(tr, l.kind); cell(tr, l.key); cell(tr, l.value);
      const tenant = cell(tr, l.tenant);
      if (!l.tenant) tenant.appendChild(Object.assign(document.createElement("span"), { className: "muted", textContent: "all" }));
      cell(tr, l.detail); cell(tr, l.rate); cell(tr, l.set_by);
      const act = cell(tr, "", "act");
      if (l.lift) act.appendChild(Object.assign(document.createElement("a"), { className: "button danger", href: l.lift, textContent: "Lift…" }));
    });
    fillRows("rates", v.rates, "no chunk of a limited key handed out in the last minute", function (tr, r) {
      cell(tr, r.key); cell(tr, r.value); cell(tr, r.rate); cell(tr, r.count);
    });
    const tbody = document.querySelector("#instances tbody");
    tbody.replaceChildren(...v.instances.map(function (i) {
      const tr = document.createElement("tr");
      cell(tr, i.id); cell(tr, i.url); cell(tr, i.state, "state-" + i.state);
      cell(tr, i.heartbeat_age + " ago"); cell(tr, num(i.shards)); cell(tr, num(i.inflight));
      return tr;
    }));
    labelCells(document.getElementById("instances"));
  },

  async submissions() {
    const rows = document.querySelectorAll("#submissions tr[data-id]");
    if (rows.length === 0) return;
    const q = new URLSearchParams(location.search);
    const params = new URLSearchParams();
    for (const k of ["state", "tenant", "key", "value", "after"]) if (q.get(k)) params.set(k, q.get(k));
    const list = await getJSON("/ui/submissions.json?" + params);
    const byID = new Map(list.map(function (s) { return [s.id, s]; }));
    for (const tr of rows) {
      const s = byID.get(tr.dataset.id);
      if (!s) continue;
      setBar(tr.querySelector(".bar"), s);
      setState(tr.querySelector(".state"), s);
    }
  },

  async submission() {
    const box = document.getElementById("submission");
    const s = await getJSON("/ui/submissions/" + box.dataset.id + "/progress");
    setBar(box.querySelector(".bar"), s);
    setState(document.getElementById("state"), s);
    document.getElementById("finished").textContent = s.finished_at || "";
    // The buttons that apply now: the others are hidden, not removed, so that a state
    // that comes back (a retry from elsewhere) brings them back.
    for (const a of box.querySelectorAll("[data-action]")) a.hidden = !s.actions.includes(a.dataset.action);
    await refreshFailures(box.dataset.id);
  },

  async cluster() {
    const v = await getJSON("/ui/cluster.json");
    for (const c of v.cells) {
      const a = document.getElementById("shard-" + c.shard);
      if (!a) continue;
      a.className = "shard st-" + c.state;
      a.style.background = c.color;
      a.title = c.title;
      a.dataset.owner = c.owner; a.dataset.state = c.state;
      a.dataset.generation = c.generation; a.dataset.inflight = c.inflight;
    }
    lastCluster = v;
    const panel = document.getElementById("shard-panel");
    if (panel && !panel.hidden) showShard(v.cells[Number(panel.dataset.shard)]);
    document.getElementById("unclaimed").textContent = num(v.unclaimed);
    document.getElementById("disabled").textContent = num(v.disabled);
    const tbody = document.querySelector("#instances tbody");
    tbody.replaceChildren(...v.instances.map(function (i) {
      const tr = document.createElement("tr");
      tr.dataset.id = i.id;
      const sw = document.createElement("span");
      sw.className = "swatch"; sw.style.background = i.color;
      cell(tr, "").appendChild(sw);
      cell(tr, i.id); cell(tr, i.url); cell(tr, i.state, "state-" + i.state);
      cell(tr, i.heartbeat_age + " ago"); cell(tr, num(i.shards)); cell(tr, num(i.inflight));
      const a = document.createElement("a");
      a.className = i.draining ? "button" : "button danger";
      a.textContent = i.draining ? "Undrain…" : "Drain…";
      a.href = "/ui/cluster/confirm?action=" + (i.draining ? "undrain" : "drain") + "&target=" + encodeURIComponent(i.id);
      cell(tr, "", "act").appendChild(a);
      return tr;
    }));
    labelCells(document.getElementById("instances"));
  },
};

document.addEventListener("DOMContentLoaded", function () {
  // A tap (or click) on a shard shows its details in the panel, without leaving the page;
  // without this script, the link does the same through the server.
  const shards = document.getElementById("shards");
  if (shards) {
    shards.addEventListener("click", function (ev) {
      const a = ev.target.closest(".shard");
      if (!a) return;
      ev.preventDefault();
      const c = lastCluster ? lastCluster.cells[Number(a.dataset.shard)] : {
        shard: Number(a.dataset.shard), state: a.dataset.state, owner: a.dataset.owner,
        generation: Number(a.dataset.generation), inflight: Number(a.dataset.inflight),
      };
      showShard(c);
      history.replaceState(null, "", "/ui/cluster?shard=" + a.dataset.shard);
    });
  }
  const fn = live[document.body.dataset.live];
  if (!fn) return;
  const dot = document.getElementById("live");
  let busy = false;
  setInterval(async function () {
    if (busy || document.hidden) return;
    busy = true;
    try {
      await fn();
      dot.classList.remove("stale");
      document.body.dataset.refreshed = String(Date.now());
    } catch (e) {
      dot.classList.add("stale"); // shown, not thrown: a restarting instance is no page error
    } finally {
      busy = false;
    }
  }, every);
});
