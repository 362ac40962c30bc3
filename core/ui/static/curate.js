// The dialogs of curation: a question with one answer, a confirmation, the edit form of an entity.

import { clear, errorText, h, isolated } from "./dom.js";

const dialog = document.getElementById("dialog");

// Show the dialog with `body`; resolve with `read()` on OK, null on Cancel or Escape. With `submit`, OK runs
// `submit(read())` while the dialog stays open: it closes once that resolves to anything but undefined, and
// resolves with it; undefined keeps it open, with what was typed (submit says why in it). Cancel and Escape wait
// while submit runs.
function open(title, body, okLabel, read, { danger = false, submit = null } = {}) {
  clear(document.getElementById("dialog-title"), title);
  clear(document.getElementById("dialog-body"), body);
  const form = document.getElementById("dialog-form");
  const ok = document.getElementById("dialog-ok");
  const cancel = document.getElementById("dialog-cancel");
  ok.textContent = okLabel;
  ok.className = danger ? "danger" : "primary";
  dialog.returnValue = "";
  const opener = document.activeElement;  // focused again when the dialog is left unanswered
  dialog.showModal();
  // A destructive OK is not the default: Enter or a stray key press on the dialog cancels instead.
  if (danger) cancel.focus();
  let result = null;
  let running = false;
  const submitted = async (event) => {
    if (!submit || event.submitter !== ok) return;
    event.preventDefault();  // the form would close the dialog
    running = ok.disabled = cancel.disabled = true;
    try {
      result = await submit(read());
    } finally {
      running = ok.disabled = cancel.disabled = false;
    }
    if (result !== undefined) dialog.close("ok");
  };
  const escaped = (event) => { if (running) event.preventDefault(); };
  form.addEventListener("submit", submitted);
  dialog.addEventListener("cancel", escaped);
  return new Promise((resolve, reject) => {
    dialog.addEventListener("close", () => {
      form.removeEventListener("submit", submitted);
      dialog.removeEventListener("cancel", escaped);
      if (dialog.returnValue !== "ok" && opener?.isConnected) opener.focus();
      try { resolve(dialog.returnValue !== "ok" ? null : submit ? result : read()); } catch (error) { reject(error); }
    }, { once: true });
  });
}

export function ask(title, question, value = "", multiline = false) {
  const input = multiline ? h("textarea", { id: "dialog-input", rows: 5 }, value)
    : h("input", { id: "dialog-input", value, autocomplete: "off" });
  const answer = open(title, [h("label", { for: "dialog-input" }, question), input], "OK", () => input.value);
  input.focus();
  return answer;
}

// `details`: what else to know before answering, below the question.
export async function confirmAction(label, question, details = null) {
  return (await open(`${label}?`, [h("p", {}, question), details], label, () => true, { danger: true })) === true;
}

