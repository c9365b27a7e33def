// The rows page of the console: a table's rows through the Data API with
// paging, sorting, a filter builder, insert, inline edits and delete; a
// refused write shows its reason next to the cell or the new row.
"use strict";

const PAGE = 50;
const NUMERIC = /^(smallint|integer|bigint|numeric|real|double precision)/;
const OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "isNull"];
const grid = { schema: "", table: "", columns: [], key: [], offset: 0, sort: "", filter: null };

function dataPath(suffix) {
  return `/api/data/${encodeURIComponent(grid.schema)}/${encodeURIComponent(grid.table)}${suffix || ""}`;
}

// Text typed in a cell as the JSON value its column takes: empty is null.
function valueOf(column, text) {
  if (text === "") return null;
  if (NUMERIC.test(column.dataType) && text.trim() !== "" && !Number.isNaN(Number(text))) return Number(text);
  if (column.dataType === "boolean" && (text === "true" || text === "false")) return text === "true";
  if (/^jsonb?$/.test(column.dataType)) { try { return JSON.parse(text); } catch { return text; } }
  return text;
}

function shown(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function keyOf(row) {
  return grid.key.map((name) => encodeURIComponent(shown(row[name]))).join(",");
}

// Turns a cell into an input; Enter saves, Escape cancels.
function edit(cell, row, column) {
  if (cell.querySelector("input")) return;
  const field = element("input", null, { "aria-label": `${column.name} of row ${keyOf(row)}`, autocomplete: "off" });
  field.value = shown(row[column.name]);
  cell.replaceChildren(field);
  field.focus();
  field.addEventListener("keydown", async (event) => {
    if (event.key === "Escape") { cell.replaceChildren(shown(row[column.name])); cell.focus(); return; }
    if (event.key !== "Enter") return;
    event.preventDefault();
    const result = await call("PATCH", dataPath("/" + keyOf(row)), { [column.name]: valueOf(column, field.value) });
    if (!result) return;
    if (result.status !== 200) {
      field.setAttribute("aria-invalid", "true");
      cell.querySelector(".cell-error")?.remove();
      cell.append(element("span", firstError(result).message, { class: "cell-error", role: "alert" }));
      return;
    }
    Object.assign(row, result.answer.data);
    cell.replaceChildren(shown(row[column.name]));
    cell.focus();
  });
}

function dataRow(row) {
  const tr = element("tr");
  for (const column of grid.columns) {
    const cell = element("td", shown(row[column.name]), { tabindex: "0", "data-column": column.name });
    cell.addEventListener("click", () => edit(cell, row, column));
    cell.addEventListener("keydown", (event) => { if (event.key === "Enter" && event.target === cell) edit(cell, row, column); });
    tr.append(cell);
  }
  const remove = element("button", "Delete", { type: "button", class: "link", "aria-label": `Delete row ${keyOf(row)}` });
  remove.addEventListener("click", async () => {
    const result = await call("DELETE", dataPath("/" + keyOf(row)));
    if (result && result.status !== 204) return showAlert("grid-error", firstError(result).message);
    await load();
  });
  const last = element("td");
  last.append(remove);
  tr.append(last);
  return tr;
}

// The first row: a field per column and Insert.
function newRow() {
  const tr = element("tr", null, { class: "new-row" });
  for (const column of grid.columns) {
    const td = element("td");
    td.append(element("input", null, { "data-column": column.name, "aria-label": `New ${column.name}`, autocomplete: "off",
      placeholder: column.identity || column.default ? "(default)" : column.name }));
    tr.append(td);
  }
  const insert = element("button", "Insert", { type: "button", id: "insert" });
  insert.addEventListener("click", async () => {
    const data = {};
    for (const column of grid.columns) {
      const text = tr.querySelector(`[data-column="${column.name}"]`).value;
      if (text !== "") data[column.name] = valueOf(column, text);
    }
    const result = await call("POST", dataPath(), data);
    if (!result) return;
    if (result.status !== 201) return showAlert("grid-error", firstError(result).message);
    showAlert("grid-error", "");
    await load();
  });
  const td = element("td");
  td.append(insert);
  tr.append(td);
  return tr;
}

function header() {
  const tr = element("tr");
  for (const column of grid.columns) {
    const descending = grid.sort === "-" + column.name;
    const ascending = grid.sort === column.name;
    const th = element("th", null, { "aria-sort": ascending ? "ascending" : descending ? "descending" : "none" });
    const button = element("button", column.name + (ascending ? " ▲" : descending ? " ▼" : ""), { type: "button", class: "link" });
    button.addEventListener("click", () => { grid.sort = ascending ? "-" + column.name : column.name; grid.offset = 0; load(); });
    th.append(button);
    tr.append(th);
  }
  tr.append(element("th", ""));
  return tr;
}

async function load() {
  const query = new URLSearchParams({ limit: String(PAGE), offset: String(grid.offset), count: "exact" });
  if (grid.sort) query.set("sort", grid.sort);
  if (grid.filter) query.set("filter", JSON.stringify(grid.filter));
  const result = await api(dataPath("?" + query));
  if (!result) return;
  const table = document.getElementById("grid");
  if (result.status === 404 || result.status === 405) {
    document.getElementById("not-exposed").hidden = false;
    table.hidden = true;
    return;
  }
  if (result.status !== 200) return showAlert("grid-error", firstError(result).message);
  const rows = result.answer.data;
  const total = result.answer.meta.total;
  table.tHead.replaceChildren(header());
  table.tBodies[0].replaceChildren(newRow(), ...rows.map(dataRow));
  document.getElementById("count").textContent =
    total ? `Rows ${grid.offset + 1}–${grid.offset + rows.length} of ${total}` : "No rows";
  document.getElementById("prev").disabled = grid.offset === 0;
  document.getElementById("next").disabled = grid.offset + rows.length >= total;
}

async function rowsPage() {
  const parts = location.pathname.split("/").filter(Boolean);
  [grid.schema, grid.table] = parts.slice(-2).map(decodeURIComponent);
  document.getElementById("title").textContent = `${grid.schema}.${grid.table}`;
  document.getElementById("tables-link").href = BASE + "/admin/tables";
  const tables = await api(`/admin/api/schema/${encodeURIComponent(grid.schema)}/tables`);
  if (!tables) return;
  const info = tables.status === 200 && tables.answer.data.find((t) => t.name === grid.table);
  if (!info) return showAlert("grid-error", "No such table.");
  grid.columns = info.columns;
  grid.key = info.columns.filter((c) => c.primaryKey).map((c) => c.name);
  const columnSelect = document.getElementById("filter-column");
  for (const column of grid.columns) columnSelect.append(element("option", column.name, { value: column.name }));
  const opSelect = document.getElementById("filter-op");
  for (const op of OPERATORS) opSelect.append(element("option", op, { value: op }));
  document.getElementById("filter").addEventListener("submit", (event) => {
    event.preventDefault();
    const column = grid.columns.find((c) => c.name === columnSelect.value);
    const text = document.getElementById("filter-value").value;
    const value = opSelect.value === "isNull" ? text !== "false" : valueOf(column, text);
    grid.filter = { [column.name]: { [opSelect.value]: value } };
    grid.offset = 0;
    load();
  });
  document.getElementById("filter-clear").addEventListener("click", () => { grid.filter = null; grid.offset = 0; load(); });
  document.getElementById("prev").addEventListener("click", () => { grid.offset = Math.max(0, grid.offset - PAGE); load(); });
  document.getElementById("next").addEventListener("click", () => { grid.offset += PAGE; load(); });
  await load();
}
