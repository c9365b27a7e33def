// The settings page: every setting with an input of its type (a check box,
// a number, a text, JSON for lists and objects); Save sends the changed ones
// in one PATCH and marks the key a refusal names.
"use strict";

// Keys only a session may change (API.md section 2).
const SESSION_ONLY = /^(mcp\.|sql_console\.allow_api_tokens$)/;

let savedSettings = {};

function settingInput(key, value) {
  const common = { "data-key": key, "aria-label": key, autocomplete: "off" };
  if (typeof value === "boolean") {
    const box = element("input", null, { ...common, type: "checkbox" });
    box.checked = value;
    return box;
  }
  if (typeof value === "number") return element("input", null, { ...common, type: "number", step: "any", value: String(value) });
  if (value !== null && typeof value === "object") {
    const text = element("textarea", null, { ...common, rows: "3", spellcheck: "false" });
    text.value = JSON.stringify(value, null, 2);
    return text;
  }
  return element("input", null, { ...common, value: value ?? "", placeholder: "null" });
}

// The value an input holds, typed as the setting was; undefined when it does not parse.
function settingValue(input, was) {
  if (typeof was === "boolean") return input.checked;
  if (typeof was === "number") return input.value === "" ? undefined : Number(input.value);
  if (was !== null && typeof was === "object") {
    try { return JSON.parse(input.value); } catch { return undefined; }
  }
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

async function saveSettings(event) {
  event.preventDefault();
  showAlert("settings-error", "");
  const changes = {};
  for (const input of document.querySelectorAll("#settings-rows [data-key]")) {
    input.removeAttribute("aria-invalid");
    const key = input.dataset.key;
    const value = settingValue(input, savedSettings[key]);
    if (value === undefined) {
      input.setAttribute("aria-invalid", "true");
      return showAlert("settings-error", `${key}: not a valid value.`);
    }
    if (JSON.stringify(value) !== JSON.stringify(savedSettings[key])) changes[key] = value;
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
  loadSettings();
}