// The Edit dialog of `entity` (its fields as stored when it opens, and their fingerprint: the API's /api/fields).
// Save sends the fields changed in it, as update_entity takes them, through `save(changes, base)`, and the dialog
// stays open until that is done. Each observation has a field of its own, since one may hold line breaks; only
// those whose text was changed are sent (removed, and added as now written), so an edit of another field leaves
// every observation exactly as stored. When the save is refused, nothing typed is lost: the dialog stays open and
// `reread(name)` reads the entity again (null: it is gone). One of another id is another entity (its name now names
// the one it was merged into): as for a deleted one, nothing can be saved, and what was typed stays to copy. If it
// changed meanwhile (another client wrote to it), the dialog says what changed and takes it as stored now for its
// base: a field left alone shows the stored value, type and description typed in keep what was typed, and the
// aliases, properties and observations show what is stored now with the additions and removals typed made to it
// (a property both changed keeps the typed value, said so), so Save applies the typed changes to the entity as it
// is now and loses none of the other client's. Resolves with save's result, or null (Cancel, or nothing changed).
export async function editEntity(entity, save, reread) {
  let base = entity;
  const field = (id, label, control) => h("div", { class: "field-row" }, h("label", { for: id }, label), control);
  const type = h("input", { id: "edit-type", value: base.type });
  const description = h("textarea", { id: "edit-description", rows: 3 }, base.description || "");
  const aliases = h("textarea", { id: "edit-aliases", rows: 3 }, base.aliases.join("\n"));
  const properties = h("textarea", { id: "edit-properties", rows: 4, "aria-describedby": "edit-properties-error" },
    propertiesText(base.properties));
  const propertiesError = h("p", { class: "error", id: "edit-properties-error", "aria-live": "polite" });
  const problem = h("div", { id: "edit-problem", role: "alert", tabindex: "-1" });
  const observation = (text) => h("textarea", { class: "edit-observation", rows: Math.min(6, text.split("\n").length + 1),
    "aria-label": "observation" }, text);
  const observations = h("div", { id: "edit-observations" }, base.observations.map(observation), observation(""));
  const another = h("button", { type: "button", id: "add-observation", onclick: () => {
    const added = observation("");
    observations.append(added);
    added.focus();
  } }, "Another observation");
  const body = [problem, field("edit-type", "Type", type), field("edit-description", "Description", description),
    field("edit-aliases", "Aliases, one per line", aliases), field("edit-properties", "Properties (JSON)", properties),
    propertiesError,
    h("fieldset", { class: "observations-field" }, h("legend", {}, "Observations, one per field (empty a field to remove it)"),
      observations, another)];
  // Invalid JSON keeps the dialog open (the form does not submit) with the reason beside the field.
  properties.addEventListener("input", () => {
    const reason = propertiesProblem(properties.value);
    properties.setCustomValidity(reason);
    clear(propertiesError, reason);
  });
  // A textarea's value has "\n" line breaks whatever the stored text has.
  const unchanged = (value, stored) => value === (stored || "").replace(/\r\n?/g, "\n");
  const lines = (el) => el.value.split("\n").map((s) => s.trim()).filter(Boolean);
  const readProperties = () => properties.value.trim() ? JSON.parse(properties.value) : {};
  const typed = {  // whether a field differs from the base
    type: () => type.value.trim() !== base.type,
    description: () => !unchanged(description.value, base.description),
    aliases: () => lines(aliases).join("\n") !== base.aliases.join("\n"),
    properties: () => propertiesProblem(properties.value) !== ""
      || JSON.stringify(readProperties()) !== JSON.stringify(base.properties || {}),
  };
  const observationFields = () => [...observations.querySelectorAll("textarea")].map((f) => f.value);
  const read = () => {
    const changes = {};
    if (typed.type()) changes.type = type.value.trim();
    if (typed.description()) changes.description = description.value.trim();
    if (typed.aliases()) changes.aliases = lines(aliases);
    if (typed.properties()) changes.properties = readProperties();
    const fields = observationFields();
    const stored = base.observations;
    const removed = stored.filter((text, i) => !unchanged(fields[i], text));
    const added = [...fields.slice(0, stored.length).filter((v, i) => !unchanged(v, stored[i])),
      ...fields.slice(stored.length)].map((v) => v.trim()).filter(Boolean);
    if (added.length) changes.add_observations = added;
    if (removed.length) changes.remove_observations = removed;
    return changes;
  };
  // The entity as stored `now` becomes the base; what was typed stays, the lists' additions and removals made to it.
  const rebase = (now) => {
    if (!typed.type()) type.value = now.type;
    if (!typed.description()) description.value = now.description || "";
    aliases.value = applied(lines(aliases), base.aliases, now.aliases).join("\n");
    properties.value = propertiesText(appliedProperties(readProperties(), base.properties || {}, now.properties || {}));
    const fields = observationFields();
    const edited = new Map(base.observations.map((text, i) => [text, fields[i]])
      .filter(([text, value]) => !unchanged(value, text)));
    // Typed into an observation removed meanwhile: kept, as one to add.
    const orphans = [...edited].filter(([text]) => !now.observations.includes(text)).map(([, value]) => value);
    const extra = [...orphans, ...fields.slice(base.observations.length)].filter((v) => v.trim());
    clear(observations, now.observations.map((text) => observation(edited.has(text) ? edited.get(text) : text)),
      extra.map(observation), observation(""));
    base = now;
  };
  let gone = null;  // why nothing can be saved: deleted, or merged into another entity, meanwhile
  const refused = (...said) => {
    clear(problem, ...said);
    problem.focus();  // a screen reader says why, and the dialog scrolls to it
    return undefined;
  };
  const goneText = (now) => h("p", { class: "error" }, "Not saved: ", now
    ? [isolated(base.name), " was merged into ", isolated(now.name), " meanwhile (its name now names that entity)"]
    : ["there is no entity ", isolated(base.name), " any more (deleted or renamed meanwhile)"],
  ". Nothing was saved; what you typed is still here to copy.");
  const submit = async (changes) => {
    if (gone) return refused(gone);
    if (!Object.keys(changes).length) return null;
    let refusal;
    try {
      return await save(changes, base);
    } catch (error) {
      refusal = error;
    }
    let now;
    try {
      now = await reread(base.name);
    } catch (error) {
      return refused(h("p", { class: "error" }, "Not saved: ", errorText(refusal)),
        h("p", { class: "error" }, errorText(error)));
    }
    // The entity's id, not its name: a name merged away names the entity it was merged into, which the typed
    // fields (its aliases, its properties) would replace.
    if (now === null || now.id !== base.id) {
      gone = goneText(now);
      return refused(gone);
    }
    if (now.fingerprint === base.fingerprint) {
      return refused(h("p", { class: "error" }, "Not saved: ", errorText(refusal)));
    }
    const was = base;
    const mine = Object.fromEntries(Object.entries(typed).map(([key, differs]) => [key, differs()]));
    const rows = differences(was, now, mine, readProperties());
    rebase(now);
    return refused(h("p", { class: "error" }, "Not saved: ", isolated(was.name),
      " changed meanwhile (another client wrote to it). Stored now:"), h("ul", { id: "edit-changes" }, rows),
    h("p", {}, "What you typed is kept, and the fields you left alone show what is stored now: Save applies your " +
      "changes to the entity as it is now."));
  };
  const answer = open(["Edit ", isolated(entity.name)], body, "Save", read, { submit });
  type.focus();
  return answer;
}

