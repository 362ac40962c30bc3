// The page: five views chosen by the address (#/ browse, #/search?q=&as_of=&history=&after=&before=,
// #/entity?name=, #/community?id=, #/document?id=&chunk=; each with ns= for a namespace other than the default),
// each drawn from the JSON API of core/ui/app.py, and the curation actions of an entity's page and of a passage's
// document.

import { append, clear, errorText, h, isolated, isolatedList, marked, typeBadge, visible } from "./dom.js";
import { drawGraph } from "./graph.js";
import { ask, confirmAction, editEntity } from "./curate.js";

const view = document.getElementById("view");
const nsSelect = document.getElementById("namespace");
// namespace: the address's (its ns=; null: the default one, whose name the overview gives as defaultNamespace).
const state = { namespace: null, defaultNamespace: null, overview: null, drawing: null };

// -- the API ---------------------------------------------------------------------------------------------

async function api(path, params = {}) {
  const query = new URLSearchParams({ namespace: state.namespace || "" });
  // A list goes as its parameter repeated (source=a&source=b): a name may hold a comma.
  for (const [key, value] of Object.entries(params)) for (const one of [value].flat()) query.append(key, one);
  return answer(await fetch(`/api/${path}?${query}`, { headers: { accept: "application/json" } }));
}

// Tools about the whole file rather than one namespace: they take no namespace, and the API refuses a namespace
// other than the default for a tool that takes none (it would act on the default one).
const FILE_TOOLS = new Set(["list_namespaces"]);

export async function callTool(name, args) {
  return answer(await fetch(`/api/tool/${encodeURIComponent(name)}`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ arguments: args, namespace: FILE_TOOLS.has(name) ? null : state.namespace }),
  }));
}

async function answer(response) {
  // The login ended (its cookie expired, or the UI restarted with a new key): the address loaded again shows the
  // token form, whose login returns to this same view. The promise never settles, so nothing is drawn meanwhile.
  if (response.status === 401) {
    location.reload();
    return new Promise(() => {});
  }
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) {
    const error = new Error(body.error || body.error_description || `${response.status}`);
    error.body = body;  // what else the API says (did_you_mean, hint, quoted): shown with the error
    error.status = response.status;
    throw error;
  }
  return body;
}

function available(tool) {
  return state.overview && state.overview.tools.includes(tool);
}

// -- routing ---------------------------------------------------------------------------------------------

function route() {
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(search || "");
  return { path, params };
}

export function go(path, params = {}, namespace = state.namespace) {
  const query = new URLSearchParams(params);
  if (namespace && namespace !== state.defaultNamespace) query.set("ns", namespace);
  const target = `#${path}${[...query].length ? "?" + query : ""}`;
  if (location.hash === target) render();
  else location.hash = target;
}

let renders = 0;  // the latest render's number: an earlier one answered later (a slower page) draws nothing

async function render() {
  const mine = ++renders;
  const live = () => mine === renders;
  const { path, params } = route();
  // The address alone decides the namespace (none: the default), so Back after a switch returns to the one left.
  state.namespace = params.get("ns") || state.defaultNamespace;
  selectNamespace(state.namespace);
  state.drawing?.stop();
  state.drawing = null;
  try {
    // The start page reads its counts again each time it is shown, as its recent changes are: other clients (an
    // agent) write meanwhile. Other views keep the overview read last (its namespaces and tools).
    const start = path === "/search" ? !params.get("q")?.trim()
      : !["/entity", "/community", "/document"].includes(path);
    if (start || !state.overview || state.overview.namespace !== (state.namespace || state.overview.default_namespace)) {
      const overview = await api("overview");
      if (!live()) return;
      useOverview(overview);
    }
    if (path === "/search") await showSearch(params, live);
    else if (path === "/entity") await showEntity(params.get("name") || "", live);
    else if (path === "/community") await showCommunity(params.get("id") || "", live);
    else if (path === "/document") await showDocument(params.get("id") || "", params.get("chunk"), live);
    else showBrowse();
  } catch (error) {
    if (live()) clear(view, h("p", { class: "error" }, errorText(error)), helpOf(error.body));
  }
}

// What an error's answer adds to help: the names a missing one likely meant (as links), a hint.
function helpOf(body) {
  const meant = body?.did_you_mean || [];
  return [meant.length ? h("p", { id: "did-you-mean" }, "Did you mean ",
    meant.map((name, i) => [i ? (i === meant.length - 1 ? " or " : ", ") : "", entityLink(name)]), "?") : null,
  body?.hint ? h("p", { class: "muted", id: "error-hint" }, body.hint) : null];
}

// The select shows the address's namespace, also while the page says why it cannot show it (an invalid name):
// the select and the page never disagree. useOverview lists the namespaces again once one is shown.
function selectNamespace(name) {
  if (!name) return;
  for (const option of [...nsSelect.options]) if (option.dataset.unlisted && option.value !== name) option.remove();
  if (![...nsSelect.options].some((o) => o.value === name)) {
    nsSelect.append(h("option", { value: name, "data-unlisted": "1" }, name));
  }
  nsSelect.value = name;
}

function useOverview(overview) {
  state.overview = overview;
  state.namespace = state.overview.namespace;
  state.defaultNamespace = state.overview.default_namespace;
  const names = [...new Set([state.overview.default_namespace, ...state.overview.namespaces, state.namespace])];
  clear(nsSelect, names.map((n) => h("option", { value: n, selected: n === state.namespace }, n)));
  nsSelect.disabled = !state.overview.switch_namespaces && names.length <= 1;
  document.getElementById("role").textContent = state.overview.role === "client"
    ? "through the duckgraph server that holds the file" : "";
}

// -- browse ----------------------------------------------------------------------------------------------

