// The tables page of the console: every resource by schema with its exposed
// methods, adding a column, dropping a table (after typing its name), its
// columns edited in place, its indexes and relations, and a new table from
// the definition form (every change shows its SQL before it runs); the
// registered database functions with their exposure, and a new registration.
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
  const head = element("div", null, { class: "table-head" });
  head.append(element("strong", name),
    link(`${BASE}/admin/rows/${encodeURIComponent(resource.schema)}/${encodeURIComponent(resource.table)}`, "Rows"));
  entry.append(head);
  const methods = element("span", null, { class: "methods", role: "group", "aria-label": `Exposed through the Data API: ${name}` });
  for (const method of METHODS) {
    const label = element("label", ` ${method}`);
    const box = element("input", null, { type: "checkbox", role: "switch", "data-method": method });
    box.checked = resource.exposedMethods.includes(method);
    label.prepend(box);
    methods.append(label);
  }
  methods.addEventListener("change", async () => {
    const exposedMethods = [...methods.querySelectorAll("input:checked")].map((b) => b.dataset.method);
    const result = await call("PATCH", `/admin/api/resources/${resource.id}`, { exposedMethods });
    if (result && result.status !== 200) showStatus(refusal(result));
  });
  head.append(methods);
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
  const manage = element("details", null, { class: "manage" });
  manage.append(element("summary", "Add a column or drop the table"), add, drop);
  entry.append(manage);
  if (resource.schema !== "svc") entry.append(schemaPanel(resource, tablePath));
  return entry;
}

// A change previewed first: `run` shows the SQL of `previewCall` and offers
// `label`, which makes `changeCall`; any edit of `form` withdraws it.
function previewed(form, label, previewCall, changeCall, done) {
  const box = element("div", null, { class: "preview", hidden: "" });
  const sql = element("pre");
  const go = element("button", label, { type: "button" });
  box.append(sql, go);
  const error = element("p", null, { class: "widget-error", role: "alert", hidden: "" });
  const withdraw = () => { box.hidden = true; error.hidden = true; };
  form.addEventListener("input", withdraw);
  form.addEventListener("change", withdraw);
  const refuse = (result) => { error.textContent = refusal(result); error.hidden = false; };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    withdraw();
    const result = await previewCall();
    if (!result) return;
    if (result.status !== 200) return refuse(result);
    sql.textContent = result.answer.data.sql;
    box.hidden = false;
    go.focus();
  });
  go.addEventListener("click", async () => {
    const result = await changeCall();
    if (!result) return;
    if (result.status >= 300) return refuse(result);
    withdraw();
    await done(result);
  });
  return [box, error];
}

// One column's row: its attributes edited in place, the change previewed;
// a drop once its name is typed.
function columnEditor(column, tablePath, reload) {
  const form = element("form", null, { class: "column-edit", "data-column": column.name });
  const field = (name, attributes) => {
    const node = input(name, { "aria-label": `${name} of ${column.name}`, ...attributes });
    form.append(node);
    return node;
  };
  const name = field("name", { value: column.name });
  const type = field("dataType", { value: column.dataType, list: "types" });
  const notNull = field("notNull", { type: "checkbox" });
  notNull.checked = !column.nullable;
  const fallback = field("default", { value: column.default ?? "", placeholder: "default" });
  const check = field("check", { value: column.check ?? "", placeholder: "check" });
  const message = field("checkMessage", { value: column.checkMessage ?? "", placeholder: "check message" });
  const unique = field("unique", { type: "checkbox" });
  unique.checked = column.unique;
  form.append(element("button", "Preview change", { type: "submit" }));
  const badges = [column.primaryKey && "key", column.identity && "identity", column.foreignKey &&
    `→ ${column.foreignKey.targetSchema}.${column.foreignKey.targetTable}.${column.foreignKey.targetColumn}`].filter(Boolean);
  if (badges.length) form.append(element("span", badges.join(" · "), { class: "badges" }));
  // Only what was edited is sent; emptied default and check are dropped.
  const patch = () => {
    const body = {};
    if (name.value.trim() !== column.name) body.name = name.value.trim();
    if (type.value.trim() !== column.dataType) body.dataType = type.value.trim();
    if (notNull.checked === column.nullable) body.nullable = !notNull.checked;
    const edited = (node, was) => node.value.trim() !== (was ?? "");
    if (edited(fallback, column.default)) body.default = fallback.value.trim() || null;
    if (edited(check, column.check)) body.check = check.value.trim() || null;
    if (edited(message, column.checkMessage)) body.checkMessage = message.value.trim() || null;
    if (unique.checked !== column.unique) body.unique = unique.checked;
    return body;
  };
  const path = `${tablePath}/columns/${encodeURIComponent(column.name)}`;
  const [box, error] = previewed(form, "Apply the change",
    () => call("POST", path + "/preview", patch()),
    () => call("PATCH", path, patch()),
    async () => { showStatus(`Changed ${column.name}.`); await reload(); });
  const drop = element("form", null, { class: "inline" });
  const confirm = element("input", null, { "aria-label": `Type ${column.name} to drop the column`, placeholder: `type ${column.name} to drop`, autocomplete: "off" });
  const dropButton = element("button", "Drop column", { type: "submit", disabled: "" });
  confirm.addEventListener("input", () => { dropButton.disabled = confirm.value !== column.name; });
  drop.append(confirm, dropButton);
  drop.addEventListener("submit", async (event) => {
    event.preventDefault();
    const result = await call("DELETE", path);
    if (result && result.status >= 300) { error.textContent = refusal(result); error.hidden = false; }
    else if (result) { showStatus(`Dropped ${column.name}.`); await reload(); }
  });
  const item = element("li");
  item.append(form, box, error, drop);
  return item;
}

