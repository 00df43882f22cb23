// cepbus dashboard: polls the REST API every second and listens to the
// queries' output addresses over WebSocket. No dependencies.
(function () {
  "use strict";

  const state = {
    polls: 0,
    errors: 0,
    previous: null,       // the numbers of the last poll, for rates
    previousAt: 0,
    history: [],          // events/s, the last 60 polls
    feeds: new Map(),     // output address -> WebSocket
    received: 0,          // composite events seen on the feeds
    selected: null,       // {service, name} of the query whose net is drawn
    modelKey: "",
    totals: { delivered: 0, rate: 0, matches: 0, queued: 0 },
  };
  // Read by tests (and handy in the console).
  window.cepbusDashboard = state;

  const $ = (id) => document.getElementById(id);
  const fmt = (n) => {
    if (n === undefined || n === null || Number.isNaN(n)) return "-";
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + "G";
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + "M";
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
    return Number.isInteger(n) ? String(n) : n.toFixed(1);
  };
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  };
  const td = (text, cls) => el("td", cls ? { class: cls, title: String(text) } : { title: String(text) }, text);
  const rate = (key, value, seconds) => {
    const before = state.previous && state.previous[key];
    if (before === undefined || seconds <= 0) return 0;
    return Math.max(0, (value - before) / seconds);
  };

  // Late events were not matched (they went to the query's late address):
  // a count above zero is flagged like the other problems on the page.
  function lateCell(late) {
    if (!late) return td(fmt(late), "num");
    return el("td", { class: "num", title: fmt(late) + " late events, not matched: on the query's late address" },
              el("span", { class: "badge late" }, fmt(late)));
  }

  async function getJson(path) {
    const response = await fetch(path, { cache: "no-store" });
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return response.json();
  }

  function setStatus(ok, text) {
    $("status-dot").className = "dot " + (ok ? "ok" : "bad");
    $("status-text").textContent = text;
  }

  function fillTable(id, rows) {
    const body = $(id).tBodies[0];
    body.replaceChildren(...rows);
    if (rows.length === 0) {
      const cols = $(id).tHead.rows[0].cells.length;
      body.append(el("tr", {}, el("td", { class: "empty", colspan: cols }, "none")));
    }
  }

  function queueBar(length, capacity) {
    const pct = capacity > 0 ? Math.min(100, (100 * length) / capacity) : 0;
    const bar = el("div", { class: "bar" }, el("span", { style: "width:" + pct.toFixed(1) + "%" }),
                   el("em", {}, fmt(length) + (capacity ? " / " + fmt(capacity) : "")));
    return el("td", {}, bar);
  }

  function drawSpark() {
    const svg = $("spark");
    const h = state.history;
    const max = Math.max(1, ...h);
    const step = 160 / 59;
    let d = "";
    h.forEach((v, i) => {
      const x = (160 - (h.length - 1 - i) * step).toFixed(1);
      const y = (34 - (32 * v) / max).toFixed(1);
      d += (i === 0 ? "M" : "L") + x + "," + y;
    });
    const ns = "http://www.w3.org/2000/svg";
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d || "M0,34");
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", "#4fc3f7");
    path.setAttribute("stroke-width", "1.5");
    svg.replaceChildren(path);
  }

  function render(data, seconds) {
    const now = {};
    // Stages: the flows' SEDA stages, then each query's own stage.
    const own = (s) => s.name.includes("http-listener:ws/");
    const stageRows = data.stages.stages.filter((s) => !own(s)).map((s) => {
      const key = "stage:" + s.flow + "/" + s.name;
      now[key] = s.processed;
      return el("tr", {}, td(s.name), td(s.flow), queueBar(s.queue_length, s.capacity),
                td(s.threads + " / " + s.max_threads, "num"), td(fmt(rate(key, s.processed, seconds)), "num"),
                td(fmt(s.processed), "num"), td(fmt(s.rejected), "num"), td(s.latency_ms.p99.toFixed(2), "num"),
                el("td", {}, el("span", { class: "badge " + s.pressure }, s.pressure)));
    });
    for (const q of data.queries.queries) {
      const key = "qstage:" + q.service + "/" + q.name;
      now[key] = q.consumed;
      stageRows.push(el("tr", {}, td(q.endpoint), td("query"), queueBar(q.queued, 0), td("1 / 1", "num"),
                        td(fmt(rate(key, q.consumed, seconds)), "num"), td(fmt(q.consumed), "num"),
                        td(fmt(q.rejected), "num"), td("-", "num"),
                        el("td", {}, el("span", { class: "badge normal" }, "normal"))));
    }
    fillTable("stages", stageRows);

    let matches = 0;
    let queued = 0;
    const queryRows = data.queries.queries.map((q) => {
      const key = "query:" + q.service + "/" + q.name;
      const lateKey = "late:" + q.service + "/" + q.name;
      now[key] = q.matches;
      now[lateKey] = q.late;
      matches += q.matches;
      queued += q.queued;
      const name = td(q.name);
      name.title = q.service + "/" + q.name;
      // An engine="auto" query shows what auto chose, and why on hover; a
      // query sharing its detector, with how many.
      const engine = td((q.engine || "-") + (q.engine_choice ? " (auto)" : "") +
                        (q.shared_by ? " \u00d7" + q.shared_by : ""));
      const notes = [];
      if (q.engine_choice) notes.push(q.engine_choice);
      if (q.shared_by) notes.push("one detector for " + q.shared_by + " queries: " + q.endpoint);
      if (notes.length) engine.title = notes.join("; ");
      // null: the engine does not count what it holds.
      const held = td(q.partial_matches == null ? "-" : fmt(q.partial_matches), "num");
      if (q.partial_matches_peak != null) held.title = "peak " + fmt(q.partial_matches_peak);
      const row = el("tr", { class: "clickable" }, name, engine,
                     td((q.input || "?") + " \u2192 " + (q.output || "?"), "io"), td(fmt(q.consumed), "num"),
                     td(fmt(q.matches), "num"), td(fmt(rate(key, q.matches, seconds)), "num"), held,
                     lateCell(q.late), td(fmt(rate(lateKey, q.late, seconds)), "num"),
                     td(q.watermark == null ? "\u2014" : String(q.watermark), "num"));
      if (q.late > 0) row.classList.add("late");
      if (state.selected && state.selected.service === q.service && state.selected.name === q.name) {
        row.classList.add("selected");
      }
      row.addEventListener("click", () => {
        state.selected = { service: q.service, name: q.name, engine: q.engine };
        state.modelKey = "";
        loadModel();
      });
      return row;
    });
    fillTable("queries", queryRows);
    // Until the operator picks one, draw the first query that has a net.
    if (!state.selected) {
      const petri = data.queries.queries.find((q) => q.engine === "petri");
      if (petri) state.selected = { service: petri.service, name: petri.name, engine: petri.engine };
    }

    fillTable("routes", data.routes.routes.map((r) => {
      const key = "route:" + r.route;
      now[key] = r.published;
      return el("tr", {}, td(r.route), td(r.flow), td(fmt(r.published), "num"),
                td(fmt(rate(key, r.published, seconds)), "num"), td(fmt(r.delivered), "num"),
                td(fmt(r.queued), "num"), td(fmt(r.rejected + (r.refused_paused || 0)), "num"),
                el("td", {}, el("span", { class: "badge " + (r.paused ? "paused" : "running") },
                                r.paused ? "paused" : "running")));
    }));

    // Journals: the reliable flows (the others have no "journal").
    fillTable("journals", data.flows.flows.filter((f) => f.journal).map((f) => {
      const j = f.journal;
      const key = "journal:" + f.name;
      now[key] = j.commits;
      const taken = j.journaled + j.cancelled;
      return el("tr", {}, td(f.name), td(fmt(j.journaled), "num"), td(fmt(j.cancelled), "num"),
                td(taken > 0 ? ((100 * j.cancelled) / taken).toFixed(1) : "-", "num"),
                td(fmt(rate(key, j.commits, seconds)), "num"), td(fmt(j.in_flight), "num"),
                td(fmt(j.backlog), "num"), td(fmt(j.redelivered), "num"), td(fmt(j.retries), "num"),
                td(fmt(j.errors + j.corrupt), "num"));
    }));

    // Cluster: one row per partition of every cluster node this bus runs.
    const rows = [];
    const totals = [];
    for (const n of data.cluster.nodes) {
      for (const p of n.partitions || []) {
        rows.push(el("tr", {}, td(n.node), td(String(p.partition), "num"),
                     el("td", {}, el("span", { class: "badge " + (p.role === "active" ? "running" : "paused") }, p.role)),
                     td(p.owner), td(fmt(p.held), "num"), td(fmt(p.unaccepted_outputs), "num"),
                     td(p.resume_from === undefined ? "-" : fmt(p.resume_from), "num")));
      }
      totals.push(n.node + ": live " + (n.live_nodes || []).join(", ") + " \u00B7 received " + fmt(n.received) +
                  " \u00B7 replayed " + fmt(n.replayed) + " \u00B7 takeovers " + fmt(n.takeovers) +
                  " \u00B7 duplicates " + fmt(n.duplicates) + " \u00B7 late " + fmt(n.late) +
                  " \u00B7 composites " + fmt(n.composites) +
                  (n.checkpoints ? " \u00B7 checkpoints " + fmt(n.checkpoints) : "") +
                  (n.out_of_order ? " \u00B7 out of order " + fmt(n.out_of_order) : "") +
                  (n.sequence_gaps ? " \u00B7 sequence gaps " + fmt(n.sequence_gaps) : ""));
    }
    fillTable("cluster", rows);
    document.getElementById("cluster-totals").textContent =
      totals.length ? totals.join(" | ") : "this bus runs no cluster node";

    let delivered = 0;
    for (const c of data.components.components) {
      if (c.kind === "endpoint") {
        delivered += c.delivered;
        queued += c.queue_length;
      }
    }
    now.delivered = delivered;
    const perSecond = rate("delivered", delivered, seconds);
    state.totals = { delivered, rate: perSecond, matches, queued };
    $("total-delivered").textContent = fmt(delivered);
    $("total-rate").textContent = fmt(perSecond);
    $("total-matches").textContent = fmt(matches);
    $("total-queued").textContent = fmt(queued);
    if (state.previous) {
      state.history.push(perSecond);
      if (state.history.length > 60) state.history.shift();
      drawSpark();
    }
    state.previous = now;
    syncFeeds(data.queries.queries);
  }

  // One WebSocket per distinct query output address: composite events only.
  function syncFeeds(queries) {
    const wanted = new Set(queries.map((q) => q.output).filter(Boolean));
    for (const [address, ws] of state.feeds) {
      if (!wanted.has(address)) {
        ws.close();
        state.feeds.delete(address);
      }
    }
    for (const address of wanted) {
      if (state.feeds.has(address)) continue;
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      const ws = new WebSocket(scheme + location.host + "/ws?address=" + encodeURIComponent(address));
      ws.onmessage = (message) => addEvent(address, message.data);
      // A feed closed by the bus (too slow, stopping) is opened again by the next poll.
      ws.onclose = () => { if (state.feeds.get(address) === ws) state.feeds.delete(address); };
      state.feeds.set(address, ws);
    }
    $("feed-info").textContent = wanted.size === 0 ? "no query output to follow"
      : "live on " + [...wanted].join(", ");
  }

  function addEvent(address, text) {
    state.received++;
    let event;
    try { event = JSON.parse(text); } catch (e) { event = { type: "?", attrs: { raw: text } }; }
    const attrs = Object.entries(event.attrs || {}).map(([k, v]) => k + "=" + JSON.stringify(v)).join(" ");
    const item = el("li", { class: "fresh" }, el("span", { class: "type" }, event.type || "?"), " ",
                    el("span", { class: "addr" }, "@" + address), " ",
                    el("span", { class: "ts" }, "ts=" + event.ts), " ", attrs);
    const list = $("events");
    list.prepend(item);
    while (list.children.length > 50) list.lastChild.remove();
  }

  async function loadModel() {
    const q = state.selected;
    if (!q) return;
    const key = q.service + "/" + q.name;
    $("net-title").textContent = key;
    // Only the Petri engine exports a net; other engines have nothing to draw.
    if (q.engine !== "petri") {
      $("net").replaceChildren(el("p", { class: "empty" },
        "The " + (q.engine || "?") + " engine has no net to draw; Petri-net queries (engine=\"petri\") do."));
      return;
    }
    const path = "/api/queries/" + encodeURIComponent(q.service) + "/" + encodeURIComponent(q.name) +
                 "/model?format=json";
    try {
      const response = await fetch(path, { cache: "no-store" });
      const body = await response.json();
      if (!response.ok) {
        $("net").replaceChildren(el("p", { class: "empty" }, body.error || ("HTTP " + response.status)));
        return;
      }
      const text = JSON.stringify(body);
      if (text === state.modelKey) return;
      state.modelKey = text;
      drawNet(body);
    } catch (e) {
      $("net").replaceChildren(el("p", { class: "empty" }, "no model: " + e.message));
    }
  }

  // A layered drawing: input places left, each transition one layer right of
  // its inputs, its output place one further.
  function drawNet(model) {
    const places = model.places || [];
    const transitions = model.transitions || [];
    const layer = new Map();
    for (const p of places) if (p.kind === "input") layer.set(p.id, 0);
    for (let round = 0; round <= transitions.length; round++) {
      let changed = false;
      for (const t of transitions) {
        const l = 1 + Math.max(0, ...t.inputs.map((i) => layer.get(i) ?? 0));
        if (layer.get(t.id) !== l) { layer.set(t.id, l); changed = true; }
        if (layer.get(t.output) !== l + 1) { layer.set(t.output, l + 1); changed = true; }
      }
      if (!changed) break;
    }
    const nodes = [...places.map((p) => ({ id: p.id, kind: "place", data: p })),
                   ...transitions.map((t) => ({ id: t.id, kind: "transition", data: t }))];
    const columns = new Map();
    for (const n of nodes) {
      const l = layer.get(n.id) ?? 0;
      if (!columns.has(l)) columns.set(l, []);
      columns.get(l).push(n);
    }
    const colWidth = 92, rowHeight = 96, pad = 16;
    const pos = new Map();
    let rows = 1;
    for (const [l, list] of columns) {
      rows = Math.max(rows, list.length);
      list.forEach((n, i) => pos.set(n.id, { x: pad + 30 + l * colWidth, y: pad + i * rowHeight + 70 }));
    }
    const width = pad * 2 + 60 + Math.max(0, ...columns.keys()) * colWidth + 70;
    const height = pad * 2 + rows * rowHeight + 50;
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    // Shrinks to the panel's width (CSS max-width) rather than scrolling.
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    const add = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      svg.append(node);
      return node;
    };
    const defs = document.createElementNS(ns, "defs");
    defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" ' +
      'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7aa0"/></marker>';
    svg.append(defs);
    const edge = (from, to, join) => {
      const a = pos.get(from), b = pos.get(to);
      if (!a || !b) return;
      const span = (layer.get(to) ?? 0) - (layer.get(from) ?? 0);
      let d;
      if (span > 1 && Math.abs(a.y - b.y) < rowHeight / 2) {
        // Skips layers on its row: an arc above, into the top of the box.
        const lift = 26 + 10 * span;
        d = `M${a.x},${a.y - 18} C${a.x + 20},${a.y - lift} ${b.x - 20},${b.y - lift} ${b.x},${b.y - 15}`;
      } else {
        const mx = (a.x + b.x) / 2;
        d = `M${a.x + 18},${a.y} C${mx},${a.y} ${mx},${b.y} ${b.x - 17},${b.y}`;
      }
      add("path", { class: "edge" + (join ? " join" : ""), "marker-end": "url(#arrow)", d });
    };
    for (const t of transitions) {
      t.inputs.forEach((i, k) => edge(i, t.id, t.kind === "join" && k > 0));
      edge(t.id, t.output, false);
    }
    for (const p of places) {
      const { x, y } = pos.get(p.id);
      add("circle", { class: "place" + (p.kind === "input" ? " input" : ""), cx: x, cy: y, r: 18 });
      add("text", { x, y: y + 4, "text-anchor": "middle" },
          p.kind === "input" ? p.event_type : String(p.tokens ?? 0));
      if (p.kind !== "input") add("text", { class: "guard", x, y: y - 24, "text-anchor": "middle" }, p.id);
      if (p.emits && p.emits.length) {
        add("text", { class: "emit", x: x + 24, y: y + 4 }, "\u21D2 " + p.emits.join(", "));
      }
    }
    for (const t of transitions) {
      const { x, y } = pos.get(t.id);
      add("rect", { class: "transition", x: x - 16, y: y - 14, width: 32, height: 28, rx: 3 });
      add("text", { x, y: y + 4, "text-anchor": "middle" }, t.kind === "join" ? "\u22C8" : (t.event_type || "?"));
      const note = [...(t.guards || [])];
      if (t.window !== undefined) note.push("within " + t.window);
      note.forEach((line, i) => {
        add("text", { class: "guard", x, y: y + 28 + 11 * i, "text-anchor": "middle" },
            line.length > 22 ? line.slice(0, 21) + "\u2026" : line);
      });
    }
    $("net").replaceChildren(svg);
  }

  async function poll() {
    const started = performance.now();
    try {
      const [components, stages, queries, routes, flows, cluster] = await Promise.all([
        getJson("/api/components"), getJson("/api/stages"), getJson("/api/queries"), getJson("/api/routes"),
        getJson("/api/flows"), getJson("/api/cluster"),
      ]);
      const seconds = state.previousAt ? (started - state.previousAt) / 1000 : 0;
      state.previousAt = started;
      render({ components, stages, queries, routes, flows, cluster }, seconds);
      state.polls++;
      setStatus(true, "live \u00B7 " + new Date().toLocaleTimeString());
      if (state.selected) loadModel();
    } catch (e) {
      state.errors++;
      setStatus(false, "bus unreachable");
    }
    setTimeout(poll, 1000);
  }

  poll();
})();
