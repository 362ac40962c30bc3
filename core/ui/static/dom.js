// Small DOM helpers. Stored texts reach the page only as text nodes, never as HTML.

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
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A word as the server's keyword index folds it: lower case, accents dropped.
export function fold(word) {
  return word.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

const WORD_RUN = /[\p{L}\p{N}]+(?:[-._/][\p{L}\p{N}]+)*/gu;

// `text` as nodes, with the words of `words` (folded, as the server lists them) in <mark>.
export function marked(text, words) {
  const wanted = new Set(words || []);
  if (!wanted.size) return [text];
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(WORD_RUN)) {
    const run = fold(match[0]);
    const hit = wanted.has(run) || run.split(/[-._/]/).some((part) => wanted.has(part));
    if (!hit) continue;
    if (match.index > last) parts.push(text.slice(last, match.index));
    parts.push(h("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
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

export function typeBadge(type) {
  return h("span", { class: "type", style: `background:${typeColour(type)}` }, type);
}