function showBrowse() {
  document.title = "duckgraph";
  const o = state.overview;
  const stats = o.stats;
  const counts = h("section", { class: "card counts", id: "counts" }, h("h2", {}, `Namespace ${o.namespace}`),
    h("dl", {}, [["entities", stats.nodes], ["relations", stats.edges], ["documents", stats.documents],
      ["passages", stats.chunks]].map(([label, value]) => [h("dt", {}, label), h("dd", {}, value.toLocaleString())])));
  const types = (title, entries, link) => h("section", { class: "card" }, h("h2", {}, title),
    entries.length ? h("ul", { class: "counted" }, entries.map(([type, count]) => h("li", {},
      link ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); go("/search", { q: type }); } }, typeBadge(type))
        : h("code", { dir: "auto" }, type), h("span", { class: "count" }, count.toLocaleString()))))
      : h("p", { class: "muted" }, "none yet"));
  const connected = h("section", { class: "card", id: "most-connected" }, h("h2", {}, "Most connected"),
    o.most_connected.length ? h("ol", {}, o.most_connected.map((e) => h("li", {}, entityLink(e.name), " ",
      typeBadge(e.type), h("span", { class: "count" }, `${e.relations} relation${e.relations === 1 ? "" : "s"}`)))) : h("p", { class: "muted" }, "no relations yet"));
  const spaces = h("section", { class: "card double", id: "namespaces" }, h("h2", {}, "Namespaces"));
  const changes = h("section", { class: "card wide", id: "recent-changes" }, h("h2", {}, "Recent changes"));
  const communities = h("section", { class: "card wide", id: "communities" }, h("h2", {}, "Communities"));
  clear(view, h("div", { class: "browse" }, counts,
    types("Entity types", Object.entries(stats.node_types), true),
    types("Relation types", Object.entries(stats.edge_types), false), connected, spaces, changes, communities));
  showNamespaces(spaces);
  optional(changes, "recent_changes", { limit: CHANGES }, changesTable);
  showCommunities(communities);
}

const CHANGES = 30;  // recent changes listed at a time

// A view of a tool that other versions may lack: drawn by `draw`, or "not available".
async function optional(section, tool, args, draw) {
  if (!available(tool)) {
    section.append(h("p", { class: "muted not-available" }, "Not available on this duckgraph server."));
    return null;
  }
  const body = h("div", { class: "tool-view" }, h("p", { class: "muted" }, "Loading…"));
  section.append(body);
  try {
    clear(body, draw(await callTool(tool, args)));
  } catch (error) {
    clear(body, h("p", { class: "error" }, errorText(error)));
  }
  return body;
}

// Newest first, 30 at a time; "More changes" appends the next ones. The tool pages by position, so changes written
// meanwhile move those listed further down: a change read again is not listed twice.
function changesTable(result) {
  if (!result.changes.length) return h("p", { class: "muted" }, "No changes recorded.");
  const table = h("table", { class: "changes" });
  const listed = new Set();
  const more = h("button", { type: "button", id: "more-changes" }, "More changes");
  const show = (page) => {
    const fresh = page.changes.filter((c) => !listed.has(JSON.stringify(c)));
    for (const c of fresh) listed.add(JSON.stringify(c));
    append(table, fresh.map((c) => h("tr", {},
      h("td", { class: "muted when" }, String(c.at).replace("T", " ").slice(0, 19)), h("td", {}, c.change),
      h("td", {}, subject(c)))));
    more.hidden = page.next_offset == null;
    more.onclick = () => act(() => callTool("recent_changes", { limit: CHANGES, offset: page.next_offset }), show);
  };
  show(result);
  return [table, more];
}

// An entity's change names it as "Name [Type]": linked to its page.
function subject(change) {
  const entity = change.change.startsWith("entity") && /^(.*) \[([^\]]+)\]$/.exec(change.subject);
  return entity ? [entityLink(entity[1]), " ", typeBadge(entity[2])] : change.subject;
}

async function showNamespaces(section) {
  const pick = (n) => n === state.namespace ? h("strong", {}, n)
    : state.overview.switch_namespaces ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); switchNamespace(n); } }, n)
      : h("span", { title: "this server's tools take no namespace" }, n);
  if (!available("list_namespaces")) {
    section.append(h("ul", {}, state.overview.namespaces.map((n) => h("li", {}, pick(n)))),
      h("p", { class: "muted" }, "Switching namespaces is not available on this server."));
    return;
  }
  await optional(section, "list_namespaces", {}, (r) => h("table", { class: "namespaces" },
    h("tr", {}, ["", "entities", "relations", "documents", "last write"].map((t) => h("th", {}, t))),
    r.namespaces.map((n) => h("tr", {}, h("td", {}, pick(n.name), n.default ? h("span", { class: "muted" }, " (default)") : null),
      h("td", {}, n.entities.toLocaleString()), h("td", {}, n.relations.toLocaleString()),
      h("td", {}, n.documents.toLocaleString()), h("td", { class: "muted" }, (n.last_write || "").slice(0, 16).replace("T", " "))))));
}

// The communities of a level, largest first, each opening its page; a question to global_search; a build.
async function showCommunities(section, level = 0) {
  const body = h("div", { class: "tool-view" }, h("p", { class: "muted" }, "Loading…"));
  const results = h("div", { class: "tool-view", id: "community-answers" });
  const build = available("build_communities") ? h("button", { type: "button", id: "build-communities", onclick: () =>
    act(() => callTool("build_communities", {}), (r) => { notify(`Built ${r.communities} communities.`); load(0); }) },
  "Build now") : null;
  const input = h("input", { id: "community-query", placeholder: "a question about the whole memory",
    "aria-label": "question about the whole memory" });
  const question = available("global_search") ? h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    clear(results, h("p", { class: "muted" }, "Loading…"));
    try {
      clear(results, reports(await callTool("global_search", { query: input.value, token_budget: 4000 })));
    } catch (error) {
      clear(results, h("p", { class: "error" }, errorText(error)));
    }
  } }, input, h("button", {}, "Ask the communities")) : null;
  section.append(h("div", { class: "inline" }, question, build), results, body);
  async function load(chosen) {
    try {
      clear(body, communityList(await api("communities", { level: chosen }), load));
    } catch (error) {
      clear(body, h("p", { class: "error" }, errorText(error)));
    }
  }
  await load(level);
}

