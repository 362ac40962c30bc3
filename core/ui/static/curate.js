// The dialogs of curation: a question with one answer, a confirmation, the edit form of an entity.

import { clear, h } from "./dom.js";

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

// The changed fields of `entity` as update_entity takes them, or null.
export async function editEntity(entity) {
  const field = (id, label, control) => h("div", { class: "field-row" }, h("label", { for: id }, label), control);
  const type = h("input", { id: "edit-type", value: entity.type });
  const description = h("textarea", { id: "edit-description", rows: 3 }, entity.description || "");
  const aliases = h("textarea", { id: "edit-aliases", rows: 3 }, entity.aliases.join("\n"));
  const properties = h("textarea", { id: "edit-properties", rows: 4 }, JSON.stringify(entity.properties || {}, null, 2));
  const observations = h("textarea", { id: "edit-observations", rows: 6 }, entity.observations.join("\n"));
  const body = [field("edit-type", "Type", type), field("edit-description", "Description", description),
    field("edit-aliases", "Aliases, one per line", aliases), field("edit-properties", "Properties (JSON)", properties),
    field("edit-observations", "Observations, one per line", observations)];
  const lines = (el) => el.value.split("\n").map((s) => s.trim()).filter(Boolean);
  const read = () => {
    const changes = {};
    if (type.value.trim() !== entity.type) changes.type = type.value.trim();
    if (description.value.trim() !== (entity.description || "")) changes.description = description.value.trim();
    if (lines(aliases).join("\n") !== entity.aliases.join("\n")) changes.aliases = lines(aliases);
    const props = properties.value.trim() ? JSON.parse(properties.value) : {};
    if (JSON.stringify(props) !== JSON.stringify(entity.properties || {})) changes.properties = props;
    const kept = lines(observations);
    const added = kept.filter((o) => !entity.observations.includes(o));
    const removed = entity.observations.filter((o) => !kept.includes(o));
    if (added.length) changes.add_observations = added;
    if (removed.length) changes.remove_observations = removed;
    return changes;
  };
  let changes = null;
  try {
    changes = await open(`Edit ${entity.name}`, body, "Save", read);
  } catch (error) {
    throw new Error(`properties: ${error.message}`);
  }
  return changes && Object.keys(changes).length ? changes : null;
}
