// The dialogs of curation: a question with one answer, a confirmation, the edit form of an entity.

import { clear, h, isolated } from "./dom.js";

const dialog = document.getElementById("dialog");

// Show the dialog with `body`; resolve with `read()` on OK, null on Cancel or Escape.
function open(title, body, okLabel, read, danger = false) {
  clear(document.getElementById("dialog-title"), title);
  clear(document.getElementById("dialog-body"), body);
  const ok = document.getElementById("dialog-ok");
  ok.textContent = okLabel;
  ok.className = danger ? "danger" : "primary";
  dialog.returnValue = "";
  dialog.showModal();
  // A destructive OK is not the default: Enter or a stray key press on the dialog cancels instead.
  if (danger) document.getElementById("dialog-cancel").focus();
  return new Promise((resolve, reject) => {
    dialog.addEventListener("close", () => {
      try { resolve(dialog.returnValue === "ok" ? read() : null); } catch (error) { reject(error); }
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

export async function confirmAction(label, question) {
  return (await open(`${label}?`, h("p", {}, question), label, () => true, true)) === true;
}

// The changed fields of `entity` as update_entity takes them, or null. Each observation has a field of its own,
// since one may hold line breaks; only those whose text was changed are sent (removed, and added as now written),
// so an edit of another field leaves every observation exactly as stored.
export async function editEntity(entity) {
  const field = (id, label, control) => h("div", { class: "field-row" }, h("label", { for: id }, label), control);
  const type = h("input", { id: "edit-type", value: entity.type });
  const description = h("textarea", { id: "edit-description", rows: 3 }, entity.description || "");
  const aliases = h("textarea", { id: "edit-aliases", rows: 3 }, entity.aliases.join("\n"));
  const properties = h("textarea", { id: "edit-properties", rows: 4 }, JSON.stringify(entity.properties || {}, null, 2));
  const propertiesError = h("p", { class: "error", id: "edit-properties-error", "aria-live": "polite" });
  const observation = (text) => h("textarea", { class: "edit-observation", rows: Math.min(6, text.split("\n").length + 1),
    "aria-label": "observation" }, text);
  const observations = h("div", { id: "edit-observations" }, entity.observations.map(observation), observation(""));
  const another = h("button", { type: "button", id: "add-observation", onclick: () => {
    const added = observation("");
    observations.append(added);
    added.focus();
  } }, "Another observation");
  const body = [field("edit-type", "Type", type), field("edit-description", "Description", description),
    field("edit-aliases", "Aliases, one per line", aliases), field("edit-properties", "Properties (JSON)", properties),
    propertiesError,
    h("fieldset", { class: "observations-field" }, h("legend", {}, "Observations, one per field (empty a field to remove it)"),
      observations, another)];
  // Invalid JSON keeps the dialog open (the form does not submit) with the reason beside the field.
  properties.addEventListener("input", () => {
    const problem = propertiesProblem(properties.value);
    properties.setCustomValidity(problem);
    clear(propertiesError, problem);
  });
  // A textarea's value has "\n" line breaks whatever the stored text has.
  const unchanged = (value, stored) => value === (stored || "").replace(/\r\n?/g, "\n");
  const lines = (el) => el.value.split("\n").map((s) => s.trim()).filter(Boolean);
  const read = () => {
    const changes = {};
    if (type.value.trim() !== entity.type) changes.type = type.value.trim();
    if (!unchanged(description.value, entity.description)) changes.description = description.value.trim();
    if (lines(aliases).join("\n") !== entity.aliases.join("\n")) changes.aliases = lines(aliases);
    const props = properties.value.trim() ? JSON.parse(properties.value) : {};
    if (JSON.stringify(props) !== JSON.stringify(entity.properties || {})) changes.properties = props;
    const fields = [...observations.querySelectorAll("textarea")].map((f) => f.value);
    const removed = entity.observations.filter((stored, i) => !unchanged(fields[i], stored));
    const added = [...fields.slice(0, entity.observations.length).filter((v, i) => !unchanged(v, entity.observations[i])),
      ...fields.slice(entity.observations.length)].map((v) => v.trim()).filter(Boolean);
    if (added.length) changes.add_observations = added;
    if (removed.length) changes.remove_observations = removed;
    return changes;
  };
  const changes = await open(["Edit ", isolated(entity.name)], body, "Save", read);
  return changes && Object.keys(changes).length ? changes : null;
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