function communityList(listed, load) {
  if (!listed.levels.length) {
    return h("p", { class: "muted" }, "No communities are built for this namespace yet" +
      (available("build_communities") ? ": Build now groups its entities." : "."));
  }
  const f = listed.freshness;
  const levels = h("select", { id: "community-level", "aria-label": "level", onchange: (e) => load(Number(e.target.value)) },
    listed.levels.map((l) => h("option", { value: l, selected: l === listed.level }, l === 0 ? "level 0 (coarsest)" : `level ${l}`)));
  return [h("p", { class: "muted" }, levels, ` ${listed.total} communit${listed.total === 1 ? "y" : "ies"}`,
    f ? ` · built ${f.built_at.slice(0, 16).replace("T", " ")} · ${Math.round(f.changed_share * 100)}% changed since` +
      (f.stale ? " · stale" : "") + (f.rebuilding ? " · rebuilding" : "") : ""),
  reports({ reports: listed.communities }),
  listed.total > listed.communities.length ? h("p", { class: "muted" }, "The largest are listed.") : null];
}

function reports(result) {
  const hint = result.hint ? h("p", { class: "muted" }, result.hint) : null;
  if (!result.reports.length) return [hint || h("p", { class: "muted" }, "No community reports yet.")];
  return [hint, result.reports.map((r) => h("article", { class: "report", "data-community": r.id },
    h("h3", {}, h("a", { href: "#", class: "community-link", dir: "auto", onclick: (e) => { e.preventDefault(); go("/community", { id: r.id }); } }, r.title),
      h("span", { class: "count" }, `level ${r.level} · ${r.size} entities · ${r.author}${r.stale ? " · stale" : ""}`)),
    h("p", { dir: "auto" }, r.summary),
    h("p", {}, r.key_entities.map((e, i) => [i ? ", " : "", entityLink(e.name)]))))];
}

// -- a community's page --------------------------------------------------------------------------------

async function showCommunity(id, live) {
  const { report, nodes, edges, truncated } = await api("community", { id });
  if (!live()) return;
  document.title = `${visible(report.title)} — duckgraph`;
  const canvas = h("div", { class: "graph small", id: "community-graph" });
  clear(view, h("div", { class: "community", "data-community": report.id },
    h("p", {}, h("a", { href: "#/" }, "← communities")),
    h("h1", { dir: "auto" }, report.title),
    h("p", { class: "muted" }, `level ${report.level} · ${report.size} entities · report by ${report.author}` +
      (report.stale ? " · stale: written before its community last changed" : "")),
    h("p", { class: "description", dir: "auto" }, report.summary),
    h("div", { class: "columns" },
      h("section", { id: "key-entities" }, h("h2", {}, `Key entities (${report.key_entities.length})`),
        h("ul", {}, report.key_entities.map((e) => h("li", {}, entityLink(e.name), " ", typeBadge(e.type))))),
      h("div", {}, h("h2", {}, `Its entities and relations${truncated ? ` (${nodes.length} of ${report.size})` : ""}`),
        canvas))));
  state.drawing = drawGraph(canvas, { nodes, edges }, { onOpen: (n) => go("/entity", { name: n }) });
}

// A new address, so a history entry: Back returns to the namespace and view left.
function switchNamespace(name) {
  go("/", {}, name);
}

function entityLink(name) {
  return h("a", { href: `#/entity?${new URLSearchParams(nsParams({ name }))}`, class: "entity-link", dir: "auto" }, name);
}

// The address of a document's page, read around the passage `chunk` (a chunk_id), or from its start.
function documentHref(id, chunk = null) {
  return `#/document?${new URLSearchParams(nsParams(chunk === null ? { id } : { id, chunk }))}`;
}

function nsParams(params) {
  return state.namespace && state.namespace !== state.defaultNamespace ? { ...params, ns: state.namespace } : params;
}

// -- search ----------------------------------------------------------------------------------------------

const TIME_FIELDS = { as_of: "as-of", after: "after", before: "before" };

// The search form's values as the address holds them (only those given).
function searchParams(query) {
  const params = { q: query };
  for (const [key, id] of Object.entries(TIME_FIELDS)) {
    const value = document.getElementById(id).value.trim();
    if (value) params[key] = value;
  }
  if (document.getElementById("history").checked) params.history = "1";
  return params;
}