function propertiesText(properties) {
  return JSON.stringify(properties || {}, null, 2);
}

// `mine`, a list as typed over `was`, its additions and removals made to `now` (the list as stored now), so that
// neither the typed changes nor another client's are lost.
function applied(mine, was, now) {
  return [...now.filter((v) => mine.includes(v) || !was.includes(v)),
    ...mine.filter((v) => !was.includes(v) && !now.includes(v))];
}

// The same for properties, key by key: a key typed (added, changed or removed) takes the typed value.
function appliedProperties(mine, was, now) {
  const result = { ...now };
  for (const key of new Set([...Object.keys(was), ...Object.keys(mine)])) {
    if (!(key in mine)) delete result[key];
    else if (!(key in was) || JSON.stringify(mine[key]) !== JSON.stringify(was[key])) result[key] = mine[key];
  }
  return result;
}

// What changed from `was` to `now` (an entity's fields), a list item per field; `typed`: the fields the dialog
// changed too (type and description, which Save replaces with what was typed; the lists, to which Save makes the
// typed changes); `yours`: the properties as typed, a key both changed being said with the value Save keeps.
function differences(was, now, typed, yours) {
  const rows = [];
  const replaced = new Set(["type", "description"]);
  const row = (key, label, ...detail) => rows.push(h("li", { "data-field": key }, h("strong", {}, `${label}: `), detail,
    typed[key] ? h("em", {}, replaced.has(key) ? " (you changed it too: Save replaces it with what you typed)"
      : " (you changed it too: Save makes your changes to it as it is now)") : null));
  const shown = (value) => typeof value === "string" ? h("bdi", {}, value) : JSON.stringify(value);
  const listed = (values) => values.map((v, i) => [i ? ", " : "", h("bdi", {}, v)]);
  const added = (a, b) => b.filter((v) => !a.includes(v));
  if (was.name !== now.name) row("name", "Name", "now ", isolated(now.name), ", was ", isolated(was.name));
  if (was.type !== now.type) row("type", "Type", "now ", isolated(now.type), ", was ", isolated(was.type));
  if ((was.description || "") !== (now.description || "")) {
    row("description", "Description", "now ", now.description ? shown(now.description) : "empty");
  }
  if (JSON.stringify(was.aliases) !== JSON.stringify(now.aliases)) {
    const plus = added(was.aliases, now.aliases), minus = added(now.aliases, was.aliases);
    row("aliases", "Aliases", plus.length ? ["added ", listed(plus)] : null, plus.length && minus.length ? "; " : null,
      minus.length ? ["removed ", listed(minus)] : null, !plus.length && !minus.length ? "reordered" : null);
  }
  const before = was.properties || {}, after = now.properties || {};
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  if (keys.length) {
    const change = (k) => !(k in after) ? "removed" : !(k in before) ? ["added: ", shown(after[k])]
      : ["now ", shown(after[k]), ", was ", shown(before[k])];
    // Changed by both to different values: the typed one is kept.
    const both = (k) => typed.properties && JSON.stringify(yours[k]) !== JSON.stringify(before[k])
      && JSON.stringify(yours[k]) !== JSON.stringify(after[k]);
    const kept = (k) => h("em", { class: "both-changed" }, " (you changed it too, ",
      k in yours ? ["to ", shown(yours[k])] : "removing it", ": Save keeps yours)");
    row("properties", "Properties", keys.map((k, i) => [i ? "; " : "", h("bdi", {}, k), " ", change(k),
      both(k) ? kept(k) : null]));
  }
  const plus = added(was.observations, now.observations), minus = added(now.observations, was.observations);
  if (plus.length || minus.length) {
    row("observations", "Observations", plus.length ? ["added ", quotedList(plus)] : null,
      plus.length && minus.length ? "; " : null, minus.length ? ["removed ", quotedList(minus)] : null);
  }
  return rows;
}

function quotedList(texts) {
  return texts.map((t, i) => [i ? ", " : "", "\u201c", h("bdi", {}, t), "\u201d"]);
}

// Why `text` cannot be an entity's properties, or "".
function propertiesProblem(text) {
  if (!text.trim()) return "";
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `Properties: not valid JSON (${error.message})`;
  }
  return value !== null && typeof value === "object" && !Array.isArray(value) ? ""
    : 'Properties: must be a JSON object, e.g. {"founded": 1990}';
}
