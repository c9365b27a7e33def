// Pages of the console under /admin/: the index and the dashboards here, the
// other pages in a script each (tables.js, rows.js, people.js, grants.js,
// access.js, settings.js, audit.js, workflows.js, dataviews.js, sql.js,
// with the shared filters.js and tabs.js where used), loaded before this
// one, which starts the page its <main> names. Each reads
// the APIs with the session of the person signed in through
// /admin/auth/sign-in (kept in sessionStorage), and sends anyone else there.
"use strict";

// Where the service is mounted: "" standalone, the host's prefix when embedded.
const BASE = document.documentElement.dataset.base ?? "";

const SESSION_KEY = "tessera.session";

function signIn() {
  location.assign(BASE + "/admin/auth/sign-in?next=" + encodeURIComponent(location.pathname + location.search));
}

function session() {
  const token = sessionStorage.getItem(SESSION_KEY);
  if (!token) signIn();
  return token;
}

function showStatus(text) {
  const status = document.getElementById("status");
  status.hidden = !text;
  status.textContent = text || "";
}

// GET an API route as the signed-in person; a refused session signs in again.
function api(path) {
  return call("GET", path);
}

// Calls an API route as the signed-in person, with `data` as the body's
// `data` when given; answers { status, answer } (answer: the parsed body).
async function call(method, path, data) {
  const token = session();
  if (!token) return null;
  const headers = { Authorization: "Bearer " + token };
  const init = { method, headers };
  if (data !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify({ data });
  }
  const response = await fetch(BASE + path, init);
  const answer = await response.json().catch(() => null);
  if (response.status === 401) {
    sessionStorage.removeItem(SESSION_KEY);
    signIn();
    return null;
  }
  return { status: response.status, answer };
}

// An error envelope's first error, or a stand-in when the answer has none.
function firstError(result) {
  return result?.answer?.errors?.[0] || { message: "The request failed." };
}

// An error envelope's first error as one line, naming its field.
function refusal(result) {
  const error = firstError(result);
  return error.field ? `${error.message} (${error.field})` : error.message;
}

// Shows `text` in the alert box `id`, or hides it when there is none.
function showAlert(id, text) {
  const box = document.getElementById(id);
  box.textContent = text || "";
  box.hidden = !text;
}

// A value as a cell shows it: JSON for objects, ∅ for null.
function cellText(value) {
  if (value === null || value === undefined) return "∅";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// A table of `rows` (objects, or arrays in the order of `columns`).
function dataTable(columns, rows) {
  const table = element("table");
  const head = element("tr");
  for (const column of columns) head.append(element("th", column, { scope: "col" }));
  const body = element("tbody");
  for (const row of rows) {
    const line = element("tr");
    columns.forEach((column, i) => line.append(element("td", cellText(Array.isArray(row) ? row[i] : row[column]))));
    body.append(line);
  }
  const thead = element("thead");
  thead.append(head);
  table.append(thead, body);
  const box = element("div", null, { class: "scroll", tabindex: "0" });
  box.append(table);
  return box;
}

const NUMERIC_TYPE = /^(smallint|integer|bigint|numeric|real|double precision|decimal)(\(\d+(,\s*\d+)?\))?$/;

// Text typed for a column of `dataType` as the JSON value it stands for: a
// number for a numeric column when the number reads back as the same text
// (else the text, which the server reads exactly), true or false for a
// boolean column, else the text.
function typedValue(dataType, text) {
  const trimmed = text.trim();
  if (NUMERIC_TYPE.test(dataType || "") && trimmed !== "" && String(Number(trimmed)) === trimmed) return Number(trimmed);
  if (dataType === "boolean" && (trimmed === "true" || trimmed === "false")) return trimmed === "true";
  return text;
}

// The columns ({ name, dataType }) of `schema.table`, read once per schema.
const knownColumns = new Map();
async function columnsOfTable(schema, table) {
  const name = `${schema}.${table}`;
  if (!knownColumns.has(name)) {
    const result = await api(`/admin/api/schema/${encodeURIComponent(schema)}/tables`);
    for (const found of result?.status === 200 ? result.answer.data : []) {
      knownColumns.set(`${schema}.${found.name}`, found.columns.map((c) => ({ name: c.name, dataType: c.dataType })));
    }
  }
  return knownColumns.get(name) || [];
}

// Parses the JSON in a text box; marks the box and answers undefined when it does not parse.
function jsonOf(id, alertId) {
  const box = document.getElementById(id);
  const text = box.value.trim();
  box.removeAttribute("aria-invalid");
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch (error) {
    box.setAttribute("aria-invalid", "true");
    showAlert(alertId, `Not JSON: ${error.message}`);
    return undefined;
  }
}

function element(tag, text, attributes) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  return node;
}