async function showSearch(params, live) {
  const query = params.get("q") || "";
  document.getElementById("q").value = query;
  for (const [key, id] of Object.entries(TIME_FIELDS)) document.getElementById(id).value = params.get(key) || "";
  document.getElementById("history").checked = params.get("history") === "1";
  document.title = `${visible(query)} — duckgraph`;
  if (!query.trim()) { showBrowse(); return; }
  clear(view, h("p", { class: "muted" }, "Searching…"));
  const asked = { q: query, max_nodes: document.getElementById("max-nodes").value };
  for (const key of Object.keys(TIME_FIELDS)) if (params.get(key)) asked[key] = params.get(key);
  if (params.get("history") === "1") asked.include_history = "true";
  const result = await api("search", asked);
  if (!live()) return;
  const moment = asked.as_of || null;
  const anchors = new Set(result.anchors.map((a) => a.name));
  const byName = new Map();
  for (const n of [...result.anchors, ...result.nodes]) if (!byName.has(n.name)) byName.set(n.name, n);
  const edges = result.edges.map((e) => {
    const future = planned(e, moment);
    return { ...e, ended: ended(e, moment), planned: future, period: periodText(e, future) };
  });
  const graph = { nodes: [...byName.values()].map((n) => ({ name: n.name, type: n.type, anchor: anchors.has(n.name) })),
    edges };
  const canvas = h("div", { class: "graph", id: "search-graph" });
  const endedCount = edges.filter((e) => e.ended).length;
  const plannedCount = edges.filter((e) => e.planned).length;
  const facts = h("section", { class: "facts", id: "facts" },
    h("h2", {}, `Facts (${edges.length}${endedCount ? `, ${endedCount} ended` : ""}` +
      `${plannedCount ? `, ${plannedCount} planned` : ""})`),
    h("ol", {}, edges.map((e) => h("li", { class: e.ended ? "fact ended" : e.planned ? "fact planned" : "fact" },
      entityLink(e.source), " —", h("bdi", {}, e.type), "→ ", entityLink(e.target),
      e.description ? [" ", h("span", { class: "muted description", dir: "auto" }, e.description)] : null,
      period(e, e.planned), timeTag(e.ended, e.planned)))));
  const passages = h("section", { class: "passages", id: "passages" }, h("h2", {}, `Passages (${result.passages.length})`),
    result.passages.length ? result.passages.map((p) => passage(p))
      : h("p", { class: "muted" }, "No passage."));
  const when = [asked.as_of ? `as of ${asked.as_of}` : null, asked.after ? `after ${asked.after}` : null,
    asked.before ? `before ${asked.before}` : null, asked.include_history ? "including those that ended" : null].filter(Boolean);
  clear(view, when.length ? h("p", { class: "muted", id: "search-time" }, `Facts ${when.join(", ")}.`) : null,
    // What the tool says to help (a namespace that holds nothing: likely a misspelt one).
    result.hint ? h("p", { class: "notice-inline", id: "search-hint" }, result.hint) : null,
    result.nothing_relevant ? h("p", { class: "notice-inline" }, "Nothing stored is relevant enough to this query.") : null,
    h("div", { class: "search" }, h("div", { class: "left" }, canvas, facts), passages));
  state.drawing = drawGraph(canvas, graph, { onOpen: (name) => go("/entity", { name }) });
}

// An ISO date or date-time as milliseconds; one without a zone is UTC, as the server reads it (results say "Z").
function instant(text) {
  const moment = String(text).length === 10 ? `${text}T00:00:00` : String(text);
  return Date.parse(/(Z|[+-]\d\d:?\d\d)$/i.test(moment) ? moment : `${moment}Z`);
}

// A fact that stopped holding by `moment` (an ISO date or date-time; null: now).
function ended(edge, moment) {
  if (!edge.valid_until) return false;
  return instant(edge.valid_until) <= (moment ? instant(moment) : Date.now());
}

// A fact that has not begun by `moment` (null: now): planned, "Carol leads Payments from 2030-03-01". A fact
// holds from its valid_from on, so one that starts exactly then has begun.
function planned(edge, moment) {
  if (!edge.valid_from) return false;
  return instant(edge.valid_from) > (moment ? instant(moment) : Date.now());
}

function passage(p) {
  return h("article", { class: "passage", "data-document": p.document_id },
    h("header", {}, h("strong", { dir: "auto" }, p.title || p.document_id),
      p.score !== undefined ? h("span", { class: "count" }, `score ${p.score}`) : null,
      h("a", { href: documentHref(p.document_id, p.chunk_id), class: "read-document",
        "aria-label": `Read the document ${p.document_id} at this passage` }, "Read the document"),
      available("delete_documents") ? h("button", { type: "button", class: "danger delete-document",
        "aria-label": `Delete document ${p.document_id}`,
        title: "Delete the document this passage comes from, with all its passages", onclick: () => deleteDocument(p) },
      "Delete document") : null),
    h("p", { dir: "auto" }, marked(p.text, p.marks)));
}

// "since" says a fact holds already: one that has not begun holds "from" its start.
function periodText(edge, future = false) {
  const from = edge.valid_from, until = edge.valid_until;
  if (!from && !until) return "";
  const day = (t) => String(t).slice(0, 10);
  return until ? `${from ? day(from) : "…"} to ${day(until)}` : `${future ? "from" : "since"} ${day(from)}`;
}

function period(edge, future = false) {
  const text = periodText(edge, future);
  return text ? h("span", { class: "period" }, ` ${text}`) : null;
}

// The mark of a fact that does not hold at the moment shown: it ended, or it has not begun (planned).
function timeTag(isEnded, isPlanned) {
  if (isEnded) return h("span", { class: "ended-tag" }, "ended");
  return isPlanned ? h("span", { class: "planned-tag", title: "this fact has not begun yet" }, "planned") : null;
}

// -- a document's page ----------------------------------------------------------------------------------

// Passages asked for around the one opened, and at each step back or on; an answer holds at most 4,000 tokens
// (read_document's bound), so a document of long passages comes fewer at a time.
const AROUND = { before: 2, after: 6 };
const STEP = 8;