// The indexes: each with a drop, and a new one previewed before it is built.
function indexList(indexes, tablePath, reload) {
  const list = element("ul", null, { class: "indexes" });
  for (const index of indexes) {
    const item = element("li", null, { "data-index": index.name });
    const where = index.where ? ` where ${JSON.stringify(index.where)}` : "";
    item.append(element("code", index.name), ` ${index.method} (${index.columns.join(", ")})${index.unique ? " unique" : ""}${where}${index.valid ? "" : " INVALID"} `);
    const drop = element("button", "Drop", { type: "button", class: "link" });
    drop.addEventListener("click", async () => {
      const result = await call("DELETE", `${tablePath}/indexes/${encodeURIComponent(index.name)}`);
      if (result && result.status >= 300) showStatus(refusal(result));
      else if (result) { showStatus(`Dropped ${index.name}.`); await reload(); }
    });
    item.append(drop);
    list.append(item);
  }
  const form = element("form", null, { class: "index-new" });
  const columns = input("columns", { "aria-label": "Index columns (comma separated, -name descending)", placeholder: "columns: a, -b" });
  const method = element("select", null, { "data-field": "method", "aria-label": "Index method" });
  for (const m of ["btree", "hash", "gin", "gist", "brin", "search"]) method.append(element("option", m, { value: m }));
  const unique = input("unique", { type: "checkbox", "aria-label": "Unique index" });
  const where = input("where", { "aria-label": "Partial index filter (JSON)", placeholder: "where (filter JSON)" });
  form.append(columns, method, element("label", " unique", {}), where, element("button", "Preview index", { type: "submit" }));
  form.querySelector("label").prepend(unique);
  const body = () => {
    const definition = { columns: columns.value.split(",").map((c) => c.trim()).filter(Boolean), method: method.value, unique: unique.checked };
    if (where.value.trim()) {
      try { definition.where = JSON.parse(where.value); } catch { definition.where = where.value; }
    }
    return definition;
  };
  const [box, error] = previewed(form, "Build the index",
    () => call("POST", `${tablePath}/indexes/preview`, body()),
    () => call("POST", `${tablePath}/indexes`, body()),
    async (result) => { showStatus(`Built ${result.answer.data.name}.`); await reload(); });
  const wrap = element("div");
  wrap.append(list, form, box, error);
  return wrap;
}

function relations(table) {
  const list = element("ul", null, { class: "relations" });
  for (const fk of table.foreignKeys) {
    list.append(element("li", `${fk.column} → ${fk.targetSchema}.${fk.targetTable}.${fk.targetColumn} (on delete ${fk.onDelete})`));
  }
  for (const fk of table.referencedBy) {
    list.append(element("li", `${fk.schema}.${fk.table}.${fk.column} → ${fk.targetColumn} (on delete ${fk.onDelete})`));
  }
  if (!list.children.length) list.append(element("li", "No foreign keys either way.", { class: "empty" }));
  return list;
}

// The table's columns at a glance: type, nullability, default, check, and
// badges for the key, identity, uniqueness and relations.
function columnSummary(table) {
  const body = element("tbody");
  for (const column of table.columns) {
    const row = element("tr", null, { "data-summary": column.name });
    const badges = element("td");
    if (column.primaryKey) badges.append(element("span", "key", { class: "badge key" }));
    if (column.identity) badges.append(element("span", `identity ${column.identity.toLowerCase()}`, { class: "badge" }));
    if (column.unique) badges.append(element("span", "unique", { class: "badge" }));
    if (column.foreignKey) {
      const fk = column.foreignKey;
      badges.append(element("span", `→ ${fk.targetSchema}.${fk.targetTable}.${fk.targetColumn}`, { class: "badge relation" }));
    }
    for (const fk of table.referencedBy.filter((f) => f.targetColumn === column.name)) {
      badges.append(element("span", `← ${fk.schema}.${fk.table}.${fk.column}`, { class: "badge relation" }));
    }
    row.append(element("th", column.name, { scope: "row" }), element("td", column.dataType),
      element("td", column.nullable ? "null" : "not null"), element("td", column.default ?? "—"),
      element("td", column.check ?? "—"), badges);
    body.append(row);
  }
  const summary = element("table", null, { class: "summary" });
  const head = element("tr");
  for (const title of ["Column", "Type", "Null", "Default", "Check", "Keys and relations"]) head.append(element("th", title, { scope: "col" }));
  summary.append(element("thead"), body);
  summary.tHead.append(head);
  const box = element("div", null, { class: "scroll", tabindex: "0" });
  box.append(summary);
  return box;
}

