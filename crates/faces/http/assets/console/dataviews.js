// The DataViews page of the console: a view built with a form (its source
// table, the columns it groups by, its time buckets and aggregates, a
// filter from filters.js, its order and limit) or edited as JSON (the
// definition editor of console.js, the tabs of tabs.js), saved and
// published; a live preview runs the definition as it is being edited, as
// the administrator or a member of a role, in a chosen time zone.
"use strict";

const VIEW_TEMPLATE = { slug: "", name: "", source: "", columns: [], filter: null, sort: [], limit: 1000 };
const BUCKETS = ["hour", "day", "week", "month", "year"];
const AGGREGATES = [["count", "count of"], ["sum", "sum of"], ["avg", "average of"], ["min", "lowest"], ["max", "highest"]];
const KINDS = [["plain", "Group by a column"], ["bucket", "Group by a time bucket"], ["agg", "Aggregate"]];
const TIME_TYPE = /^(date|timestamp)/;

let views;
// Whether the Builder tab is the one shown (set by startDefinitionTabs).
let builderOpen = () => true;
// The definition the builder edits; every change is written to the JSON tab.
let view = null;
let tables = [];
let viewFilter = null;
// Output columns whose name was typed: no longer named after their column.
const namedByHand = new WeakSet();

// The kind of an output column.
function kindOf(column) {
  return column.agg ? "agg" : column.bucket ? "bucket" : "plain";
}

// The name an output column gets until one is typed.
function suggestedName(column) {
  if (column.agg) return column.column ? `${column.agg}_${column.column}` : column.agg;
  if (column.bucket) return column.bucket;
  return column.column || "";
}

// The columns of `source` (schema.table), none when there is none.
function columnsOf(source) {
  const [schema, table] = (source || "").split(".");
  return table ? columnsOfTable(schema, table) : Promise.resolve([]);
}

// Writes the definition into the JSON tab and, unless only its slug or
// name changed (`named`), runs the preview again.
function edited(named = false) {
  writeDefinition(view);
  if (!named) schedulePreview();
}

function textInput(owner, key, label, { type = "text", placeholder = "" } = {}) {
  const input = element("input", null, { type, autocomplete: "off", spellcheck: "false", "data-path": key, placeholder });
  input.value = owner[key] ?? "";
  input.addEventListener("input", () => {
    owner[key] = type === "number" ? (input.value === "" ? undefined : Number(input.value)) : input.value;
    edited(key === "slug" || key === "name");
  });
  return field(label, input);
}

function choice(options, value, attributes) {
  const box = element("select", null, attributes);
  box.append(...options.map(([v, text]) => element("option", text, { value: v })));
  if (value !== undefined && value !== null && ![...box.options].some((o) => o.value === value)) box.append(element("option", value, { value }));
  box.value = value ?? "";
  return box;
}