// A document read in order (read_document, through /api/read): its passages around the one opened (`opened`, a
// passage's chunk_id as the address holds it, from a search or an entity's page; null: from its start), each with
// its place ("passage 12 of 101") and, where it changes, its section as a heading; the one opened marked, and
// focused. Each passage after another is shown without what it repeats of it (read_document's `repeats`). Earlier
// and Later passages add the passages before and after those shown in place, the focus on the first added; at the
// document's first or last passage, a link to the document its text goes on from (opened at its last passage) or in
// (a conversation's turn, a file's part).
async function showDocument(id, opened, live) {
  const read = await api("read", { id, ...(opened === null ? {} : { chunk_id: opened }), ...AROUND });
  if (!live()) return;
  const documentId = read.document_id;  // as stored
  document.title = `${visible(read.title || documentId)} — duckgraph`;
  const passages = [...read.passages];  // those shown, in document order
  let first = read, last = read;  // the answers that read the first and the last of them: how to read back and on
  let total = read.passages_total;
  const title = h("h1", { dir: "auto", id: "document-title" }, read.title || documentId);
  const about = h("p", { class: "muted", id: "document-about" });
  const from = h("p", { class: "muted", id: "document-before" });
  const to = h("p", { class: "muted", id: "document-after" });
  const list = h("div", { class: "document-passages" });
  const back = h("button", { type: "button", id: "read-back" });
  const on = h("button", { type: "button", id: "read-on" });
  const draw = () => {
    const [low, high] = passages.length ? [passages[0].position, passages.at(-1).position] : [1, total];
    const shown = low === 1 && high === total ? "" : low === high ? ` · shown: passage ${low}`
      : ` · shown: passages ${low} to ${high}`;
    clear(about, isolated(documentId), read.time ? ` · ${String(read.time).slice(0, 10)}` : "",
      ` · ${plural(total, "passage")}${shown}`);
    let section = null;
    clear(list, passages.length ? passages.map((p) => {
      const heading = p.section !== section && p.section ? h("h2", { class: "section", dir: "auto" }, p.section) : null;
      section = p.section;
      return [heading, documentPassage(documentId, p, total, String(p.chunk_id) === opened)];
    }) : h("p", { class: "muted" }, "It holds no passages."));
    const before = passages.length ? passages[0].position - 1 : 0;
    back.hidden = first.previous_chunk_id == null;
    clear(back, `Earlier passages (${before === 1 ? "passage 1" : `1 to ${before}`})`);
    const after = passages.length ? passages.at(-1).position + 1 : total;
    on.hidden = last.next_chunk_id == null;
    clear(on, `Later passages (${after === total ? `passage ${total}` : `${after} to ${total}`})`);
    clear(from, back.hidden && first.previous_document
      ? ["Its text goes on from the document ",
        documentLink(first.previous_document, first.previous_document_chunk_id), "."] : null);
    clear(to, on.hidden && last.next_document
      ? ["Its text goes on in the document ", documentLink(last.next_document), "."] : null);
  };
  // One step back or on: the passages read are added in place (one shown already, after an edit, is not shown
  // twice), and the focus moves to the first added. Each step reads from the passage shown at that end, so that
  // the answer shows the passage after the seam without what it repeats of the one before it.
  const step = async (button, args, done) => {
    button.disabled = true;
    try {
      await act(() => api("read", { id: documentId, ...args }), (more) => {
        const known = new Set(passages.map((p) => p.chunk_id));
        const added = more.passages.filter((p) => !known.has(p.chunk_id));
        done(more, added);
        total = more.passages_total;
        draw();
        if (added.length) list.querySelector(`[data-chunk="${added[0].chunk_id}"]`)?.focus();
      });
    } finally {
      button.disabled = false;
    }
  };
  back.onclick = () => step(back, { chunk_id: passages[0].chunk_id, before: STEP, after: 0 }, (more, added) => {
    // The passage first until now follows the ones added: as this answer shows it, without what it repeats.
    const seam = more.passages.find((p) => p.chunk_id === passages[0].chunk_id);
    if (seam) passages[0] = seam;
    passages.unshift(...added);
    first = more;
  });
  on.onclick = () => step(on, { chunk_id: passages.at(-1).chunk_id, before: 0, after: STEP }, (more, added) => {
    passages.push(...added);
    last = more;
  });
  draw();
  clear(view, h("article", { class: "document", "data-document": documentId, "aria-labelledby": "document-title" },
    title, about, from, back, h("section", { "aria-label": "passages" }, list), on, to));
  // Opened from a passage: that passage, in view.
  const target = opened === null ? null : list.querySelector(".passage.opened");
  if (target) {
    target.focus({ preventScroll: true });
    target.scrollIntoView({ block: "center" });
  }
}

// A link to the document `id`, opened at its passage `chunk` (a chunk_id), or from its start.
function documentLink(id, chunk = null) {
  return h("a", { href: documentHref(id, chunk), class: "document-link", dir: "auto" }, id);
}

// A passage of a document's page: its place, its id as search shows it ([document_id#chunk_id]), its text; the one
// opened marked as such (also for a screen reader). Focusable, for the focus to move to it.
function documentPassage(documentId, p, total, opened) {
  return h("article", { class: opened ? "passage opened" : "passage", "data-chunk": p.chunk_id, tabindex: "-1",
    "aria-current": opened ? "true" : null },
  h("header", {}, h("strong", {}, `passage ${p.position} of ${total}`), " ",
    h("code", { class: "muted", dir: "auto" }, `[${documentId}#${p.chunk_id}]`),
    opened ? h("span", { class: "opened-tag" }, "the passage opened") : null),
  h("p", { dir: "auto" }, p.text));
}

// -- an entity's page ------------------------------------------------------------------------------------

