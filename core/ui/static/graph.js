// The graph drawing: SVG, laid out by a small force simulation (repulsion between every pair of nodes, springs
// along relations, a pull to the middle), with zoom (wheel, buttons), pan (drag the background), nodes that can
// be dragged, and a click that opens an entity. Meant for what a search returns (up to 200 nodes): the
// all-pairs repulsion is 40,000 pairs a step there, a few milliseconds.

import { h, typeColour, visible } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const SPRING = 120;         // rest length of a relation, in layout units (longer in a small graph: room for labels)
const REPULSION = 12000;
const GRAVITY = 0.02;
const STEPS_PER_FRAME = 4;

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  if (text !== undefined) el.textContent = visible(text);  // a label shows its direction controls as escapes
  return el;
}

// Draw {nodes: [{name, type, anchor?}], edges: [{source, target, type, ended?, planned?, period?}]} into
// `container` (an ended fact dashed, a planned one dotted); `onOpen(name)` is called when a node is clicked. Returns {stop()} to end the animation.
export function drawGraph(container, graph, { onOpen, center } = {}) {
  const width = Math.max(container.clientWidth, 300);
  const height = Math.max(container.clientHeight, 300);
  const nodes = graph.nodes.map((n, i) => ({ ...n, ...start(i, graph.nodes.length), vx: 0, vy: 0 }));
  const index = new Map(nodes.map((n, i) => [n.name, i]));
  const edges = graph.edges.filter((e) => index.has(e.source) && index.has(e.target) && e.source !== e.target)
    .map((e) => ({ ...e, a: index.get(e.source), b: index.get(e.target) }));
  if (center && index.has(center)) Object.assign(nodes[index.get(center)], { x: 0, y: 0, fixed: true });

  const svg = s("svg", { class: "graph-svg", viewBox: `${-width / 2} ${-height / 2} ${width} ${height}`,
    role: "img", "aria-label": `graph of ${nodes.length} entities and ${edges.length} relations`,
    "data-nodes": nodes.length, "data-edges": edges.length });
  const defs = s("defs");
  const marker = s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 22, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }));
  defs.append(marker);
  const view = s("g", { class: "viewport" });
  svg.append(defs, view);
  const edgeLayer = s("g", { class: "edges" });
  const nodeLayer = s("g", { class: "nodes" });
  view.append(edgeLayer, nodeLayer);

  for (const edge of edges) {
    edge.g = s("g", { class: edge.ended ? "edge ended" : edge.planned ? "edge planned" : "edge" });
    edge.line = s("line", { "marker-end": "url(#arrow)" });
    edge.label = s("text", { class: "edge-label" }, edge.type);
    const title = s("title", {}, `${edge.source} -${edge.type}-> ${edge.target}${edge.description ? ": " + edge.description : ""}` +
      (edge.period ? ` (${edge.period})` : ""));
    edge.g.append(edge.line, edge.label, title);
    edgeLayer.append(edge.g);
  }
  for (const node of nodes) {
    const anchor = node.anchor || node.name === center;
    node.g = s("g", { class: `node${anchor ? " anchor" : ""}`, "data-name": node.name, "data-type": node.type,
      tabindex: 0, role: "button", "aria-label": `${node.name} (${node.type})` });
    if (anchor) node.g.append(s("circle", { r: 15, class: "anchor-ring" }));
    node.g.append(s("circle", { r: 10, fill: typeColour(node.type) }),
      s("text", { x: 14, y: 4, class: "node-label" }, node.name),
      s("title", {}, `${node.name} (${node.type})${anchor ? " — anchor" : ""}`));
    nodeLayer.append(node.g);
  }

  // -- zoom and pan ---------------------------------------------------------------------------------------
  let zoom = 1, panX = 0, panY = 0;
  const applyView = () => view.setAttribute("transform", `translate(${panX},${panY}) scale(${zoom})`);
  const toLayout = (event) => {
    const box = svg.getBoundingClientRect();
    const x = (event.clientX - box.left) / box.width * width - width / 2;
    const y = (event.clientY - box.top) / box.height * height - height / 2;
    return { x: (x - panX) / zoom, y: (y - panY) / zoom, sx: x, sy: y };
  };
  const zoomBy = (factor, at = { sx: 0, sy: 0 }) => {
    const next = Math.min(6, Math.max(0.15, zoom * factor));
    panX = at.sx - (at.sx - panX) * next / zoom;
    panY = at.sy - (at.sy - panY) * next / zoom;
    zoom = next;
    applyView();
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    zoomBy(Math.exp(-event.deltaY * 0.0015), toLayout(event));
  }, { passive: false });

  let drag = null;
  svg.addEventListener("pointerdown", (event) => {
    const g = event.target.closest(".node");
    const at = toLayout(event);
    drag = { node: g ? nodes[index.get(g.dataset.name)] : null, start: at, moved: false, panX, panY };
    try {
      svg.setPointerCapture(event.pointerId);
    } catch (error) { /* a pointer the browser does not track (a synthetic event): no capture needed */ }
  });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const at = toLayout(event);
    if (Math.hypot(at.sx - drag.start.sx, at.sy - drag.start.sy) > 4) drag.moved = true;
    if (!drag.moved) return;
    if (drag.node) {
      Object.assign(drag.node, { x: at.x, y: at.y, vx: 0, vy: 0, fixed: true });
      heat(0.3);
    } else {
      panX = drag.panX + at.sx - drag.start.sx;
      panY = drag.panY + at.sy - drag.start.sy;
      applyView();
    }
  });
  svg.addEventListener("pointerup", () => {
    if (drag && drag.node && !drag.moved && onOpen) onOpen(drag.node.name);
    drag = null;
  });
  svg.addEventListener("keydown", (event) => {
    const g = event.target.closest(".node");
    if (g && event.key === "Enter" && onOpen) onOpen(g.dataset.name);
  });

  const fit = () => {
    if (!nodes.length) return;
    const xs = nodes.map((n) => n.x), ys = nodes.map((n) => n.y);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    // Room for the labels, which hang to the right of their nodes.
    zoom = Math.min(1.25, Math.max(0.15, Math.min(width / (x1 - x0 + 260), height / (y1 - y0 + 80))));
    panX = -((x0 + x1) / 2 + 50) * zoom;
    panY = -(y0 + y1) / 2 * zoom;
    applyView();
  };

  const controls = h("div", { class: "graph-controls" },
    h("button", { type: "button", title: "zoom in", onclick: () => zoomBy(1.3) }, "+"),
    h("button", { type: "button", title: "zoom out", onclick: () => zoomBy(1 / 1.3) }, "−"),
    h("button", { type: "button", title: "fit the drawing", onclick: fit }, "fit"));
  const types = [...new Set(nodes.map((n) => n.type))].sort();
  const legend = h("div", { class: "legend" }, types.map((t) =>
    h("span", {}, h("i", { style: `background:${typeColour(t)}` }), t)),
    nodes.some((n) => n.anchor) ? h("span", {}, h("i", { class: "ring" }), "anchor") : null);
  container.replaceChildren(svg, controls, legend);

  // -- the simulation --------------------------------------------------------------------------------------
  let alpha = 1, frame = null, stopped = false;
  function heat(value) {
    alpha = Math.max(alpha, value);
    if (!frame && !stopped) frame = requestAnimationFrame(tick);
  }
  const spring = nodes.length < 15 ? SPRING * 1.5 : SPRING;
  function step() {
    const n = nodes.length;
    for (let i = 0; i < n; i++) {
      const a = nodes[i];
      for (let j = i + 1; j < n; j++) {
        const b = nodes[j];
        let dx = a.x - b.x, dy = a.y - b.y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 1) { dx = (i - j) * 0.5 + 0.1; dy = 0.3; d2 = dx * dx + dy * dy; }
        const f = REPULSION / d2 * alpha;
        const d = Math.sqrt(d2);
        a.vx += dx / d * f; a.vy += dy / d * f;
        b.vx -= dx / d * f; b.vy -= dy / d * f;
      }
    }
    for (const e of edges) {
      const a = nodes[e.a], b = nodes[e.b];
      const dx = b.x - a.x, dy = b.y - a.y;
      const d = Math.max(Math.hypot(dx, dy), 0.01);
      const f = (d - spring) * 0.05 * alpha;
      a.vx += dx / d * f; a.vy += dy / d * f;
      b.vx -= dx / d * f; b.vy -= dy / d * f;
    }
    for (const node of nodes) {
      node.vx -= node.x * GRAVITY * alpha;
      node.vy -= node.y * GRAVITY * alpha;
      if (node.fixed) { node.vx = node.vy = 0; continue; }
      node.vx *= 0.6; node.vy *= 0.6;
      node.x += Math.max(-30, Math.min(30, node.vx));
      node.y += Math.max(-30, Math.min(30, node.vy));
    }
    alpha *= 0.985;
  }
  function render() {
    for (const node of nodes) node.g.setAttribute("transform", `translate(${node.x.toFixed(1)},${node.y.toFixed(1)})`);
    for (const e of edges) {
      const a = nodes[e.a], b = nodes[e.b];
      e.line.setAttribute("x1", a.x.toFixed(1)); e.line.setAttribute("y1", a.y.toFixed(1));
      e.line.setAttribute("x2", b.x.toFixed(1)); e.line.setAttribute("y2", b.y.toFixed(1));
      e.label.setAttribute("x", ((a.x + b.x) / 2).toFixed(1));
      e.label.setAttribute("y", ((a.y + b.y) / 2 - 3).toFixed(1));
    }
  }
  let fitted = false;
  function tick() {
    frame = null;
    for (let i = 0; i < STEPS_PER_FRAME; i++) step();
    render();
    if (!fitted && alpha < 0.35) { fit(); fitted = true; }
    if (alpha > 0.02 && !stopped) frame = requestAnimationFrame(tick);
    else svg.dataset.settled = "true";
  }
  // Settle most of the way before the first paint, so the drawing does not start as a tangle.
  for (let i = 0; i < 60; i++) step();
  render();
  fit();
  heat(alpha);
  return { stop() { stopped = true; if (frame) cancelAnimationFrame(frame); } };
}

// Nodes start on a spiral: deterministic, and no two at one point.
function start(i, count) {
  const angle = i * 2.399963;
  const radius = 12 * Math.sqrt(i + 1) * (count > 50 ? 1.5 : 1);
  return { x: Math.cos(angle) * radius, y: Math.sin(angle) * radius };
}