// The row of output column `i`: its kind, column, bucket or aggregate, name.
function outputRow(columns, i) {
  const column = view.columns[i];
  const number = i + 1;
  const row = element("li", null, { class: "output-column", "data-path": `columns[${i}]` });
  const kind = choice(KINDS, kindOf(column), { "aria-label": `Kind of column ${number}`, "data-path": `columns[${i}].kind` });
  const fit = (c) => kindOf(column) === "bucket" ? TIME_TYPE.test(c.dataType)
    : column.agg === "sum" || column.agg === "avg" ? NUMERIC_TYPE.test(c.dataType) : true;
  const sourceOptions = columns.filter(fit).map((c) => [c.name, `${c.name} (${c.dataType})`]);
  if (column.agg === "count") sourceOptions.unshift(["", "every row"]);
  else sourceOptions.unshift(["", "Choose a column"]);
  const source = choice(sourceOptions, column.column ?? "", { "aria-label": `Source column of column ${number}`, "data-path": `columns[${i}].column` });
  const detail = kindOf(column) === "bucket"
    ? choice(BUCKETS.map((b) => [b, `by ${b}`]), column.bucket, { "aria-label": `Bucket of column ${number}`, "data-path": `columns[${i}].bucket` })
    : kindOf(column) === "agg"
      ? choice(AGGREGATES, column.agg, { "aria-label": `Aggregate of column ${number}`, "data-path": `columns[${i}].agg` })
      : null;
  const name = element("input", null, { autocomplete: "off", spellcheck: "false", "aria-label": `Name of column ${number}`, "data-path": `columns[${i}].name` });
  name.value = column.name ?? "";
  const rename = () => { if (!namedByHand.has(column)) column.name = suggestedName(column); };
  kind.addEventListener("change", () => {
    const { name: kept } = column;
    for (const key of Object.keys(column)) delete column[key];
    column.name = kept;
    if (kind.value === "bucket") column.bucket = "day";
    if (kind.value === "agg") column.agg = "count";
    rename();
    drawView(`[data-path="columns[${i}].kind"]`);
    edited();
  });
  source.addEventListener("change", () => {
    if (source.value) column.column = source.value; else delete column.column;
    rename();
    name.value = column.name;
    edited();
  });
  detail?.addEventListener("change", () => {
    column[kindOf(column) === "bucket" ? "bucket" : "agg"] = detail.value;
    rename();
    drawView(`[data-path="${detail.dataset.path}"]`);
    edited();
  });
  name.addEventListener("input", () => { column.name = name.value; namedByHand.add(column); edited(); });
  const remove = element("button", "Remove", { type: "button", class: "ghost danger", "aria-label": `Remove column ${number}` });
  remove.addEventListener("click", () => { view.columns.splice(i, 1); drawView(); edited(); });
  row.append(kind);
  if (detail && kindOf(column) === "agg") row.append(detail, source);
  else if (detail) row.append(source, detail);
  else row.append(source);
  row.append(element("span", "named", { class: "meta", "aria-hidden": "true" }), name, remove);
  return row;
}

