// The tables page of the console: every resource by schema with its exposed
// methods, adding a column, dropping a table (after typing its name), and a
// new table from the definition form, whose SQL is previewed before it runs.
"use strict";

const TYPES = ["bigint", "integer", "smallint", "numeric", "real", "double precision", "text",
  "varchar(255)", "boolean", "uuid", "date", "timestamp", "timestamptz", "json", "jsonb"];
const METHODS = ["GET", "POST", "PATCH", "DELETE"];

function input(field, attributes) {
  return element("input", null, { "data-field": field, autocomplete: "off", ...attributes });
}

// One row of the definition form.
function columnRow() {
  const row = element("tr");
  const cell = (node) => { const td = element("td"); td.append(node); row.append(td); return node; };
  cell(input("name", { "aria-label": "Column name", required: "" }));
  cell(input("dataType", { "aria-label": "Type", list: "types", value: "text" }));
  cell(input("notNull", { "aria-label": "Not null", type: "checkbox" }));
  cell(input("primaryKey", { "aria-label": "Primary key", type: "checkbox" }));
  const identity = cell(element("select", null, { "data-field": "identity", "aria-label": "Identity" }));
  for (const value of ["", "ALWAYS", "BY DEFAULT"]) identity.append(element("option", value || "no", { value }));
  cell(input("default", { "aria-label": "Default expression" }));
  cell(input("check", { "aria-label": "Check expression" }));
  cell(input("checkMessage", { "aria-label": "Check message" }));
  cell(input("references", { "aria-label": "References (schema.table.column)", placeholder: "schema.table.column" }));
  const remove = cell(element("button", "Remove", { type: "button", class: "link" }));
  remove.addEventListener("click", () => { row.remove(); changed(); });
  return row;
}

// The definition the form holds, as the API takes it.
function definition() {
  const columns = [...document.querySelectorAll("#new-columns tr")].map((row) => {
    const value = (field) => row.querySelector(`[data-field="${field}"]`);
    const text = (field) => value(field).value.trim() || undefined;
    const column = { name: value("name").value.trim(), dataType: text("dataType") || "", primaryKey: value("primaryKey").checked };
    if (value("notNull").checked) column.nullable = false;
    for (const field of ["identity", "default", "check", "checkMessage"]) if (text(field)) column[field] = text(field);
    const target = text("references");
    if (target) {
      const parts = target.split(".");
      const [targetSchema, targetTable, targetColumn] = parts.length === 3 ? parts : [undefined, ...parts];
      column.foreignKey = { targetSchema, targetTable, targetColumn };
    }
    return column;
  });
  return { name: document.getElementById("new-name").value.trim(), columns };
}

function schemaPath() {
  return `/admin/api/schema/${encodeURIComponent(document.getElementById("new-schema").value.trim())}/tables`;
}

// A change to the form withdraws the previewed SQL: what runs is always what was shown.
function changed() {
  document.getElementById("preview-box").hidden = true;
  document.getElementById("create-error").hidden = true;
  document.querySelectorAll("#create-table [aria-invalid]").forEach((n) => n.removeAttribute("aria-invalid"));
}

function showRefusal(result) {
  const box = document.getElementById("create-error");
  box.textContent = refusal(result);
  box.hidden = false;
  // Marks the field the refusal names, as columns[i].field or name.
  const field = firstError(result).field;
  const match = field && /^columns\[(\d+)\]\.(\w+)/.exec(field);
  const target = match
    ? document.querySelectorAll("#new-columns tr")[Number(match[1])]?.querySelector(`[data-field="${match[2]}"]`)
    : field === "name" ? document.getElementById("new-name") : null;
  if (target) target.setAttribute("aria-invalid", "true");
}

async function preview(event) {
  event.preventDefault();
  changed();
  const result = await call("POST", schemaPath() + "/preview", definition());
  if (!result) return;
  if (result.status !== 200) return showRefusal(result);
  document.getElementById("preview-sql").textContent = result.answer.data.sql;
  document.getElementById("preview-box").hidden = false;
  document.getElementById("create").focus();
}

