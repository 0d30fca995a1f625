/* meshjit report: draws the page from the JSON in <script id="report-data">.
   Graph layout: dagre (vendored, MIT licence; see the licence comment above). */
"use strict";
(function () {
  const T0 = performance.now();
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const PALETTE = ["#8fb8ff", "#ffc48a", "#9fe0a6", "#f5a3c7", "#c8b3ff", "#ffe08a",
    "#8fe3e0", "#d9c2a6", "#b9e28f", "#ffb3a7", "#a7c4d9", "#e0b3ff"];
  const LIMIT = 60; // nodes drawn at first; groups beyond stay collapsed
  const FANOUT = 4; // a box with more users than this is drawn again beside each
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  };
  const colour = (i) => (i < PALETTE.length ? PALETTE[i] : "#d0d4db");
  const bytes = (n) => {
    if (n == null) return "";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, x = n;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return (i ? x.toFixed(x < 10 ? 2 : 1) : String(x)) + " " + u[i];
  };
  const SHORT = { "all-gather": "AG", "all-reduce": "AR", "reduce-scatter": "RS",
    "all-to-all": "A2A", "collective-permute": "CP" };

  // -- header ------------------------------------------------------------------
  const t = D.totals;
  $("title").textContent = "meshjit report: " + D.title;
  const counts = Object.entries(t.counts).map(([k, v]) => `${SHORT[k] || k} ${v}`).join(", ");
  const meshText = D.mesh.axes.map(([n, s]) => `${n}=${s}`).join(" x ") || "no mesh";
  $("summary").textContent =
    `${D.op_count} ops on mesh ${meshText} (${D.mesh.devices.length} devices` +
    `${D.platform ? ", " + D.platform : ""}); ${t.count} collectives` +
    `${counts ? " (" + counts + ")" : ""}, ${bytes(t.bytes)} sent per device, ` +
    `estimated ${t.us.toFixed(1)} us` +
    (t.bound != null ? `; analytic bound ${bytes(t.bound)}` : "");
  for (const n of D.notes) $("notes").append(el("p", { class: "note warn", text: n }));

  // -- mesh --------------------------------------------------------------------
  function meshTable(cellFor) {
    const axes = D.mesh.axes.length ? D.mesh.axes : [["-", 1]];
    const cols = axes[axes.length - 1][1];
    const rows = D.mesh.devices.length / cols;
    const tbl = el("table", { class: "grid" });
    for (let r = 0; r < rows; r++) {
      const tr = el("tr");
      for (let c = 0; c < cols; c++) tr.append(cellFor(r * cols + c));
      tbl.append(tr);
    }
    return tbl;
  }
  (function drawMesh() {
    const axes = D.mesh.axes;
    const lead = axes.slice(0, -1).map(([n, s]) => `${n}(${s})`).join(" x ") || "-";
    const last = axes.length ? `${axes[axes.length - 1][0]}(${axes[axes.length - 1][1]})` : "-";
    $("mesh").append(el("p", { class: "note",
      text: `@${D.mesh.name}: rows = ${lead}, columns = ${last}; each cell: device id and process` }));
    const multi = new Set(D.mesh.processes).size > 1;
    const tbl = meshTable((i) => {
      const td = el("td", {}, el("b", { text: "dev " + D.mesh.devices[i] }),
        el("span", { class: "dev", text: "process " + D.mesh.processes[i] }));
      if (multi) td.style.background = colour(D.mesh.processes[i]);
      return td;
    });
    tbl.classList.add("mesh");
    $("mesh").append(tbl);
  })();

  // -- arguments and results ---------------------------------------------------
  function blockText(b) { return b.map((x) => (x == null ? ":" : String(x))).join(","); }
  function gridOf(v) {
    if (!v.grid) return el("span");
    if (v.grid.distinct === 1 && v.grid.cells.every((c) => c.block.every((b) => b == null)))
      return el("span", { class: "note", text: "every device holds the whole array" });
    return meshTable((i) => {
      const c = v.grid.cells[i];
      const td = el("td", { title: `device ${D.mesh.devices[i]}: block [${blockText(c.block)}]` },
        document.createTextNode("[" + blockText(c.block) + "]"),
        el("span", { class: "dev", text: "dev " + D.mesh.devices[i] }));
      td.style.background = v.grid.distinct > 1 ? colour(c.colour) : "#eef0f4";
      return td;
    });
  }
  function valueTable(rows, target) {
    const tbl = el("table", { class: "data" });
    tbl.append(el("tr", {}, ...["name", "shape", "dtype", "sharding", "global", "per device",
      "blocks on the mesh (any rank: [block of each dim], ':' = whole dim)"].map((h) => el("th", { text: h }))));
    for (const v of rows) {
      tbl.append(el("tr", {},
        el("td", { class: "mono", text: v.name }),
        el("td", { class: "mono", text: "[" + v.shape.join(", ") + "]" }),
        el("td", { class: "mono", text: v.dtype }),
        el("td", { class: "mono", text: v.sharding }),
        el("td", { class: "num", text: bytes(v.bytes) }),
        el("td", { class: "num", text: bytes(v.local_bytes) }),
        el("td", {}, gridOf(v))));
    }
    target.append(tbl);
  }
  for (const [rows, id, what] of [[D.arguments, "arguments", "Arguments"], [D.results, "results", "Results"]]) {
    const box = el("details", { open: "" }, el("summary", { text: `${what} (${rows.length})` }));
    if (rows.length > 12) box.removeAttribute("open");
    valueTable(rows, box);
    $(id).append(box);
  }

  // -- the program graph -------------------------------------------------------
  const groups = new Map(D.groups.map((g) => [g.id, g]));
  const nodes = new Map(D.nodes.map((n) => [n.id, n]));
  const groupPath = new Map(); // group id -> [root, ..., group]
  for (const g of D.groups) {
    const path = [];
    for (let x = g; x; x = groups.get(x.parent)) path.unshift(x.id);
    groupPath.set(g.id, path);
  }
  const size = new Map(D.groups.map((g) => [g.id, 0]));
  const commAt = new Map(D.groups.map((g) => [g.id, 0]));
  const nodeComm = new Map();
  const badges = new Map(); // collectives of an op drawn on none of its edges
  for (const c of D.collectives) {
    if (!c.node) continue;
    nodeComm.set(c.node, (nodeComm.get(c.node) || 0) + 1);
    if (c.edge < 0) badges.set(c.node, (badges.get(c.node) || 0) + 1);
  }
  for (const n of D.nodes) {
    for (const gid of groupPath.get(n.group) || []) {
      size.set(gid, size.get(gid) + 1);
      commAt.set(gid, commAt.get(gid) + (nodeComm.get(n.id) || 0));
    }
  }
  const direct = new Map(D.groups.map((g) => [g.id, 0]));
  for (const n of D.nodes) direct.set(n.group, (direct.get(n.group) || 0) + 1);
  const expanded = new Set(["g0"]);
  (function initialExpansion() {
    let visible = direct.get("g0") + groups.get("g0").children.length;
    let frontier = [...groups.get("g0").children];
    while (frontier.length) {
      frontier.sort((a, b) => size.get(a) - size.get(b));
      const next = [];
      for (const gid of frontier) {
        const g = groups.get(gid);
        const grows = direct.get(gid) + g.children.length - 1;
        if (visible + grows > LIMIT) continue;
        expanded.add(gid); visible += grows; next.push(...g.children);
      }
      frontier = next;
    }
  })();
  function rep(n) {
    for (const gid of groupPath.get(n.group) || []) if (!expanded.has(gid)) return gid;
    return n.id;
  }
  let selected = null;
  let view = { x: 0, y: 0, k: 1 };
  const svg = svgEl("svg", {});
  const viewport = svgEl("g", {});
  svg.append(viewport);
  $("graph").append(svg);
  let layoutInfo = null;

  function draw() {
    const repOf = new Map();
    for (const n of D.nodes) repOf.set(n.id, rep(n));
    const shown = new Set(repOf.values());
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 36, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(() => ({}));
    const labels = new Map();
    for (const id of shown) {
      let label, kind;
      if (groups.has(id)) {
        const gr = groups.get(id);
        const k = commAt.get(id);
        label = `\u25B8 ${gr.label} (${size.get(id)} ops${k ? ", " + k + " collectives" : ""})`;
        kind = "group";
      } else {
        const n = nodes.get(id);
        label = n.kind === "op" ? n.op + (n.line ? "  " + n.line : "") : n.label;
        kind = n.kind;
      }
      if (label.length > 60) label = label.slice(0, 57) + "...";
      labels.set(id, { label, kind });
      g.setNode(id, { width: Math.max(70, label.length * 6.4 + 22), height: kind === "group" ? 34 : 28 });
    }
    const agg = new Map();
    D.edges.forEach((e, i) => {
      const s = repOf.get(e.src), d = repOf.get(e.dst);
      if (s === d) return;
      const key = s + "\u0000" + d;
      if (!agg.has(key)) agg.set(key, { s, d, edges: [] });
      agg.get(key).edges.push(i);
    });
    // A box used by many others (a weight every layer reads) would drag long
    // edges across the whole layout, which is unreadable and makes dagre
    // slow; its uses beyond the first few are drawn from a small copy (a
    // "ghost") right above each user instead, one ghost per user for all
    // such inputs. Arguments are always drawn so (a program's many
    // parameters would otherwise make one very wide first row).
    const fanout = new Map();
    for (const a of agg.values()) fanout.set(a.s, (fanout.get(a.s) || 0) + 1);
    const ghosts = new Map(); // ghost id -> the boxes it stands for
    for (const a of agg.values()) {
      if (fanout.get(a.s) > FANOUT || labels.get(a.s).kind === "arg") {
        const gid = "ghost\u0000" + a.d;
        if (!ghosts.has(gid)) ghosts.set(gid, []);
        ghosts.get(gid).push(a.s);
        a.s = gid;
      }
      const found = g.edge(a.s, a.d);
      if (found) found.key.edges.push(...a.edges); else g.setEdge(a.s, a.d, { key: a });
    }
    for (const [gid, sources] of ghosts) {
      const name = (id) => {
        const label = labels.get(id).label;
        if (label.length <= 28) return label;
        return labels.get(id).kind === "arg" ? "..." + label.slice(-25) : label.slice(0, 25) + "...";
      };
      const text = sources.length === 1 ? name(sources[0]) : `${sources.length} inputs: ${name(sources[0])}, ...`;
      labels.set(gid, { label: "\u21AA " + text, kind: "ghost" });
      g.setNode(gid, { width: Math.max(50, text.length * 6.4 + 30), height: 22 });
    }
    for (const id of shown) if (labels.get(id).kind === "arg") g.removeNode(id);
    dagre.layout(g);
    viewport.replaceChildren();
    for (const e of g.edges()) {
      const info = g.edge(e);
      const a = info.key;
      const colls = a.edges.flatMap((i) => D.edges[i].c || []);
      const first = D.values[D.edges[a.edges[0]].v];
      const grp = svgEl("g", { class: "edge" + (colls.length ? " comm" : "") });
      const pts = info.points;
      const d = "M" + pts.map((p) => `${p.x},${p.y}`).join("L");
      const path = svgEl("path", { d, stroke: colour(first.s), "marker-end": "url(#arrow)" });
      const title = svgEl("title", {});
      title.textContent = a.edges.slice(0, 6).map((i) => valueText(D.values[D.edges[i].v])).join("\n") +
        (colls.length ? "\n" + colls.map((c) => describe(D.collectives[c])).join("\n") : "");
      path.append(title);
      grp.append(path);
      if (colls.length) {
        const mid = pts[Math.floor(pts.length / 2)];
        const total = colls.reduce((s, c) => s + D.collectives[c].bytes, 0);
        const kinds = [...new Set(colls.map((c) => SHORT[D.collectives[c].kind] || D.collectives[c].kind))].join("+");
        const tx = svgEl("text", { x: mid.x + 6, y: mid.y });
        tx.textContent = `${kinds} ${bytes(total)}`;
        grp.append(tx);
        grp.addEventListener("click", () => showCollectives(colls));
      }
      viewport.append(grp);
    }
    for (const id of g.nodes()) {
      const box = g.node(id);
      const { label, kind } = labels.get(id);
      const real = ghosts.get(id);
      const grp = svgEl("g", { class: "node " + (kind === "group" ? "group" : kind === "op" ? "op" : kind === "ghost" ? "ghost" : "io") +
        (selected === id ? " selected" : ""), transform: `translate(${box.x - box.width / 2},${box.y - box.height / 2})` });
      grp.dataset.id = id;
      const rect = svgEl("rect", { width: box.width, height: box.height, rx: 4 });
      if (kind === "ghost") {
        const text = svgEl("text", { x: 6, y: box.height / 2 + 4 });
        text.textContent = label;
        const title = svgEl("title", {});
        title.textContent = "drawn here, not at its place: " + real.map((r) => labels.get(r).label).join(", ") +
          " (click to select the first)";
        grp.append(rect, text, title);
        grp.addEventListener("click", (ev) => {
          ev.stopPropagation();
          if (nodes.has(real[0])) select(real[0]); else { expanded.add(real[0]); draw(); }
        });
        viewport.append(grp);
        continue;
      }
      if (kind === "op") {
        const n = nodes.get(id);
        rect.setAttribute("fill", n.res.length ? colour(D.values[n.res[0]].s) : "#fff");
      }
      const text = svgEl("text", { x: 8, y: box.height / 2 + 4 });
      text.textContent = label;
      const title = svgEl("title", {});
      title.textContent = kind === "group" ? "click to expand" :
        (nodes.get(id).loc || "") + "\n" + (nodes.get(id).res || []).map((r) => valueText(D.values[r])).join("\n");
      grp.append(rect, text, title);
      const k = kind === "group" ? 0 : badges.get(id) || 0;
      if (k) {
        const b = svgEl("g", { class: "badge", transform: `translate(${box.width},0)` });
        const c = svgEl("circle", { r: 8 });
        const bt = svgEl("text", { x: -3, y: 3.5 });
        bt.textContent = String(k);
        b.append(c, bt);
        grp.append(b);
      }
      grp.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (kind === "group") { expanded.add(id); draw(); } else select(id);
      });
      grp.addEventListener("dblclick", (ev) => { ev.stopPropagation(); if (kind !== "group") collapse(id); });
      viewport.append(grp);
    }
    const gi = g.graph();
    layoutInfo = { width: gi.width || 100, height: gi.height || 100, g };
    $("graph-status").textContent = `${shown.size} boxes shown of ${D.nodes.length} ops, arguments and results; ` +
      "click a scope to expand it, double-click an op to collapse its scope; drag to pan, wheel to zoom";
    applyView();
  }
  function applyView() { viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`); }
  function fit() {
    const r = $("graph").getBoundingClientRect();
    const w = r.width || 800, h = r.height || 500;
    // whole layout when it fits at a readable scale, else its top, readable
    const k = Math.max(0.5, Math.min(1.2, w / layoutInfo.width, h / layoutInfo.height));
    view = { k, x: Math.max(10, (w - layoutInfo.width * k) / 2), y: 10 };
    applyView();
  }
  function centerOn(id) {
    const box = layoutInfo.g.node(id);
    if (!box) return;
    const r = $("graph").getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.x = (r.width || 800) / 2 - box.x * view.k;
    view.y = (r.height || 500) / 2 - box.y * view.k;
    applyView();
  }
  function collapse(id) {
    const n = nodes.get(id);
    const path = groupPath.get(n.group) || [];
    const inner = path[path.length - 1];
    if (inner && inner !== "g0") { expanded.delete(inner); draw(); }
  }
  function reveal(id) {
    const n = nodes.get(id);
    if (!n) return;
    for (const gid of groupPath.get(n.group) || []) expanded.add(gid);
  }
  function valueText(v) { return `${v.t}  ${D.shardings[v.s]}`; }
  function originLines(r) {
    const v = D.values[r];
    const lines = [`${v.n}: ${D.shardings[v.s]}`];
    for (const o of v.o || []) lines.push(`  from user sharding: ${o}`);
    const S = D.strings;
    for (const [dim, axes, ...first] of v.st || []) {
      lines.push(`  dim ${dim} ${axes}:`);
      let step = first;
      const seen = new Set();
      for (let k = 0; k < 24 && step; k++) {
        const [op, line, how, f, fd] = step;
        lines.push(`    <- through ${S[op]}${S[line] ? " at " + S[line] : ""}, ${S[how]}` +
          (f >= 0 ? ` from ${D.values[f].n}` : ""));
        if (f < 0 || seen.has(f + ":" + fd)) break;
        seen.add(f + ":" + fd);
        const src = D.values[f];
        const next = (src.st || []).find((x) => x[0] === fd);
        if (!next) {
          if (src.o) lines.push(`       ${src.n} has the user sharding of ${src.o.join("; ")}`);
          break;
        }
        step = next.slice(2);
      }
    }
    for (const c of v.cf || []) lines.push("  " + D.strings[c]);
    if (lines.length === 1) lines.push("  (no axes, or no propagation step recorded for it)");
    return lines;
  }
  function describe(c) {
    return `${c.kind} over {${c.axes.join(",")}} ${bytes(c.bytes)} (~${c.us} us) for ${c.op} at ${c.line || "?"}: ${c.reason}`;
  }
  function select(id) {
    selected = id;
    reveal(id);
    draw();
    centerOn(id);
    const n = nodes.get(id);
    const side = $("side");
    side.replaceChildren(el("h3", { text: n.kind === "op" ? n.op : n.label }));
    if (n.loc) side.append(el("div", { class: "mono", text: n.loc }));
    if (n.scope) side.append(el("div", { class: "note", text: "scope: " + n.scope }));
    if (n.nested) side.append(el("div", { class: "note", text: `${n.nested} ops in its regions (not drawn)` }));
    for (const r of n.res || []) {
      const v = D.values[r];
      side.append(el("h3", { text: v.n }), el("div", { class: "mono", text: valueText(v) }));
      side.append(el("pre", { text: originLines(r).join("\n") }));
    }
    const cs = D.collectives.filter((c) => c.node === id);
    if (cs.length) {
      side.append(el("h3", { text: `${cs.length} collectives here` }));
      for (const c of cs) side.append(el("pre", { text: describe(c) + (c.explanation.length ? "\n" + c.explanation.join("\n") : "") }));
    }
    for (const tr of document.querySelectorAll("tr.coll")) tr.classList.toggle("selected", tr.dataset.node === id);
  }
  function showCollectives(list) {
    const side = $("side");
    side.replaceChildren(el("h3", { text: `${list.length} collectives on this edge` }));
    for (const i of list) {
      const c = D.collectives[i];
      side.append(el("pre", { text: describe(c) + (c.explanation.length ? "\n" + c.explanation.join("\n") : "") }));
    }
  }
  (function panZoom() {
    let drag = null;
    svg.addEventListener("mousedown", (e) => { drag = { x: e.clientX - view.x, y: e.clientY - view.y }; });
    window.addEventListener("mouseup", () => { drag = null; });
    window.addEventListener("mousemove", (e) => { if (drag) { view.x = e.clientX - drag.x; view.y = e.clientY - drag.y; applyView(); } });
    svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      const mx = e.clientX - r.left, my = e.clientY - r.top;
      const f = Math.exp(-e.deltaY * 0.0015);
      view.x = mx - (mx - view.x) * f; view.y = my - (my - view.y) * f; view.k *= f;
      applyView();
    }, { passive: false });
  })();
  const defs = svgEl("defs", {});
  const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
  marker.append(svgEl("path", { d: "M0,0L10,5L0,10z", fill: "#6b7385" }));
  defs.append(marker);
  svg.prepend(defs);
  $("expand-all").addEventListener("click", () => {
    for (const g of D.groups) if (size.get(g.id) <= 400) expanded.add(g.id);
    draw(); fit();
  });
  $("collapse-all").addEventListener("click", () => { expanded.clear(); expanded.add("g0"); draw(); fit(); });
  $("fit").addEventListener("click", fit);

  // legend: one colour per sharding
  D.shardings.slice(0, PALETTE.length).forEach((s, i) => {
    $("legend").append(el("span", {}, el("span", { class: "sw", style: `background:${colour(i)}` }), el("code", { text: s })));
  });
  if (D.shardings.length > PALETTE.length)
    $("legend").append(el("span", { class: "note", text: `${D.shardings.length - PALETTE.length} more shardings in grey` }));

  // -- search --------------------------------------------------------------------
  $("search").addEventListener("input", () => {
    const q = $("search").value.trim().toLowerCase();
    const box = $("search-results");
    box.replaceChildren();
    if (!q) { box.style.display = "none"; return; }
    const hits = [];
    for (let r = 0; r < D.values.length && hits.length < 50; r++) {
      const v = D.values[r];
      const n = nodes.get(v.node);
      const hay = `${v.n} ${D.shardings[v.s]} ${n ? (n.loc || "") + " " + (n.scope || "") : ""}`.toLowerCase();
      if (hay.includes(q)) hits.push(v);
    }
    for (const v of hits) {
      box.append(el("div", { class: "mono", text: `${v.n}  ${valueText(v)}`,
        onclick: () => { box.style.display = "none"; select(v.node); } }));
    }
    if (!hits.length) box.append(el("div", { class: "note", text: "no value matches" }));
    box.style.display = "block";
  });

  // -- collectives table ---------------------------------------------------------
  (function collectivesTable() {
    const cols = [["#", "index", true], ["kind", "kind", false], ["mesh axes", "axes", false],
      ["bytes / device", "bytes", true], ["estimated us", "us", true], ["op", "op", false],
      ["source line", "line", false], ["the two shardings that forced it", "reason", false],
      ["explanation", "explanation", false]];
    const tbl = el("table", { class: "data", id: "collectives-table" });
    const head = el("tr");
    const body = el("tbody");
    let order = D.collectives.map((_, i) => i);
    let sortKey = "index", asc = true;
    function fill() {
      body.replaceChildren();
      for (const i of order) {
        const c = D.collectives[i];
        const tr = el("tr", { class: "coll", "data-node": c.node },
          el("td", { class: "num", text: String(c.index) }), el("td", { text: c.kind }),
          el("td", { class: "mono", text: "{" + c.axes.join(",") + "}" }),
          el("td", { class: "num", text: String(c.bytes) }), el("td", { class: "num", text: c.us.toFixed(1) }),
          el("td", { class: "mono", text: c.op }), el("td", { class: "mono", text: c.line, title: c.loc }),
          el("td", { class: "mono", text: c.reason }),
          el("td", { class: "mono", text: c.explanation.join("\n") }));
        tr.addEventListener("click", () => { if (c.node) { select(c.node); $("graph-section").scrollIntoView(); } });
        body.append(tr);
      }
    }
    for (const [label, key, numeric] of cols) {
      const th = el("th", { class: "sortable", text: label });
      th.addEventListener("click", () => {
        asc = sortKey === key ? !asc : !numeric;
        sortKey = key;
        order.sort((a, b) => {
          const x = D.collectives[a][key], y = D.collectives[b][key];
          const r = numeric ? x - y : String(x).localeCompare(String(y));
          return asc ? r : -r;
        });
        fill();
      });
      head.append(th);
    }
    tbl.append(el("thead", {}, head), body);
    fill();
    const foot = `total: ${t.count} collectives, ${t.bytes} B per device, estimated ${t.us.toFixed(1)} us` +
      (t.bound != null ? `; analytic bound ${t.bound} B (${(t.bytes / Math.max(1, t.bound)).toFixed(2)}x)` : "") +
      (t.combined.length ? "; combined after partitioning: " + t.combined.map((g) => `${g.count} ${g.kind} into one`).join(", ") : "");
    $("collectives").append(el("p", { class: "note", id: "collectives-total", text: foot }), tbl);
    if (!D.collectives.length) $("collectives").append(el("p", { class: "note", text: "no collectives: every op runs on its own blocks" }));
    if (D.remarks.length) {
      $("collectives").append(el("h3", { text: "partitioner remarks" }));
      for (const r of D.remarks) $("collectives").append(el("div", { class: "mono", text: `${r.loc}: ${r.message}` }));
    }
  })();

  // -- memory ----------------------------------------------------------------------
  (function memoryChart() {
    const m = D.memory;
    const box = $("memory");
    if (m.error) box.append(el("p", { class: "note warn", text: m.error }));
    const rows = [];
    if (m.curve) rows.push(["arguments", m.arguments], ["results", m.results], ["peak of live values (program order)", m.peak]);
    for (const [k, v] of Object.entries(m.xla || {})) rows.push(["XLA: " + k.replace(/_/g, " "), v]);
    const max = Math.max(1, ...rows.map((r) => r[1]));
    const W = 640, H = 22 * rows.length + 10;
    const bars = svgEl("svg", { width: W + 260, height: H, id: "memory-bars" });
    rows.forEach(([label, v], i) => {
      const y = 5 + i * 22;
      const tx = svgEl("text", { x: 0, y: y + 13 }); tx.textContent = label;
      const r = svgEl("rect", { x: 250, y, width: Math.max(1, (W - 120) * v / max), height: 16,
        fill: label.startsWith("XLA") ? "#b9c6dd" : "#7ea6f0" });
      const vt = svgEl("text", { x: 256 + (W - 120) * v / max, y: y + 13 }); vt.textContent = bytes(v);
      bars.append(tx, r, vt);
    });
    box.append(bars);
    if (!m.curve || !m.curve.length) return;
    const cw = 900, ch = 220, pad = 50;
    const xs = m.curve.map((p) => p[0]), ys = m.curve.map((p) => p[1]);
    const xmax = Math.max(1, ...xs), ymax = Math.max(1, ...ys);
    const chart = svgEl("svg", { width: cw, height: ch + 30, id: "memory-curve" });
    const sx = (x) => pad + (cw - pad - 10) * x / xmax, sy = (y) => ch - (ch - 20) * y / ymax;
    chart.append(svgEl("path", { d: "M" + m.curve.map((p) => `${sx(p[0])},${sy(p[1])}`).join("L"), fill: "none", stroke: "#2456c8", "stroke-width": 1.5 }));
    chart.append(svgEl("line", { x1: pad, x2: cw - 10, y1: sy(m.arguments), y2: sy(m.arguments), stroke: "#999", "stroke-dasharray": "4 3" }));
    const lab = (x, y, s) => { const e = svgEl("text", { x, y }); e.textContent = s; chart.append(e); };
    lab(pad + 4, sy(m.arguments) - 4, "arguments " + bytes(m.arguments));
    lab(pad + 4, 14, "peak " + bytes(m.peak));
    lab(pad, ch + 20, "op 0");
    lab(cw - 80, ch + 20, "op " + xmax);
    chart.append(svgEl("line", { x1: pad, x2: pad, y1: 10, y2: ch, stroke: "#333" }));
    chart.append(svgEl("line", { x1: pad, x2: cw - 10, y1: ch, y2: ch, stroke: "#333" }));
    box.append(el("p", { class: "note", text: "live bytes per device after each op of the per-device program, in program order (XLA may fuse, reorder and reuse buffers; its own figures are the grey bars)" }), chart);
  })();

  draw();
  fit();
  // renderMs: this script; readyMs: from the start of navigation (reading
  // the file, parsing the page and its data, this script)
  const ms = performance.now() - T0;
  document.documentElement.dataset.renderMs = ms.toFixed(0);
  document.documentElement.dataset.readyMs = performance.now().toFixed(0);
  $("status").textContent = `drawn in ${ms.toFixed(0)} ms`;
  document.documentElement.dataset.status = window.__reportErrors.length ? "error" : "ok";
})();