/// `control` under its name: a label for one input, a named group for a
/// composite (rows of inputs, a branch of steps); `help` under it.
function field(labelText, control, help) {
  const single = control.matches("input, select, textarea");
  const box = element(single ? "label" : "div", null, single ? { class: "field" } : { class: "field wide", role: "group", "aria-label": labelText });
  box.append(element("span", labelText, { class: "field-name" }), control);
  if (help) box.append(element("small", help, { class: "help" }));
  return box;
}

function link(href, text) {
  return element("a", text, { href });
}

// ---- Definitions (workflows.js, dataviews.js) -----------------------------

// The line of `path` (such as `steps[1].type`, as a refusal's field names it)
// in `value` printed as JSON with two spaces; the deepest part found.
function lineOf(value, path) {
  const want = path.replace(/^data\./, "").replace(/\[(\d+)\]/g, ".$1").split(".").filter(Boolean);
  let line = 0, best = -1, depth = 0;
  const walk = (node, at) => {
    if (!node || typeof node !== "object") return;
    const entries = Array.isArray(node) ? node.map((item, i) => [String(i), item]) : Object.entries(node);
    if (!entries.length) return;
    for (const [key, item] of entries) {
      line += 1;
      const here = [...at, key];
      if (here.length > depth && here.every((part, i) => part === want[i])) { best = line; depth = here.length; }
      walk(item, here);
    }
    line += 1;
  };
  walk(value, []);
  return best;
}

// A collection of definitions (`path`: its Admin API route) edited in the
// text box #definition, which a builder may write into: a list to pick one
// from, its `fields`, Save (create or change), Publish, and a refusal shown
// with the line of the field it names selected. `template`: a new
// definition; `chosen(record)`: told of every record shown; `redraw()`:
// told when unsaved edits are put back in the box after a reload;
// `refused(error)`: told of a refusal of a save. Edits not saved are kept
// through Publish and reloads, and leaving them asks first. Answers the
// record shown and a reload, as functions.
function definitionEditor({ path, fields, template, chosen, redraw = () => {}, refused = () => {} }) {
  const list = document.getElementById("records");
  const box = document.getElementById("definition");
  let records = [];
  let current = null;
  // The box's text as the record shown left it: anything else is an edit.
  let saved = "";
  const dirty = () => box.value !== saved;
  guardUnsaved(dirty);
  const describe = (r) => `${r.name} (${r.slug})${r.published ? "" : " — draft"}`;
  const show = (record) => {
    current = record;
    const shown = record ? Object.fromEntries(fields.map((f) => [f, record[f]])) : template;
    box.value = JSON.stringify(shown, null, 2);
    box.removeAttribute("aria-invalid");
    showAlert("editor-error", "");
    document.getElementById("publish").disabled = !record;
    document.getElementById("state").textContent = !record ? "New, not saved."
      : record.published ? `Published ${new Date(record.publishedAt).toLocaleString()}; saving changes the draft until the next publish.` : "Draft: not served until published.";
    list.value = record ? record.id : "";
    chosen(record);
    saved = box.value;
  };
  // Reads the list again and shows `id`; `keep`: unsaved edits stay.
  const load = async (id, keep) => {
    const edits = keep && dirty() ? box.value : null;
    const result = await api(path);
    if (!result) return;
    if (result.status !== 200) return showStatus(refusal(result));
    records = result.answer.data;
    list.replaceChildren(element("option", "— new —", { value: "" }), ...records.map((r) => element("option", describe(r), { value: r.id })));
    show(records.find((r) => r.id === id) || null);
    if (edits !== null) {
      box.value = edits;
      redraw();
      document.getElementById("state").textContent += " Your edits are not saved yet.";
    }
  };
  const refuse = (result, sent) => {
    const error = firstError(result);
    showAlert("editor-error", refusal(result));
    refused(error);
    if (!error.field) return;
    box.setAttribute("aria-invalid", "true");
    const line = lineOf(sent, error.field);
    if (line < 0) return;
    // Lines are counted on the definition as printed here.
    box.value = JSON.stringify(sent, null, 2);
    const lines = box.value.split("\n");
    const start = lines.slice(0, line).reduce((sum, text) => sum + text.length + 1, 0);
    document.getElementById("editor-error").textContent += ` — line ${line + 1}`;
    if (!box.closest("[hidden]")) box.focus();
    box.setSelectionRange(start, start + lines[line].length);
  };
  list.addEventListener("change", () => {
    if (dirty() && !confirm("You have unsaved edits. Open another and lose them?")) { list.value = current ? current.id : ""; return; }
    show(records.find((r) => r.id === list.value) || null);
  });
  document.getElementById("editor").addEventListener("submit", async (event) => {
    event.preventDefault();
    showAlert("editor-error", "");
    const sent = jsonOf("definition", "editor-error");
    if (sent === undefined) return;
    const result = current ? await call("PATCH", `${path}/${current.id}`, sent) : await call("POST", path, sent);
    if (!result) return;
    if (result.status !== 200 && result.status !== 201) return refuse(result, sent);
    showStatus(`Saved ${result.answer.data.name}.`);
    await load(result.answer.data.id);
  });
  document.getElementById("publish").addEventListener("click", async () => {
    if (dirty() && !confirm("Publish serves the last saved version, without your unsaved edits (they stay here). Publish it?")) return;
    const result = await call("POST", `${path}/${current.id}/publish`);
    if (!result) return;
    if (result.status !== 200) return showAlert("editor-error", refusal(result));
    showStatus(`Published ${result.answer.data.name}.`);
    await load(current.id, true);
  });
  load(new URLSearchParams(location.search).get("id"));
  return { current: () => current, reload: () => load(current && current.id, true) };
}