async function showEntity(name, live) {
  const { entity, passages, graph } = await api("entity", { name });
  if (!live()) return;
  document.title = `${visible(entity.name)} — duckgraph`;
  const canvas = h("div", { class: "graph small", id: "entity-graph" });
  const actions = h("div", { class: "actions" },
    h("button", { type: "button", id: "rename", onclick: () => rename(entity) }, "Rename"),
    h("button", { type: "button", id: "edit", onclick: () => edit(entity) }, "Edit"),
    h("button", { type: "button", id: "merge", onclick: () => merge(entity) }, "Merge duplicates into this"),
    h("button", { type: "button", id: "delete", class: "danger", onclick: () => remove(entity) }, "Delete"));
  const properties = Object.entries(entity.properties || {});
  clear(view, h("div", { class: "entity", "data-entity": entity.name },
    h("div", { class: "entity-head" }, h("h1", { dir: "auto" }, entity.name), typeBadge(entity.type), actions),
    entity.description ? h("p", { class: "description", dir: "auto" }, entity.description) : null,
    entity.aliases.length ? h("p", { class: "aliases" }, h("span", { class: "muted" }, "also known as "),
      entity.aliases.map((a, i) => [i ? ", " : "", h("span", { class: "alias", dir: "auto" }, a)])) : null,
    properties.length ? h("table", { class: "properties" }, properties.map(([k, v]) =>
      h("tr", {}, h("th", { dir: "auto" }, k), h("td", { dir: "auto" }, typeof v === "string" ? v : JSON.stringify(v))))) : null,
    h("div", { class: "columns" },
      h("div", {},
        h("section", {}, h("h2", {}, `Observations (${entity.observations.length})`),
          entity.observations.length ? h("ul", { class: "observations" }, entity.observations.map((o) => h("li", { dir: "auto" }, o)))
            : h("p", { class: "muted" }, "none")),
        relationsSection(entity),
        passagesSection(entity, passages)),
      h("div", {}, h("h2", {}, "Neighbours"), canvas))));
  state.drawing = drawGraph(canvas, graph, { center: graph.center, onOpen: (n) => n !== entity.name && go("/entity", { name: n }) });
}

// The passages that mention it, 10 at a time; "More passages" appends the next ones.
function passagesSection(entity, first) {
  const heading = h("h2", {});
  const list = h("div", {});
  const more = h("button", { type: "button", id: "more-passages" }, "More passages");
  const show = (page) => {
    append(list, page.passages.map((p) => passage(p)));
    more.hidden = page.next_offset == null;
    clear(heading, `Passages that mention it (${list.children.length}${more.hidden ? "" : "+"})`);
    more.onclick = () => act(() => api("passages", { name: entity.name, offset: page.next_offset }), show);
  };
  show(first);
  return h("section", { id: "entity-passages" }, heading,
    first.passages.length ? [list, more] : h("p", { class: "muted" }, "none"));
}

// delete_relations and end_relations name a relation by its ends and type and act on the periods of it that have
// not ended (the one that holds now, and those that have not begun): a row offers Delete and End only when it is
// the one such period of its relation listed, so that the tool acts on exactly that row. An ended row is history.
function actsOnRow(relation, listed) {
  return !ended(relation) && listed.filter((r) => sameRelation(r, relation) && !ended(r)).length === 1;
}

// The tool lists 50 relations at a time, strongest first; "More relations" appends the next ones. A Delete or an
// End changes its row in place (removed, or ended) rather than drawing the page again, which would list the first
// 50 only and lose the place of a row found after several "More relations".
function relationsSection(entity) {
  const heading = h("h2", { tabindex: "-1" });
  const table = h("table", { class: "relations" });
  const more = h("button", { type: "button", id: "more-relations" }, "More relations");
  const listed = [];  // every relation shown so far, for actsOnRow
  const rows = new Map();  // each of them -> its row
  const count = () => clear(heading, `Relations (${table.rows.length}${more.hidden ? "" : "+"})`);
  const row = (r) => {
    const drawn = relationRow(entity, r, listed, changed);
    rows.set(r, drawn);
    return drawn;
  };
  // `r` deleted (`now` null) or ended (`now`: it with its end): its row goes or is drawn again, and so are the other
  // rows of its relation (one of them may now be the one period the tools act on); the focus goes to the nearest
  // row's first button.
  function changed(r, now) {
    const at = [...table.rows].indexOf(rows.get(r));
    listed.splice(listed.indexOf(r), 1, ...(now ? [now] : []));
    if (now) rows.get(r).replaceWith(row(now));
    else rows.get(r).remove();
    rows.delete(r);
    for (const other of listed.filter((o) => sameRelation(o, r) && o !== now)) rows.get(other).replaceWith(row(other));
    count();
    const near = [...table.rows].slice(at).concat([...table.rows].slice(0, at).reverse());
    (near.map((tr) => tr.querySelector("button")).find(Boolean) || heading).focus();
  }
  const show = (relations, next) => {
    listed.push(...relations);
    append(table, relations.map(row));
    more.hidden = next == null;
    count();
    more.onclick = () => act(() => callTool("get_entities", { names: [entity.name], relations_offset: next }),
      (result) => { const found = result.entities[0]; if (found) show(found.relations, found.next_relations_offset); });
  };
  show(entity.relations, entity.next_relations_offset);
  return h("section", { id: "relations" }, heading, entity.relations.length ? [table, more] : h("p", { class: "muted" }, "none"));
}

function sameRelation(a, b) {
  return a.source === b.source && a.target === b.target && a.type === b.type;
}

function relationRow(entity, r, listed, changed) {
  const canEnd = available("end_relations"), acts = actsOnRow(r, listed), future = planned(r);
  const what = `${r.source} ${r.type} ${r.target}`;  // what the buttons act on, for a screen reader
  return h("tr", { class: ended(r) ? "relation ended" : future ? "relation planned" : "relation" },
    h("td", {}, r.source === entity.name ? h("strong", { dir: "auto" }, r.source) : entityLink(r.source)),
    h("td", {}, h("code", { dir: "auto" }, r.type)),
    h("td", {}, r.target === entity.name ? h("strong", { dir: "auto" }, r.target) : entityLink(r.target)),
    h("td", { class: "muted" }, r.description ? h("bdi", {}, r.description) : null, period(r, future),
      timeTag(false, future)),
    h("td", { class: "row-actions" },
      canEnd && acts ? h("button", { type: "button", class: "end-relation", "aria-label": `End relation ${what}`,
        onclick: () => endRelation(entity, r, changed) }, "End") : null,
      acts ? h("button", { type: "button", class: "danger delete-relation", "aria-label": `Delete relation ${what}`,
        onclick: () => deleteRelation(entity, r, changed) }, "Delete")
        : h("span", { class: "muted no-delete", title: "Only a relation that holds now or has not begun can be " +
          "deleted or ended, and only when it is its relation's one such period: the tools name a relation by its " +
          "ends and type, not by its period." }, ended(r) ? "history" : "several periods")));
}

