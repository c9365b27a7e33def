// The rows page of the console: a table's rows through the Data API with
// paging, sorting, the filter builder of filters.js (full-text search
// included), insert, inline edits and delete; a refused write shows its
// reason next to the cell or the new row. Rows changed elsewhere arrive
// through realtime and change in place, marked a moment; a paused
// indicator shows when the stream is refused or lost. Related rows are
// shown through embeds, groups through aggregates, and the rows go out and
// in as CSV (an import with its progress, and its first refused line). A
// row opens in a side panel with its fields and links to its related rows
// both ways, which open this page on the other table filtered to them
// (`?filter=`).
"use strict";

const PAGE = 50;
const grid = { schema: "", table: "", columns: [], key: [], offset: 0, sort: "", filter: null, embeds: [], info: null, total: 0 };
// How long a row changed elsewhere stays marked, in milliseconds.
const MARKED_FOR = 2000;
let rowFilter;

function dataPath(suffix) {
  return `/api/data/${encodeURIComponent(grid.schema)}/${encodeURIComponent(grid.table)}${suffix || ""}`;
}

// Text typed in a cell as the JSON value its column takes: empty is null.
function valueOf(column, text) {
  if (text === "") return null;
  if (/^jsonb?$/.test(column.dataType)) { try { return JSON.parse(text); } catch { return text; } }
  return typedValue(column.dataType, text);
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
  const tr = element("tr", null, { "data-key": keyOf(row) });
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
  for (const embed of grid.embeds) {
    tr.append(element("td", shown(row[embed.alias]), { "data-embed": embed.alias }));
  }
  const open = element("button", "Details", { type: "button", class: "link", "aria-label": `Details of row ${keyOf(row)}` });
  open.addEventListener("click", () => showDetail(row));
  const last = element("td", null, { class: "row-actions" });
  last.append(open, " ", remove);
  tr.append(last);
  tr.row = row;
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
      const text = tr.querySelector(`[data-column="${CSS.escape(column.name)}"]`).value;
      if (text !== "") data[column.name] = valueOf(column, text);
    }
    const result = await call("POST", dataPath(), data);
    if (!result) return;
    if (result.status !== 201) return showAlert("grid-error", firstError(result).message);
    showAlert("grid-error", "");
    await load();
  });
  for (const _ of grid.embeds) tr.append(element("td"));
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
  for (const embed of grid.embeds) tr.append(element("th", embed.alias, { title: embed.spec }));
  tr.append(element("th", ""));
  return tr;
}

// The list route's query for the filter and sort shown.
function listQuery() {
  const query = new URLSearchParams();
  if (grid.sort) query.set("sort", grid.sort);
  if (grid.filter) query.set("filter", JSON.stringify(grid.filter));
  return query;
}

// The table's foreign keys both ways, as embeds to choose from.
function embedChoices(info) {
  const choices = info.foreignKeys.map((key) => ({
    alias: key.targetTable, spec: `${key.targetTable}:${key.column}(*)`,
    label: `${key.column} → ${key.targetSchema}.${key.targetTable}`,
  }));
  for (const key of info.referencedBy) {
    choices.push({ alias: key.table, spec: `${key.table}:${key.schema}.${key.table}!${key.column}(*)`,
      label: `${key.schema}.${key.table} by ${key.column}` });
  }
  return choices;
}

// Groups of the rows shown, with the aggregates typed.
async function group(event) {
  event.preventDefault();
  const query = listQuery();
  query.delete("sort");
  query.set("aggregate", document.getElementById("aggregate").value);
  const by = document.getElementById("group-by").value;
  if (by) query.set("groupBy", by);
  const result = await api(dataPath("?" + query));
  if (!result) return;
  if (result.status !== 200) return showAlert("grid-error", refusal(result));
  showAlert("grid-error", "");
  const groups = result.answer.data;
  const names = groups.length ? Object.keys(groups[0]) : [];
  const table = document.getElementById("group-grid");
  const head = element("tr");
  for (const name of names) head.append(element("th", name));
  table.tHead.replaceChildren(head);
  table.tBodies[0].replaceChildren(...groups.map((row) => {
    const tr = element("tr");
    for (const name of names) tr.append(element("td", shown(row[name])));
    return tr;
  }));
  document.getElementById("groups").hidden = false;
}