// The table's columns, indexes and relations, read when opened.
function schemaPanel(resource, tablePath) {
  const panel = element("details", null, { class: "schema", "data-schema-of": `${resource.schema}.${resource.table}` });
  panel.append(element("summary", "Columns, indexes and relations"));
  const body = element("div");
  panel.append(body);
  const reload = async () => {
    const result = await api(`/admin/api/schema/${encodeURIComponent(resource.schema)}/tables`);
    if (!result) return;
    if (result.status !== 200) { body.replaceChildren(element("p", refusal(result), { class: "widget-error" })); return; }
    const table = result.answer.data.find((t) => t.name === resource.table);
    if (!table) { await loadTables(); return; }
    const columns = element("ul", null, { class: "columns" });
    for (const column of table.columns) columns.append(columnEditor(column, tablePath, reload));
    body.replaceChildren(columnSummary(table), element("h3", "Edit the columns"), columns, element("h3", "Indexes"),
      indexList(table.indexes, tablePath, reload), element("h3", "Relations"), relations(table));
  };
  panel.addEventListener("toggle", () => { if (panel.open) reload(); });
  return panel;
}

async function loadTables() {
  const result = await api("/admin/api/resources");
  if (!result) return;
  const box = document.getElementById("tables");
  if (result.status !== 200) {
    box.replaceChildren(element("p", refusal(result), { class: "widget-error" }));
    return;
  }
  drawFunctions(result.answer.data);
  const bySchema = new Map();
  for (const resource of result.answer.data.filter((r) => r.kind === "table")) {
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

// One registered function: its signature, volatility and exposure (GET
// only for a function that reads only).
function functionEntry(fn) {
  const name = `${fn.schema}.${fn.function}`;
  const entry = element("li", null, { "data-function": name });
  const head = element("div", null, { class: "table-head" });
  const args = (fn.arguments || []).map((a) => `${a.name} ${a.type}${a.hasDefault ? " = default" : ""}`).join(", ");
  const returns = fn.returns ? `${fn.returns.set ? "SETOF " : ""}${fn.returns.type}` : "gone from the database";
  head.append(element("strong", `${name}(${args})`), element("span", ` → ${returns}, ${fn.volatility || "unknown"}`));
  const methods = element("span", null, { class: "methods", role: "group", "aria-label": `Exposed through the Data API: ${name}` });
  for (const method of ["GET", "POST"]) {
    const label = element("label", ` ${method}`);
    const box = element("input", null, { type: "checkbox", role: "switch", "data-method": method });
    box.checked = fn.exposedMethods.includes(method);
    if (method === "GET" && fn.volatility === "volatile") {
      box.disabled = true;
      label.title = "GET calls immutable and stable functions only";
    }
    label.prepend(box);
    methods.append(label);
  }
  methods.addEventListener("change", async () => {
    const exposedMethods = [...methods.querySelectorAll("input:checked")].map((b) => b.dataset.method);
    const result = await call("PATCH", `/admin/api/resources/${fn.id}`, { exposedMethods });
    if (result && result.status !== 200) showStatus(refusal(result));
    else if (result) showStatus(exposedMethods.length ? `${name} answers ${exposedMethods.join(" and ")}.` : `${name} is hidden.`);
  });
  head.append(methods);
  entry.append(head);
  return entry;
}

function drawFunctions(resources) {
  const functions = resources.filter((r) => r.kind === "function");
  document.getElementById("functions").replaceChildren(...(functions.length ? functions.map(functionEntry)
    : [element("li", "No function registered: register one below.", { class: "empty" })]));
}

async function registerFunction(event) {
  event.preventDefault();
  showAlert("function-error", "");
  const schema = document.getElementById("function-schema").value.trim();
  const fn = document.getElementById("function-name").value.trim();
  const result = await call("POST", "/admin/api/resources", { schema, function: fn });
  if (!result) return;
  if (result.status !== 201) return showAlert("function-error", refusal(result));
  document.getElementById("function-name").value = "";
  showStatus(`Registered ${schema}.${fn} (hidden until exposed).`);
  await loadTables();
}

async function tablesPage() {
  document.getElementById("register-function").addEventListener("submit", registerFunction);
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