// -- curation: each through its MCP tool, then the page again ----------------------------------------------

async function act(work, done) {
  try {
    const result = await work();
    await done(result);
  } catch (error) {
    notify(errorText(error), true);
  }
}

async function rename(entity) {
  const newName = await ask("Rename", ["New name for ", isolated(entity.name), " (the old one stays an alias):"], entity.name);
  if (!newName || newName === entity.name) return;
  act(() => callTool("update_entity", { name: entity.name, new_name: newName }), (r) => {
    notify(["Renamed ", isolated(entity.name), " to ", isolated(r.name), "."]);
    state.overview = null;
    go("/entity", { name: r.name });
  });
}

// Edit: the dialog shows the entity as stored when it opens, not as the page was drawn (another client may have
// written to it since), and the save sends only the fields changed in it, with the fingerprint of what the dialog
// showed: update_entity refuses it, in the same step as its write, if the entity changed meanwhile, since its
// aliases and properties are sent whole and would replace what was written (an agent's alias, an observation it
// removed). The dialog then stays open with what was typed and says what changed (curate.js).
async function edit(entity) {
  let fields;
  try {
    fields = await entityFields(entity.name);
  } catch (error) {
    notify(errorText(error), true);
    return;
  }
  if (!fields) {
    notify(["Nothing to edit: there is no entity ", isolated(entity.name),
      " any more (deleted or renamed meanwhile)."], true);
    render();
    return;
  }
  let reread = false;  // read again after a refused save: the page is drawn again once the dialog closes
  const saved = await editEntity(fields,
    (changes, base) => callTool("update_entity",
      { name: base.name, ...changes, expected_fingerprint: base.fingerprint }),
    (name) => { reread = true; return entityFields(name); });
  if (!saved) {
    // Left unsaved, the focus goes back to Edit, on the page drawn again if it was.
    if (reread) await render();
    document.getElementById("edit")?.focus();
    return;
  }
  notify(["Saved ", isolated(saved.name), "."]);
  state.overview = null;
  go("/entity", { name: saved.name });
}

// The fields of an entity the Edit dialog shows, as stored now, with their fingerprint (null: no such entity).
async function entityFields(name) {
  try {
    return await api("fields", { name });
  } catch (error) {
    if (error.status === 404) return null;
    throw error;
  }
}

async function merge(entity) {
  const text = await ask("Merge duplicates", ["Names of the entities to merge into ", isolated(entity.name),
    ", one per line. Their relations, observations and properties move to it and their names become its aliases."],
  "", true);
  const typed = (text || "").split("\n").map((s) => s.trim()).filter(Boolean);
  if (!typed.length) return;
  let preview;
  try {
    preview = await api("merge", { target: entity.name, source: typed });
  } catch (error) {
    notify(errorText(error), true);  // names of no entity: refused as merge_entities would refuse them
    return;
  }
  // The entities as the preview resolved them, each once: an alias names its entity, the target's own names go.
  const sources = preview.sources.map((s) => s.name);
  if (!await confirmAction("Merge", ["Merge ", isolatedList(sources), " into ", isolated(preview.target),
    "? This cannot be undone."], mergeDetails(preview))) return;
  act(() => callTool("merge_entities", { sources, target: preview.target }), (r) => {
    notify(["Merged ", isolatedList(r.merged), " into ", isolated(r.target), "."]);
    state.overview = null;
    go("/entity", { name: r.target });
  });
}

// What a merge brings along (the API's /api/merge), said before it is confirmed: per source, its names that become
// aliases, the observations, properties, relations and passages it adds (those the merged entity will have already
// are not counted: a relation that repeats one is joined into it, said apart); then each property whose values
// differ, with the value kept and the one that becomes an observation.
function mergeDetails(preview) {
  const brings = (s) => {
    const notes = [
      s.relations_folded ? [`${plural(s.relations_folded, "more repeats a relation", "more repeat relations")} `,
        isolated(preview.target), ` will have and ${s.relations_folded === 1 ? "is" : "are"} joined into ` +
        `${s.relations_folded === 1 ? "it" : "them"}`] : null,
      s.relations_between ? [`${plural(s.relations_between, "relation")} between the entities merged ` +
        `${s.relations_between === 1 ? "goes" : "go"}: ${s.relations_between === 1 ? "it" : "they"} would join `,
      isolated(preview.target), " to itself"] : null,
    ].filter(Boolean);
    return h("li", { "data-source": s.name }, isolated(s.name), " brings ",
      s.aliases.length ? [plural(s.aliases.length, "alias", "aliases"), " (", isolatedList(s.aliases), "), "]
        : "no new alias, ",
      `${plural(s.observations, "observation")}, ${plural(s.properties, "property", "properties")}, ` +
      `${plural(s.relations, "relation")}`,
      notes.length ? [" (", notes.map((note, i) => [i ? "; " : "", note]), ")"] : null,
      ` and ${plural(s.passages, "passage")}.`);
  };
  const value = (v) => typeof v === "string" ? isolated(v) : JSON.stringify(v);
  return [h("ul", { id: "merge-brings" }, preview.sources.map(brings)),
    preview.conflicts.length ? [h("p", {}, "Properties whose values differ:"), h("ul", { id: "merge-conflicts" },
      preview.conflicts.map((c) => h("li", { "data-property": c.property }, h("bdi", {}, c.property), ": ",
        isolated(c.kept_from), "'s ", value(c.kept), " is kept; ", isolated(c.source), "'s ", value(c.value),
        " becomes an observation.")))] : null];
}