// Every row matching the filter, as a CSV file.
async function exportCsv() {
  const token = session();
  if (!token) return;
  const response = await fetch(BASE + dataPath("?" + listQuery()), {
    headers: { Authorization: "Bearer " + token, Accept: "text/csv" },
  });
  if (response.status !== 200) {
    const answer = await response.json().catch(() => null);
    return showAlert("grid-error", firstError({ answer }).message);
  }
  const link = element("a", null, { href: URL.createObjectURL(await response.blob()), download: `${grid.schema}.${grid.table}.csv` });
  document.body.append(link);
  link.click();
  link.remove();
}

// Sends `file` as CSV, showing the upload's progress; answers { status, answer }.
function upload(file, token) {
  const bar = document.getElementById("import-progress");
  bar.hidden = false;
  bar.value = 0;
  return new Promise((resolve) => {
    const request = new XMLHttpRequest();
    request.open("POST", BASE + dataPath());
    request.setRequestHeader("Authorization", "Bearer " + token);
    request.setRequestHeader("Content-Type", "text/csv");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) bar.value = Math.round((event.loaded / event.total) * 100);
    });
    // Sent: the rows are being inserted, for as long as that takes.
    request.upload.addEventListener("load", () => {
      bar.removeAttribute("value");
      document.getElementById("import-result").textContent = `Sent ${file.name}; inserting its rows…`;
    });
    request.addEventListener("loadend", () => {
      bar.hidden = true;
      let answer = null;
      try { answer = JSON.parse(request.responseText); } catch { answer = null; }
      resolve({ status: request.status, answer });
    });
    request.send(file);
  });
}

// Record `number` of the CSV `file` (1 is the header; a quoted field may
// hold line ends), read from its first 16 MiB; undefined past them.
async function lineOfFile(file, number) {
  const text = await file.slice(0, 16 * 1024 * 1024).text();
  let record = 1;
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    else if (c === "\n" && !quoted) {
      if (record === number) return text.slice(start, i).replace(/\r$/, "");
      record += 1;
      start = i + 1;
    }
  }
  return record === number && start < text.length ? text.slice(start) : undefined;
}

// A CSV file's rows, inserted all or none.
async function importCsv(event) {
  const file = event.target.files[0];
  const token = session();
  if (!file || !token) return;
  const status = document.getElementById("import-result");
  const shownLine = document.getElementById("import-line");
  shownLine.hidden = true;
  status.textContent = `Sending ${file.name}…`;
  const { status: code, answer } = await upload(file, token);
  event.target.value = "";
  if (code === 201) {
    status.textContent = `Inserted ${answer.data.inserted} rows from ${file.name}.`;
    showAlert("grid-error", "");
    return load();
  }
  if (code === 401) return signIn();
  status.textContent = "";
  const number = answer?.meta?.line;
  showAlert("grid-error", `Nothing imported. ${number ? `Line ${number}: ` : ""}${refusal({ answer })}`);
  const text = number ? await lineOfFile(file, number) : undefined;
  if (text !== undefined) {
    shownLine.textContent = `${number}: ${text}`;
    shownLine.hidden = false;
  }
}

// The filter the page's address holds (`?filter=`, a link from a related
// row), shown in the builder; none when it is not JSON.
function addressFilter() {
  try {
    return JSON.parse(new URLSearchParams(location.search).get("filter"));
  } catch {
    return null;
  }
}

// The rows page of `schema.table` filtered to `column` = `value`.
function rowsWhere(schema, table, column, value) {
  const filter = JSON.stringify({ [column]: { eq: value } });
  return `${BASE}/admin/rows/${encodeURIComponent(schema)}/${encodeURIComponent(table)}?filter=${encodeURIComponent(filter)}`;
}