async function create() {
  const result = await call("POST", schemaPath(), definition());
  if (!result) return;
  if (result.status !== 201) return showRefusal(result);
  changed();
  document.getElementById("new-name").value = "";
  document.getElementById("new-columns").replaceChildren(columnRow());
  showStatus(`Created ${result.answer.data.schema}.${result.answer.data.name} (hidden until exposed).`);
  await loadTables();
}

// One table of the list: its exposed methods, a column to add, a drop.
function tableEntry(resource) {
  const name = `${resource.schema}.${resource.table}`;
  const entry = element("li", null, { "data-table": name });
  entry.append(element("strong", name), " ",
    link(`${BASE}/admin/rows/${encodeURIComponent(resource.schema)}/${encodeURIComponent(resource.table)}`, "Rows"));
  const methods = element("span", null, { class: "methods" });
  for (const method of METHODS) {
    const label = element("label", ` ${method}`);
    const box = element("input", null, { type: "checkbox", "data-method": method });
    box.checked = resource.exposedMethods.includes(method);
    label.prepend(box);
    methods.append(label);
  }
  methods.addEventListener("change", async () => {
    const exposedMethods = [...methods.querySelectorAll("input:checked")].map((b) => b.dataset.method);
    const result = await call("PATCH", `/admin/api/resources/${resource.id}`, { exposedMethods });
    if (result && result.status !== 200) showStatus(refusal(result));
  });
  entry.append(" ", methods);
  const tablePath = `/admin/api/schema/${encodeURIComponent(resource.schema)}/tables/${encodeURIComponent(resource.table)}`;
  // Adding a column.
  const add = element("form", null, { class: "inline" });
  const column = input("name", { "aria-label": `New column of ${name}`, placeholder: "new column" });
  const type = input("dataType", { "aria-label": `Type of the new column of ${name}`, list: "types", value: "text" });
  add.append(column, type, element("button", "Add column", { type: "submit" }));
  add.addEventListener("submit", async (event) => {
    event.preventDefault();
    const result = await call("POST", tablePath + "/columns", { name: column.value.trim(), dataType: type.value.trim() });
    if (result && result.status >= 300) showStatus(refusal(result));
    else if (result) { showStatus(`Added ${column.value.trim()} to ${name}.`); column.value = ""; }
  });
  // Dropping, once the name is typed.
  const drop = element("form", null, { class: "inline" });
  const confirm = element("input", null, { "aria-label": `Type ${name} to drop it`, placeholder: `type ${name} to drop`, autocomplete: "off" });
  const dropButton = element("button", "Drop", { type: "submit", disabled: "" });
  confirm.addEventListener("input", () => { dropButton.disabled = confirm.value !== name; });
  drop.append(confirm, dropButton);
  drop.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (confirm.value !== name) return;
    const result = await call("DELETE", tablePath);
    if (result && result.status >= 300) showStatus(refusal(result));
    else { showStatus(`Dropped ${name}.`); await loadTables(); }
  });
  entry.append(add, drop);
  return entry;
}

async function loadTables() {
  const result = await api("/admin/api/resources");
  if (!result) return;
  const box = document.getElementById("tables");
  if (result.status !== 200) {
    box.replaceChildren(element("p", refusal(result), { class: "widget-error" }));
    return;
  }
  const bySchema = new Map();
  for (const resource of result.answer.data) {
    if (!bySchema.has(resource.schema)) bySchema.set(resource.schema, []);
    bySchema.get(resource.schema).push(resource);
  }
  const sections = [...bySchema.keys()].sort().map((schema) => {
    const list = element("ul");
    for (const resource of bySchema.get(schema).sort((a, b) => a.table.localeCompare(b.table))) list.append(tableEntry(resource));
    const section = element("section");
    section.append(element("h2", schema), list);
    return section;
  });
  box.replaceChildren(...(sections.length ? sections : [element("p", "No tables yet.", { class: "empty" })]));
}

async function tablesPage() {
  const types = document.getElementById("types");
  for (const type of TYPES) types.append(element("option", null, { value: type }));
  const rows = document.getElementById("new-columns");
  rows.append(columnRow());
  document.getElementById("add-column-row").addEventListener("click", () => { rows.append(columnRow()); changed(); });
  const form = document.getElementById("create-table");
  form.addEventListener("submit", preview);
  form.addEventListener("input", changed);
  document.getElementById("create").addEventListener("click", create);
  await loadTables();
}
