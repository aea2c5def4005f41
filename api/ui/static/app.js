// opsq dashboard: refreshes the page it is on every 2 s from small JSON answers. Plain
// JavaScript, no library; the pages work without it (they are rendered on the server).
"use strict";

const every = 2000;

function pct(part, total) { return total > 0 ? (100 * part / total).toFixed(2) : "0"; }

function setBar(bar, done, failed, total) {
  bar.dataset.done = done; bar.dataset.failed = failed; bar.dataset.total = total;
  bar.querySelector(".done").style.width = pct(done, total) + "%";
  bar.querySelector(".failed").style.width = pct(failed, total) + "%";
  const counts = bar.nextElementSibling;
  if (counts && counts.classList.contains("counts")) counts.textContent = done + " / " + failed + " / " + total;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

const live = {
  async overview() {
    const v = await getJSON("/ui/overview.json");
    for (const el of document.querySelectorAll("[data-k]")) {
      const val = v[el.dataset.k];
      if (val === undefined) continue;
      el.textContent = val;
      if (el.dataset.href !== undefined) {
        if (val === "—") el.removeAttribute("href"); else el.href = el.dataset.href + val;
      }
    }
    document.getElementById("chart").setAttribute("points", v.chart_points);
    document.getElementById("chart-area").setAttribute("points", v.chart_area);
    const tbody = document.querySelector("#instances tbody");
    tbody.replaceChildren(...v.instances.map(function (i) {
      const tr = document.createElement("tr");
      cell(tr, i.id); cell(tr, i.url); cell(tr, i.state, "state-" + i.state);
      cell(tr, i.heartbeat_age + " ago"); cell(tr, i.shards); cell(tr, i.inflight);
      return tr;
    }));
  },

  async submissions() {
    const rows = document.querySelectorAll("#submissions tr[data-id]");
    if (rows.length === 0) return;
    const q = new URLSearchParams(location.search);
    const params = new URLSearchParams();
    for (const k of ["state", "key", "value", "after"]) if (q.get(k)) params.set(k, q.get(k));
    const list = await getJSON("/ui/submissions.json?" + params);
    const byID = new Map(list.map(function (s) { return [s.id, s]; }));
    for (const tr of rows) {
      const s = byID.get(tr.dataset.id);
      if (!s) continue;
      setBar(tr.querySelector(".bar"), s.chunks_done, s.chunks_failed, s.chunks_total);
      const st = tr.querySelector(".state");
      st.textContent = s.state; st.className = "state state-" + s.state;
    }
  },

  async submission() {
    const box = document.getElementById("submission");
    const s = await getJSON("/ui/submissions/" + box.dataset.id + "/progress");
    setBar(box.querySelector(".bar"), s.chunks_done, s.chunks_failed, s.chunks_total);
    const st = document.getElementById("state");
    st.textContent = s.state; st.className = "state state-" + s.state;
    document.getElementById("finished").textContent = s.finished_at || "";
    const cancel = document.getElementById("cancel");
    if (cancel && s.state !== "in_progress") cancel.remove();
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
      a.href = "/ui/cluster/confirm?action=" + (c.state === "disabled" ? "enable" : "disable") + "&target=" + c.shard;
    }
    document.getElementById("unclaimed").textContent = v.unclaimed;
    document.getElementById("disabled").textContent = v.disabled;
    const tbody = document.querySelector("#instances tbody");
    tbody.replaceChildren(...v.instances.map(function (i) {
      const tr = document.createElement("tr");
      tr.dataset.id = i.id;
      const sw = document.createElement("span");
      sw.className = "swatch"; sw.style.background = i.color;
      cell(tr, "").appendChild(sw);
      cell(tr, i.id); cell(tr, i.url); cell(tr, i.state, "state-" + i.state);
      cell(tr, i.heartbeat_age + " ago"); cell(tr, i.shards); cell(tr, i.inflight);
      const a = document.createElement("a");
      a.className = i.draining ? "button" : "button danger";
      a.textContent = i.draining ? "Undrain…" : "Drain…";
      a.href = "/ui/cluster/confirm?action=" + (i.draining ? "undrain" : "drain") + "&target=" + encodeURIComponent(i.id);
      cell(tr, "").appendChild(a);
      return tr;
    }));
  },
};

document.addEventListener("DOMContentLoaded", function () {
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