// The side panel of a row: every field, and its related rows both ways.
function showDetail(row) {
  const panel = document.getElementById("row-detail");
  document.getElementById("row-detail-title").textContent = `${grid.schema}.${grid.table} ${keyOf(row)}`;
  const fields = document.getElementById("row-fields");
  fields.replaceChildren();
  for (const column of grid.columns) fields.append(element("dt", `${column.name} (${column.dataType})`), element("dd", shown(row[column.name]) || "∅"));
  const related = [];
  for (const fk of grid.info.foreignKeys) {
    if (row[fk.column] === null || row[fk.column] === undefined) continue;
    related.push(link(rowsWhere(fk.targetSchema, fk.targetTable, fk.targetColumn, row[fk.column]),
      `${fk.targetSchema}.${fk.targetTable} where ${fk.targetColumn} = ${shown(row[fk.column])}`));
  }
  for (const fk of grid.info.referencedBy) {
    if (row[fk.targetColumn] === null || row[fk.targetColumn] === undefined) continue;
    related.push(link(rowsWhere(fk.schema, fk.table, fk.column, row[fk.targetColumn]),
      `${fk.schema}.${fk.table} where ${fk.column} = ${shown(row[fk.targetColumn])}`));
  }
  const list = document.getElementById("row-related");
  list.replaceChildren(...related.map((a) => { const li = element("li"); li.append(a); return li; }));
  if (!related.length) list.append(element("li", "No foreign key leads from or to this row.", { class: "empty" }));
  panel.showModal();
}

async function load() {
  const query = listQuery();
  query.set("limit", String(PAGE));
  query.set("offset", String(grid.offset));
  query.set("count", "exact");
  if (grid.embeds.length) query.set("select", ["*", ...grid.embeds.map((e) => e.spec)].join(","));
  const result = await api(dataPath("?" + query));
  if (!result) return;
  const table = document.getElementById("grid");
  if (result.status === 404 || result.status === 405) {
    document.getElementById("not-exposed").hidden = false;
    document.getElementById("live").hidden = true;
    stream?.close();
    table.hidden = true;
    return;
  }
  if (result.status !== 200) return showAlert("grid-error", firstError(result).message);
  const rows = result.answer.data;
  grid.total = result.answer.meta.total;
  grid.shown = rows.length;
  table.tHead.replaceChildren(header());
  table.tBodies[0].replaceChildren(newRow(), ...rows.map(dataRow));
  showCount();
  document.getElementById("prev").disabled = grid.offset === 0;
  document.getElementById("next").disabled = grid.offset + rows.length >= grid.total;
}

function showCount() {
  document.getElementById("count").textContent = grid.total
    ? `Rows ${grid.offset + 1}–${grid.offset + grid.shown} of ${grid.total}` : "No rows";
}

// ---- Live changes ------------------------------------------------------

let stream = null;

// Shows the stream's state: connecting, live, lost (retrying) or refused.
function liveState(state) {
  const texts = {
    connecting: "Connecting to live changes…",
    live: "Live: rows changed elsewhere change here.",
    lost: "Paused: the live stream was lost; reconnecting…",
    refused: "Paused: live changes were refused; the rows shown may be out of date.",
  };
  document.getElementById("live").dataset.state = state;
  document.getElementById("live-text").textContent = texts[state];
  document.getElementById("live-resume").hidden = state !== "refused";
}

// Marks `tr` changed for a moment.
function mark(tr, kind) {
  tr.classList.add("changed", `changed-${kind}`);
  setTimeout(() => tr.classList.remove("changed", `changed-${kind}`), MARKED_FOR);
}