// ---- Unsaved edits ---------------------------------------------------------

// What tells whether the page holds edits not saved (definitionEditor, the
// settings page).
const unsavedChecks = [];
let leaving = false;

// Registers `dirty`, which answers whether the page holds edits not saved:
// leaving the page then asks first.
function guardUnsaved(dirty) {
  unsavedChecks.push(dirty);
}

function hasUnsaved() {
  return unsavedChecks.some((dirty) => dirty());
}

// A link followed or the page closed with edits not saved asks first: the
// console's own question for links, the browser's for the rest.
function startUnsavedGuard() {
  document.addEventListener("click", (event) => {
    const target = event.target.closest("a[href]");
    if (!target || target.hasAttribute("download") || event.defaultPrevented || !hasUnsaved()) return;
    // A new tab, or a place on this same page, leaves nothing.
    if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    if (target.target && target.target !== "_self") return;
    const to = new URL(target.href, location.href);
    if (to.pathname === location.pathname && to.search === location.search) return;
    if (!confirm("You have unsaved edits. Leave this page and lose them?")) { event.preventDefault(); return; }
    leaving = true;
  });
  window.addEventListener("beforeunload", (event) => {
    if (leaving || !hasUnsaved()) return;
    event.preventDefault();
    event.returnValue = "";
  });
}

// ---- The index page -------------------------------------------------------

// A section of the index: its items, or an empty state saying what to do
// next (`empty`: the text, `next`: a link to where it is done).
function section(title, items, empty, next) {
  const box = element("section");
  box.append(element("h2", title));
  if (!items.length) {
    const state = element("div", null, { class: "empty-state" });
    state.append(element("strong", empty));
    if (next) state.append(next);
    box.append(state);
    return box;
  }
  const list = element("ul");
  for (const item of items) {
    const entry = element("li");
    entry.append(item);
    list.append(entry);
  }
  box.append(list);
  return box;
}