function columnsCard(columns) {
  const card = element("fieldset", null, { class: "card", "data-path": "columns" });
  card.append(element("legend", "Columns"));
  card.append(element("p", "Columns grouped by (plain or a time bucket, cut in the reader's time zone) make the rows; aggregates are computed per row. Without a group the view has one row.", { class: "help" }));
  const list = element("ol", null, { class: "output-columns" });
  view.columns.forEach((_, i) => list.append(outputRow(columns, i)));
  if (!view.columns.length) list.append(element("li", "No column yet.", { class: "empty" }));
  const actions = element("p", null, { class: "actions" });
  for (const [kind, text] of [["plain", "Add a group column"], ["bucket", "Add a time bucket"], ["agg", "Add an aggregate"]]) {
    const add = element("button", text, { type: "button", "data-add-column": kind });
    add.addEventListener("click", () => {
      const fresh = kind === "bucket" ? { bucket: "day", column: columns.find((c) => TIME_TYPE.test(c.dataType))?.name }
        : kind === "agg" ? { agg: "count" } : { column: columns[0]?.name };
      if (!fresh.column) delete fresh.column;
      fresh.name = suggestedName(fresh);
      view.columns.push(fresh);
      drawView(`[data-path="columns[${view.columns.length - 1}].kind"]`);
      edited();
    });
    actions.append(add, " ");
  }
  card.append(list, actions, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  return card;
}

function orderCard() {
  const card = element("fieldset", null, { class: "card", "data-path": "sort" });
  card.append(element("legend", "Order and limit"));
  const outputs = view.columns.map((c) => c.name).filter(Boolean);
  const list = element("ol", null, { class: "sort-keys" });
  view.sort.forEach((key, i) => {
    const descending = key.startsWith("-");
    const row = element("li", null, { class: "inline" });
    const name = choice(outputs.map((o) => [o, o]), key.replace(/^-/, ""), { "aria-label": `Sort key ${i + 1}`, "data-path": `sort[${i}]` });
    const way = choice([["asc", "ascending"], ["desc", "descending"]], descending ? "desc" : "asc", { "aria-label": `Direction of sort key ${i + 1}` });
    const write = () => { view.sort[i] = (way.value === "desc" ? "-" : "") + name.value; edited(); };
    name.addEventListener("change", write);
    way.addEventListener("change", write);
    const remove = element("button", "Remove", { type: "button", class: "ghost", "aria-label": `Remove sort key ${i + 1}` });
    remove.addEventListener("click", () => { view.sort.splice(i, 1); drawView(); edited(); });
    row.append(name, way, remove);
    list.append(row);
  });
  const add = element("button", "Add a sort key", { type: "button", id: "add-sort" });
  add.disabled = !outputs.length;
  add.addEventListener("click", () => { view.sort.push(outputs[0]); drawView(`[data-path="sort[${view.sort.length - 1}]"]`); edited(); });
  const fields = element("div", null, { class: "card-fields" });
  fields.append(textInput(view, "limit", "At most this many rows", { type: "number" }));
  const actions = element("p", null, { class: "actions" });
  actions.append(add);
  card.append(list, actions, fields, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  return card;
}

// Draws the builder from `view`; `focus`: a control to focus after. Only
// the last draw asked for lands (a source's columns are read first).
let drawn = 0;
async function drawView(focus) {
  const serial = ++drawn;
  const builder = document.getElementById("builder");
  if (!view) {
    builder.replaceChildren(element("p", "The JSON tab holds a definition that does not parse: fix it there.", { class: "widget-error" }));
    return;
  }
  if (!Array.isArray(view.columns)) view.columns = [];
  if (!Array.isArray(view.sort)) view.sort = [];
  const columns = await columnsOf(view.source);
  if (serial !== drawn) return;
  const basics = element("fieldset", null, { class: "card basics-card", "data-path": "" });
  basics.append(element("legend", "View"));
  const fields = element("div", null, { class: "card-fields" });
  const source = choice([["", "Choose a table"], ...tables.map((t) => [t, t])], view.source || "", { "data-path": "source" });
  source.addEventListener("change", async () => {
    view.source = source.value;
    drawView('[data-path="source"]');
    edited();
  });
  fields.append(textInput(view, "slug", "Slug (in its address)", { placeholder: "sales-per-day" }),
    textInput(view, "name", "Name", { placeholder: "Sales per day" }), field("Source table", source));
  basics.append(fields, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  const filterCard = element("fieldset", null, { class: "card", "data-path": "filter" });
  filterCard.append(element("legend", "Filter"), element("p", "Which rows of the source are counted, before grouping; a reader's own row filters apply too.", { class: "help" }));
  const filterBox = element("div");
  filterCard.append(filterBox, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  viewFilter = filterBuilder(filterBox, {
    columns, filter: view.filter ?? null, name: "View filter",
    changed: () => { const value = viewFilter?.value(); if (value !== undefined) { view.filter = value; edited(); } },
  });
  document.getElementById("builder").replaceChildren(basics, columnsCard(columns), filterCard, orderCard());
  if (focus) builder.querySelector(focus)?.focus();
}

// ---- The live preview ----------------------------------------------------

let previewTimer;
let previewSerial = 0;

function schedulePreview() {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(runPreview, 300);
}

async function runPreview() {
  const serial = ++previewSerial;
  const sent = definitionInBox();
  const rows = document.getElementById("preview-rows");
  const count = document.getElementById("preview-count");
  showAlert("preview-error", "");
  if (!sent || !sent.source || !Array.isArray(sent.columns) || !sent.columns.length) {
    rows.replaceChildren();
    count.textContent = "Choose a source table and add a column to see the rows.";
    return;
  }
  const query = new URLSearchParams();
  const role = document.getElementById("preview-role").value;
  const user = document.getElementById("preview-user").value;
  const zone = document.getElementById("preview-zone").value.trim();
  if (role) query.set("roleId", role);
  if (role && user) query.set("userId", user);
  if (zone) query.set("zone", zone);
  const result = await call("POST", `/admin/api/dataviews/preview?${query}`, sent);
  if (!result || serial !== previewSerial) return;
  if (result.status !== 200) {
    rows.replaceChildren();
    count.textContent = "";
    document.getElementById("preview-sql").textContent = "";
    return showAlert("preview-error", refusal(result));
  }
  const preview = result.answer.data;
  document.getElementById("preview-sql").textContent = preview.sql;
  count.textContent = `${preview.rows.length} ${preview.rows.length === 1 ? "row" : "rows"}${role ? ` as ${document.getElementById("preview-role").selectedOptions[0].text}` : ""}.`;
  rows.replaceChildren(preview.rows.length
    ? dataTable(sent.columns.map((c) => c.name), preview.rows)
    : element("p", "No rows.", { class: "empty" }));
}

async function previewMembers() {
  const role = document.getElementById("preview-role").value;
  const select = document.getElementById("preview-user");
  select.disabled = !role;
  const result = role ? await api(`/admin/api/roles/${encodeURIComponent(role)}/members`) : null;
  const members = result && result.status === 200 ? result.answer.data : [];
  select.replaceChildren(element("option", role ? "nobody" : "you", { value: "" }),
    ...members.map((user) => element("option", user.email, { value: user.id })));
}

async function startPreview() {
  const roles = await api("/admin/api/roles");
  const listed = roles?.status === 200 ? roles.answer.data.filter((r) => r.name !== "Administrators") : [];
  document.getElementById("preview-role").replaceChildren(element("option", "you (every row)", { value: "" }),
    ...listed.map((r) => element("option", r.name, { value: r.id })));
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  document.getElementById("zones").replaceChildren(...zones.map((z) => element("option", null, { value: z })));
  document.getElementById("preview-role").addEventListener("change", async () => { await previewMembers(); runPreview(); });
  document.getElementById("preview-user").addEventListener("change", runPreview);
  document.getElementById("preview-zone").addEventListener("input", schedulePreview);
  document.getElementById("preview-as").addEventListener("submit", (event) => { event.preventDefault(); runPreview(); });
  await previewMembers();
}

// Shows a save's refusal on the card of the field it names.
function refusedInView(error) {
  for (const old of document.querySelectorAll("#builder .card-error")) old.hidden = true;
  if (!error.field) return;
  const path = error.field.replace(/^data\./, "");
  const top = path.replace(/[.[].*$/, "").replace(/^limit$/, "sort");
  const card = document.querySelector(`#builder .card[data-path="${CSS.escape(top)}"]`) || document.querySelector("#builder .basics-card");
  if (!card) return;
  const message = card.querySelector(":scope > .card-error");
  message.textContent = `${error.message} (${error.field})`;
  message.hidden = false;
  const found = document.querySelector(`#builder [data-path="${CSS.escape(path)}"]`);
  if (found) { found.setAttribute("aria-invalid", "true"); found.focus(); }
}

// Shows the definition in the JSON tab in the builder; names that are not
// the ones the builder would give count as typed, so they stay.
function viewFromBox() {
  view = definitionInBox();
  for (const column of Array.isArray(view?.columns) ? view.columns : []) {
    if (column && typeof column === "object" && column.name !== suggestedName(column)) namedByHand.add(column);
  }
  drawView();
  schedulePreview();
}

async function dataviewsPage() {
  builderOpen = startDefinitionTabs(viewFromBox);
  // A filter rule without a column is refused before Save sends the last
  // complete filter (this runs before the editor's own Save).
  document.getElementById("editor").addEventListener("submit", (event) => {
    if (!builderOpen() || viewFilter?.value() !== undefined) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    showAlert("editor-error", viewFilter.problem());
  }, true);
  // What is typed in the JSON tab is previewed too.
  document.getElementById("definition").addEventListener("input", schedulePreview);
  const resources = await api("/admin/api/resources");
  tables = (resources?.answer?.data || []).filter((r) => r.kind === "table" && r.schema !== "svc").map((r) => `${r.schema}.${r.table}`);
  await startPreview();
  views = definitionEditor({
    path: "/admin/api/dataviews",
    fields: ["slug", "name", "source", "columns", "filter", "sort", "limit"],
    template: VIEW_TEMPLATE,
    refused: refusedInView,
    redraw: viewFromBox,
    chosen: viewFromBox,
  });
}
