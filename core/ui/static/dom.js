// Small DOM helpers. Stored texts reach the page only as text nodes, never as HTML, with their bidirectional
// controls shown as escapes (`shown`).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    // A textarea's text is the value edited and saved: it keeps the stored characters.
    if (child instanceof Node || el.tagName === "TEXTAREA") el.append(child);
    else el.append(...shown(String(child)));
  }
}

// Bidirectional controls (embeddings, overrides, isolates, marks) reorder what is shown around them: a stored
// "payment to \u202e0001$ 9\u202c" would read "payment to 9 $1000" ("Trojan Source"). The page shows each as its
// escape, as the terminal does (core/terminal.py), so what a person reads is what a model reads.
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escaped(control) {
  return `\\u${control.codePointAt(0).toString(16).padStart(4, "0")}`;
}

// `text` as text nodes, each bidirectional control as its escape in a <span class="control">.
function shown(text) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(BIDI_CONTROLS)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const control = document.createElement("span");
    control.className = "control";
    control.title = "a hidden direction control, shown as its code";
    control.textContent = escaped(match[0]);
    nodes.push(control);
    last = match.index + match[0].length;
  }
  if (last < text.length || !nodes.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

// `text` with its bidirectional controls as escapes, for plain text (the window's title, SVG labels).
export function visible(text) {
  return String(text).replace(BIDI_CONTROLS, escaped);
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// `text` as nodes with the ranges `marks` in <mark>: [start, end) in code points, as the server computes them
// with its own tokenizer (core/ui/marks.py), so the page marks exactly the words keyword search matched. `wrap`
// makes the node of a range (an error's quoted names are isolated: `quotedIsolated`).
export function marked(text, marks, wrap = (piece) => h("mark", {}, piece)) {
  if (!marks || !marks.length) return [text];
  const chars = Array.from(text);  // by code point, as the server counts
  const parts = [];
  let last = 0;
  for (const [start, end] of marks) {
    if (start > last) parts.push(chars.slice(last, start).join(""));
    parts.push(wrap(chars.slice(start, end).join("")));
    last = end;
  }
  if (last < chars.length) parts.push(chars.slice(last).join(""));
  return parts;
}

// A stable colour for an entity type.
const PALETTE = ["#3b6ea5", "#d1495b", "#2e8b57", "#8e5ea2", "#e07b24", "#2a9d8f", "#b5651d", "#c2185b",
  "#5c6bc0", "#6d8b00", "#00838f", "#ad1457", "#7b5e3b", "#455a64", "#9e7700", "#1565c0"];

export function typeColour(type) {
  let hash = 2166136261;
  for (const ch of String(type || "").toLowerCase()) hash = Math.imul(hash ^ ch.codePointAt(0), 16777619);
  return PALETTE[(hash >>> 0) % PALETTE.length];
}

// A name (or any stored text) inside a sentence of the page's own (a notice, a question): in a <bdi>, so a
// right-to-left name keeps its place, and a list of them its order ("Merged דוד, שרה into ...").
export function isolated(name) {
  return h("bdi", {}, name);
}

// A tool's error with the names it quotes ('דוד כהן', as the API's `quoted` ranges place them) each isolated, as
// in the page's own sentences: "no entity named 'דוד', 'שרה'" keeps the list's order.
export function quotedIsolated(text, ranges) {
  return marked(text, ranges, isolated);
}

// An error of the API as shown: a tool's text with the names it quotes isolated (the API's `quoted` ranges of it),
// so a right-to-left name keeps its place, as in the page's own notices.
export function errorText(error) {
  const ranges = error.body && error.body.error === error.message ? error.body.quoted : null;
  return quotedIsolated(error.message, ranges);
}

// Names as "a, b, c", each isolated.
export function isolatedList(names) {
  return names.map((name, i) => [i ? ", " : "", isolated(name)]);
}

// dir="auto" on an element of stored text: its own direction, isolated from what is around it (ui.css), so a
// right-to-left name does not reorder the line it is in.
export function typeBadge(type) {
  return h("span", { class: "type", dir: "auto", style: `background:${typeColour(type)}` }, type);
}