async function indexPage() {
  const person = await me();
  if (!person) return;
  if (person.status !== 200) { showStatus("Your session cannot be read. Sign in again."); return; }
  document.getElementById("who").textContent = `Signed in as ${person.answer.data.email}.`;
  const sections = document.getElementById("sections");
  const dashboards = await api("/admin/api/dashboards");
  if (!dashboards) return;
  if (dashboards.status === 200) {
    const [resources, views, workflows] = await Promise.all(
      ["/admin/api/resources", "/admin/api/dataviews", "/admin/api/workflows"].map(api));
    const tables = (resources?.answer?.data || []).filter((r) => r.kind === "table").map((r) =>
      element("span", `${r.schema}.${r.table}` + (r.exposedMethods.length ? ` (${r.exposedMethods.join(", ")})` : " (hidden)")));
    sections.append(
      section("Dashboards", dashboards.answer.data.map((d) => link(`${BASE}/admin/dashboards/${encodeURIComponent(d.slug)}`, d.name)),
        "No dashboards yet.", link(`${BASE}/admin/help/dataviews`, "How dashboards are made")),
      section("DataViews", (views?.answer?.data || []).map((v) =>
        element("span", `${v.name} — /api/views/${v.slug}` + (v.published ? "" : " (draft)"))), "No DataViews yet.",
        link(`${BASE}/admin/dataviews`, "Define a DataView")),
      section("Tables and resources", tables, "No tables yet.", link(`${BASE}/admin/tables`, "Create your first table")),
      section("Workflows", (workflows?.answer?.data || []).map((w) =>
        element("span", `${w.name} — ${w.slug}` + (w.published ? "" : " (draft)"))), "No workflows yet.",
        link(`${BASE}/admin/workflows`, "Build a workflow")),
      section("API", [link(BASE + "/admin/docs/", "Admin API documentation (Swagger UI)"),
        link(BASE + "/admin/api/openapi", "Admin API OpenAPI document")], ""),
    );
    return;
  }
  const readable = await api("/api/dashboards");
  if (!readable) return;
  const list = readable.status === 200 ? readable.answer.data : [];
  sections.append(section("Dashboards", list.map((d) =>
    link(`${BASE}/admin/dashboards/${encodeURIComponent(d.slug)}`, d.name)), "No dashboard is shared with you yet."));
}

// ---- The dashboard page ---------------------------------------------------

const charts = new Map();

// A bucket's start as its caller reads it: the date, with the time unless midnight.
function label(value) {
  if (typeof value !== "string" || !/^\d{4}-\d\d-\d\dT/.test(value)) return value === null ? "∅" : String(value);
  const time = value.slice(11, 16);
  return time === "00:00" ? value.slice(0, 10) : `${value.slice(0, 10)} ${time}`;
}

function number(value) {
  return typeof value === "number" ? value.toLocaleString() : value === null ? "∅" : String(value);
}

function drawChart(body, widget, rows) {
  const canvas = element("canvas", null, { "aria-label": widget.title || widget.type, role: "img" });
  body.append(canvas);
  const labels = rows.map((row) => label(row[widget.x]));
  const datasets = widget.type === "pie"
    ? [{ label: widget.y[0], data: rows.map((row) => row[widget.y[0]]) }]
    : widget.y.map((y) => ({ label: y, data: rows.map((row) => row[y]) }));
  const chart = new Chart(canvas, {
    type: widget.type,
    data: { labels, datasets },
    options: { responsive: true, maintainAspectRatio: false, animation: false },
  });
  charts.set(widget.id, chart);
}

function drawTable(body, widget, rows) {
  const columns = widget.y.length ? widget.y : Object.keys(rows[0]);
  const table = element("table");
  const head = element("tr");
  for (const column of columns) head.append(element("th", column, { scope: "col" }));
  table.append(head);
  for (const row of rows) {
    const line = element("tr");
    for (const column of columns) line.append(element("td", typeof row[column] === "number" ? number(row[column]) : label(row[column])));
    table.append(line);
  }
  body.append(table);
}

function drawWidget(widget) {
  const box = element("section", null, { class: "widget", "data-widget": widget.id, "data-type": widget.type });
  box.style.gridColumn = `${widget.layout.col + 1} / span ${widget.layout.w}`;
  box.style.gridRow = `${widget.layout.row + 1} / span ${widget.layout.h}`;
  box.append(element("h2", widget.title || ""));
  const body = element("div", null, { class: "body" });
  box.append(body);
  if (widget.error) {
    const text = widget.error.code === "PERMISSION_DENIED"
      ? "You may not read the data of this widget."
      : widget.error.message || "This widget's data cannot be read.";
    body.append(element("p", text, { class: "widget-error", role: "alert", "data-code": widget.error.code }));
  } else if (!widget.rows.length) {
    body.append(element("p", "No data for this period.", { class: "empty" }));
  } else if (widget.type === "number") {
    body.append(element("p", number(widget.rows[0][widget.y[0]]), { class: "number" }));
  } else if (widget.type === "table") {
    drawTable(body, widget, widget.rows);
  } else {
    drawChart(body, widget, widget.rows);
  }
  return box;
}