// A change made elsewhere, applied to the rows shown: an update or delete
// of a row shown changes it in place; a new row comes first.
function applyChange(kind, change) {
  const body = document.getElementById("grid").tBodies[0];
  if (!body.rows.length) return;
  // Rows without a key cannot be told apart: the page is read again, once
  // nothing is being typed in the grid.
  if (!grid.key.length) return reloadWhenIdle();
  // An update finds the row by its key before the change.
  const key = keyOf(kind === "update" && change.old ? change.old : change.row);
  const shown = body.querySelector(`tr[data-key="${CSS.escape(key)}"]`);
  if (kind === "delete") {
    if (!shown) return;
    mark(shown, "delete");
    setTimeout(() => shown.remove(), MARKED_FOR);
    grid.total = Math.max(0, grid.total - 1);
    grid.shown = Math.max(0, grid.shown - 1);
    return showCount();
  }
  if (!shown && kind === "update") return;
  if (shown) {
    const row = { ...shown.row, ...change.row };
    // A cell being edited keeps its input: the row takes the change, the
    // cells show it once the edit ends.
    if (shown.querySelector("input")) {
      Object.assign(shown.row, change.row);
      shown.dataset.key = keyOf(shown.row);
      return mark(shown, "update");
    }
    const tr = dataRow(row);
    shown.replaceWith(tr);
    return mark(tr, "update");
  }
  grid.total += 1;
  // New rows come first on the first page, up to a page more than it shows.
  if (grid.offset === 0 && grid.shown < 2 * PAGE) {
    const tr = dataRow(change.row);
    body.rows[0].after(tr);
    grid.shown += 1;
    mark(tr, "insert");
  }
  showCount();
}

// Reads the page again once nothing is being typed in the grid (no input
// focused, no new row half typed).
function reloadWhenIdle() {
  clearTimeout(reloadWhenIdle.timer);
  reloadWhenIdle.timer = setTimeout(() => {
    const typing = [...document.querySelectorAll("#grid input")]
      .some((input) => input === document.activeElement || input.value !== "");
    if (typing) return reloadWhenIdle();
    load();
  }, 300);
}

// Follows the table's changes under the grants of the person signed in,
// with the filter shown.
function follow() {
  stream?.close();
  if (document.getElementById("live").hidden) return;
  const token = session();
  if (!token) return;
  const query = new URLSearchParams({ subscribe: `${grid.schema}.${grid.table}`, access_token: token });
  if (grid.filter) query.set("filter", JSON.stringify(grid.filter));
  const current = new EventSource(`${BASE}/api/realtime?${query}`);
  stream = current;
  liveState("connecting");
  current.addEventListener("open", () => liveState("live"));
  current.addEventListener("error", () => liveState(current.readyState === EventSource.CLOSED ? "refused" : "lost"));
  for (const kind of ["insert", "update", "delete"]) {
    current.addEventListener(kind, (event) => applyChange(kind, JSON.parse(event.data)));
  }
  current.addEventListener("reset", () => load());
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
  grid.info = info;
  grid.filter = addressFilter();
  grid.key = info.columns.filter((c) => c.primaryKey).map((c) => c.name);
  rowFilter = filterBuilder(document.getElementById("filter-builder"), {
    columns: grid.columns, filter: grid.filter, search: true, name: "Row filter", enter: true,
  });
  document.getElementById("filter").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = rowFilter.value();
    if (value === undefined) return showAlert("grid-error", rowFilter.problem());
    grid.filter = value;
    grid.offset = 0;
    load();
    follow();
  });
  document.getElementById("filter-clear").addEventListener("click", () => {
    rowFilter.set(null);
    grid.filter = null;
    grid.offset = 0;
    load();
    follow();
  });
  document.getElementById("live-resume").addEventListener("click", follow);
  const embedSelect = document.getElementById("embed");
  const choices = embedChoices(info);
  choices.forEach((choice, i) => embedSelect.append(element("option", choice.label, { value: String(i) })));
  embedSelect.addEventListener("change", () => {
    const choice = choices[Number(embedSelect.value)];
    if (choice && !grid.embeds.includes(choice)) grid.embeds.push(choice);
    embedSelect.value = "";
    load();
  });
  const groupBy = document.getElementById("group-by");
  for (const column of grid.columns) groupBy.append(element("option", column.name, { value: column.name }));
  document.getElementById("group").addEventListener("submit", group);
  document.getElementById("group-clear").addEventListener("click", () => { document.getElementById("groups").hidden = true; });
  document.getElementById("row-detail-close").addEventListener("click", () => document.getElementById("row-detail").close());
  document.getElementById("export").addEventListener("click", exportCsv);
  document.getElementById("import").addEventListener("change", importCsv);
  document.getElementById("prev").addEventListener("click", () => { grid.offset = Math.max(0, grid.offset - PAGE); load(); });
  document.getElementById("next").addEventListener("click", () => { grid.offset += PAGE; load(); });
  await load();
  follow();
}
