// The settings page: every setting with an input of its type (a check box,
// a number, a text, a list one item per line, the sign-in providers as
// groups of fields); Save sends the changed ones
// in one PATCH and marks the key a refusal names; leaving with changes not
// saved asks first.
"use strict";

// Keys only a session may change, not an access token.
const SESSION_ONLY = /^(mcp\.|sql_console\.allow_api_tokens$)/;

let savedSettings = {};

// The input of the setting (or part of one) at `key` holding `value`: a
// check box, a number, a text (empty: null), a list as one item per line,
// an object (the providers of sign-in) as a group of its fields.
function settingInput(key, value) {
  const common = { "data-key": key, "aria-label": key, autocomplete: "off" };
  if (typeof value === "boolean") {
    const box = element("input", null, { ...common, type: "checkbox" });
    box.checked = value;
    return box;
  }
  if (typeof value === "number") return element("input", null, { ...common, type: "number", step: "any", value: String(value) });
  if (Array.isArray(value)) {
    const text = element("textarea", null, { ...common, rows: "3", spellcheck: "false", "data-list": "", placeholder: "one per line" });
    text.value = value.join("\n");
    return text;
  }
  if (value !== null && typeof value === "object") {
    const group = element("div", null, { class: "setting-object", role: "group", "aria-label": key, "data-object": key });
    for (const [part, inner] of Object.entries(value)) {
      const row = element("div", null, { class: "setting-part" });
      row.append(element("span", part, { class: "field-name" }), settingInput(`${key}.${part}`, inner));
      group.append(row);
    }
    return group;
  }
  const secret = /secret/i.test(key);
  return element("input", null, { ...common, value: value ?? "", type: secret ? "password" : "text",
    placeholder: secret ? "kept unless typed" : "null" });
}

// The value an input holds, typed as the setting (or part) was; undefined
// when it does not parse.
function settingValue(input, was) {
  if (input.dataset.object !== undefined) {
    const value = {};
    for (const row of input.children) {
      const inner = row.lastElementChild;
      const part = row.firstElementChild.textContent;
      const typed = settingValue(inner, was?.[part]);
      if (typed === undefined) return undefined;
      value[part] = typed;
    }
    return value;
  }
  if (typeof was === "boolean") return input.checked;
  if (typeof was === "number") return input.value === "" ? undefined : Number(input.value);
  if (input.dataset.list !== undefined) return input.value.split("\n").map((line) => line.trim()).filter(Boolean);
  return input.value === "" ? null : input.value;
}

async function loadSettings() {
  const result = await api("/admin/api/settings");
  if (!result) return;
  if (result.status !== 200) return showAlert("settings-error", refusal(result));
  savedSettings = result.answer.data;
  document.getElementById("settings-rows").replaceChildren(...Object.keys(savedSettings).sort().map((key) => {
    const row = element("tr", null, { "data-setting": key });
    const name = element("td", key + " ");
    if (SESSION_ONLY.test(key)) name.append(element("span", "session only", { class: "chip" }));
    const value = element("td");
    value.append(settingInput(key, savedSettings[key]));
    row.append(name, value);
    return row;
  }));
}

// The settings whose inputs differ from what was read, by key; `invalid`:
// the first input whose value does not parse.
function editedSettings() {
  const changes = {};
  for (const row of document.querySelectorAll("#settings-rows [data-setting]")) {
    const key = row.dataset.setting;
    const input = row.lastElementChild.firstElementChild;
    const value = settingValue(input, savedSettings[key]);
    if (value === undefined) return { changes, invalid: input };
    if (JSON.stringify(value) !== JSON.stringify(savedSettings[key])) changes[key] = value;
  }
  return { changes, invalid: null };
}

async function saveSettings(event) {
  event.preventDefault();
  showAlert("settings-error", "");
  for (const input of document.querySelectorAll("#settings-rows [aria-invalid]")) input.removeAttribute("aria-invalid");
  const { changes, invalid } = editedSettings();
  if (invalid) {
    invalid.setAttribute("aria-invalid", "true");
    return showAlert("settings-error", `${invalid.dataset.key || invalid.dataset.object}: not a valid value.`);
  }
  if (!Object.keys(changes).length) return showStatus("Nothing changed.");
  const result = await call("PATCH", "/admin/api/settings", changes);
  if (!result) return;
  if (result.status !== 200) {
    const field = firstError(result).field?.replace(/^data\./, "");
    document.querySelector(`#settings-rows [data-key="${CSS.escape(field || "")}"]`)?.setAttribute("aria-invalid", "true");
    return showAlert("settings-error", refusal(result));
  }
  showStatus(`Saved ${Object.keys(changes).join(", ")}.`);
  await loadSettings();
}

function settingsPage() {
  document.getElementById("settings").addEventListener("submit", saveSettings);
  guardUnsaved(() => {
    const { changes, invalid } = editedSettings();
    return !!invalid || Object.keys(changes).length > 0;
  });
  loadSettings();
}