async function loadDashboard(slug) {
  const read = await api(`/api/dashboards/${encodeURIComponent(slug)}`);
  if (!read) return null;
  if (read.status !== 200) {
    const error = read.answer?.errors?.[0];
    showStatus(read.status === 404 ? "There is no such dashboard." : error?.message || `The dashboard cannot be read (${read.status}).`);
    return null;
  }
  showStatus("");
  const dashboard = read.answer.data;
  document.title = `${dashboard.name} · Tessera`;
  document.getElementById("title").textContent = dashboard.name;
  document.getElementById("zone").textContent = `Times in ${dashboard.zone}.`;
  document.getElementById("updated").textContent = `Updated ${new Date().toLocaleTimeString()}.`;
  for (const chart of charts.values()) chart.destroy();
  charts.clear();
  const grid = document.getElementById("grid");
  grid.replaceChildren(...dashboard.widgets.map(drawWidget));
  document.getElementById("empty").hidden = dashboard.widgets.length > 0;
  return dashboard;
}

async function dashboardPage() {
  const slug = decodeURIComponent(location.pathname.split("/").filter(Boolean).pop());
  document.getElementById("refresh").addEventListener("click", () => loadDashboard(slug));
  const dashboard = await loadDashboard(slug);
  if (dashboard && dashboard.refreshSeconds) {
    setInterval(() => loadDashboard(slug), dashboard.refreshSeconds * 1000);
  }
}

async function signOut() {
  if (hasUnsaved() && !confirm("You have unsaved edits. Sign out and lose them?")) return;
  leaving = true;
  const token = sessionStorage.getItem(SESSION_KEY);
  if (token) await fetch(BASE + "/api/auth/logout", { method: "POST", headers: { Authorization: "Bearer " + token } }).catch(() => null);
  sessionStorage.removeItem(SESSION_KEY);
  signIn();
}

// ---- The shell: navigation, the person signed in, the theme --------------

const THEME_KEY = "tessera.theme";
const THEMES = ["system", "light", "dark"];

// Applies the theme kept in localStorage ("system" follows the system's).
function applyTheme(theme) {
  if (theme === "system") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.dataset.theme = theme;
  document.getElementById("theme").textContent = `Theme: ${theme}`;
}

// The person signed in, read once per page (the index reads it too).
let mePromise = null;
function me() {
  mePromise = mePromise || api("/api/auth/me");
  return mePromise;
}

async function showPerson() {
  const result = await me();
  if (!result || result.status !== 200) return;
  const { email, name } = result.answer.data;
  const badge = element("span", (name || email).slice(0, 1).toUpperCase(), { class: "avatar", "aria-hidden": "true" });
  document.getElementById("whoami").replaceChildren(badge, element("span", name ? `${name} (${email})` : email));
}

function startShell(page) {
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav.split(" ").includes(page)) link.setAttribute("aria-current", "page");
  }
  const menu = document.getElementById("menu");
  menu.addEventListener("click", () => {
    const open = menu.getAttribute("aria-expanded") !== "true";
    menu.setAttribute("aria-expanded", String(open));
    menu.closest(".sidebar").classList.toggle("open", open);
  });
  let theme = localStorage.getItem(THEME_KEY);
  if (!THEMES.includes(theme)) theme = "system";
  applyTheme(theme);
  document.getElementById("theme").addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    localStorage.setItem(THEME_KEY, theme);
    applyTheme(theme);
  });
  document.getElementById("sign-out").addEventListener("click", signOut);
  startUnsavedGuard();
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.querySelector("main").dataset.page;
  startShell(page);
  if (!session()) return;
  showPerson();
  // A page's script declares `<page>Page` (peoplePage in people.js, ...);
  // the documentation pages have none.
  const start = window[`${page}Page`];
  if (start) start();
});
