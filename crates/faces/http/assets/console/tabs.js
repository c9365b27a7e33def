// The Builder and JSON (advanced) tabs of a definition's editor (the
// workflows and DataViews pages): the builder (#builder) writes every change
// into the JSON tab's text box (#definition), which Save sends; going back
// to the builder draws it from the text (`drawFrom(parsed)`).
"use strict";

// Starts the tabs; answers whether the builder is the tab shown.
function startDefinitionTabs(drawFrom) {
  // Enter in a builder field does not save the definition.
  document.getElementById("builder").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.target.matches("input")) event.preventDefault();
  });
  const tabs = [document.getElementById("tab-builder"), document.getElementById("tab-json")];
  const choose = (tab) => {
    if (tab.id === "tab-builder") {
      const parsed = definitionInBox();
      if (!parsed) { showAlert("editor-error", "The JSON does not parse: fix it before going back to the builder."); return; }
      showAlert("editor-error", "");
      drawFrom(parsed);
    }
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    tab.focus();
  };
  for (const tab of tabs) {
    tab.addEventListener("click", () => choose(tab));
    tab.addEventListener("keydown", (event) => {
      if (event.key === "ArrowRight" || event.key === "ArrowLeft") choose(tabs[(tabs.indexOf(tab) + 1) % 2]);
    });
  }
  return () => tabs[0].getAttribute("aria-selected") === "true";
}

/// The definition in the text box, parsed; null when it does not parse.
function definitionInBox() {
  try {
    const parsed = JSON.parse(document.getElementById("definition").value);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : null;
  } catch { return null; }
}

/// Writes `definition` into the text box after a change in a builder.
function writeDefinition(definition) {
  const box = document.getElementById("definition");
  box.value = JSON.stringify(definition, null, 2);
  box.removeAttribute("aria-invalid");
}