async function remove(entity) {
  if (!await confirmAction("Delete", ["Delete ", isolated(entity.name),
    ` and its ${plural(entity.relations.length, "relation")}? This cannot be undone.`])) return;
  act(() => callTool("delete_entities", { names: [entity.name] }), (r) => {
    // What the tool did, not what was asked: another client may have deleted or renamed it meanwhile.
    if (r.deleted.length) notify(["Deleted ", isolatedList(r.deleted), ` and ${plural(r.edges_deleted, "relation")}.`]);
    else notify(["Nothing was deleted: there is no entity ", isolated(entity.name),
      " any more (deleted or renamed meanwhile)."], true);
    state.overview = null;
    go("/", {});
  });
}

// A relation in a sentence: its ends and type each isolated, so "דוד —עובד_עם→ שרה" keeps its order.
function relationLabel(r) {
  return [isolated(r.source), " —", isolated(r.type), "→ ", isolated(r.target)];
}

// `changed(r, now)`: the row changed in place (relationsSection). When the tool found nothing to act on (another
// client ended, changed or deleted it meanwhile), the page is drawn again: the row no longer says what is stored.
async function deleteRelation(entity, r, changed) {
  if (!await confirmAction("Delete relation", ["Delete ", relationLabel(r), "? This cannot be undone.",
    available("end_relations") ? " If it was true and stopped being so, End it instead: it stays as history." : ""])) return;
  act(() => callTool("delete_relations", { relations: [{ source: r.source, target: r.target, type: r.type }] }), (result) => {
    state.overview = null;
    if (result.deleted.length) {
      notify(["Deleted ", relationLabel(r), "."]);
      changed(r, null);
    } else {
      notify(["Nothing was deleted: ", relationLabel(r), " does not hold now (ended, changed or deleted meanwhile)."], true);
      go("/entity", { name: entity.name });
    }
  });
}

async function endRelation(entity, r, changed) {
  const when = await ask("End relation", [relationLabel(r), " stops holding at (ISO date, empty: now):"], "");
  if (when === null) return;
  act(() => callTool("end_relations", { relations: [{ source: r.source, target: r.target, type: r.type,
    ...(when.trim() ? { ended_at: when.trim() } : {}) }] }), (result) => {
    if (result.ended.length) {
      notify(["Ended ", relationLabel(r), "."]);
      changed(r, { ...r, valid_from: result.ended[0].valid_from, valid_until: result.ended[0].valid_until });
    } else {
      notify(["Nothing was ended: ", relationLabel(r), " does not hold now (ended or deleted meanwhile)."], true);
      go("/entity", { name: entity.name });
    }
  });
}

// A document in a sentence: its title (isolated) and its id, or its id alone.
function documentLabel(title, id) {
  return title && title !== id ? [isolated(title), " (", isolated(id), ")"] : isolated(id);
}

// delete_documents on the whole document the passage comes from: a long file is stored in parts (`<id>`,
// `<id>#part-2`...) and the tool deletes them all given the first's id, only one given a later part's, so the page
// asks the API which document that is (its parts and passages, said in the question) and deletes it by that id.
// All its passages go, and the entities and relations that only it supported; then the same address again.
async function deleteDocument(p) {
  let whole;
  try {
    whole = await api("document", { id: p.document_id });
  } catch (error) {
    // Deleted meanwhile (another client): nothing to ask about.
    if (error.status === 404) gone(documentLabel(p.title, p.document_id));
    else notify(errorText(error), true);
    return;
  }
  const label = documentLabel(whole.title, whole.id);
  const parts = whole.parts.length;
  const what = parts > 1 ? `, a long file stored in ${parts} parts, with all their ${plural(whole.passages, "passage")}`
    : ` with ${whole.passages === 1 ? "its passage" : `all its ${plural(whole.passages, "passage")}`}`;
  if (!await confirmAction("Delete document", ["Delete the document ", label, what,
    ", and the entities and relations that only it supports? This cannot be undone."])) return;
  act(() => callTool("delete_documents", { ids: [whole.id] }), (r) => {
    // What the tool did, not what was asked: another client may have deleted it meanwhile. Its hints, for a
    // model that typed an id, are left out: the page sent the id exactly as stored.
    const later = r.deleted.length - 1;  // a long file's later parts go with it
    if (r.deleted.length) {
      notify(["Deleted the document ", label, later ? ` and its ${plural(later, "later part")}` : "",
        `, with ${plural(r.entities_removed, "entity", "entities")} and ${plural(r.relations_removed, "relation")} ` +
        "that only it supported."]);
      state.overview = null;  // the counts changed
      render();
    } else gone(label);
  });
}

function gone(label) {
  notify(["Nothing was deleted: there is no document ", label, " any more (deleted meanwhile)."], true);
  state.overview = null;
  render();
}

// -- the rest --------------------------------------------------------------------------------------------

function plural(count, one, many = `${one}s`) {
  return `${count.toLocaleString()} ${count === 1 ? one : many}`;
}

// `message`: a text, or parts (texts and nodes: the names in it isolated by `isolated`).
export function notify(message, error = false) {
  const box = document.getElementById("notice");
  clear(box, message);  // through append: bidirectional controls in a name shown as escapes
  box.className = error ? "error" : "";
  box.hidden = false;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => { box.hidden = true; }, error ? 12000 : 5000);
}

document.getElementById("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const q = document.getElementById("q").value.trim();
  if (q) go("/search", searchParams(q));
});
nsSelect.addEventListener("change", () => switchNamespace(nsSelect.value));
window.addEventListener("hashchange", render);
render();
