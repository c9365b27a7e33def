// The grants page of the console: every role's grants on every table as a
// matrix (a toggle per action, the row filter edited in place) and on every
// registered database function (one invoke toggle), a role's
// grants on resources, workflows and DataViews, a new grant with its row
// filter (both built with the rules of filters.js, the variables offered),
// removal, and a preview of a table as a member of the role reads it.
"use strict";

const ACTIONS = { resource: ["read", "create", "update", "delete"], workflow: ["invoke"], dataView: ["read"], function: ["invoke"] };

// A table's or a function's name as `schema.name`.
function qualified(resource) {
  return `${resource.schema}.${resource.kind === "function" ? resource.function : resource.table}`;
}

// What a grant can be on, by id: { kind, label, columns() }.
const targets = new Map();
let newFilter;
let matrixFilter;

function selectedRole() {
  return document.getElementById("grant-role").value;
}

function grantRow(grant) {
  const id = grant.resourceId || grant.workflowId || grant.dataViewId;
  const on = targets.get(id)?.label || id;
  const tr = element("tr", null, { "data-grant": `${on} ${grant.action}` });
  tr.append(element("td", on), element("td", grant.action),
    element("td", grant.filter ? JSON.stringify(grant.filter) : "every row"),
    element("td", grant.columns ? grant.columns.join(", ") : "all"));
  const remove = element("button", "Remove", { type: "button", "aria-label": `Remove ${grant.action} on ${on}` });
  remove.addEventListener("click", async () => {
    const result = await call("DELETE", `/admin/api/grants/${grant.id}`);
    if (result && result.status !== 204) return showStatus(refusal(result));
    await refreshAll();
  });
  const cell = element("td");
  cell.append(remove);
  tr.append(cell);
  return tr;
}

// ---- The matrix: roles by tables and actions -----------------------------

const MATRIX = { roles: [], tables: [], functions: [], grants: [] };
// The grant the matrix's panel shows; the one last asked for.
let editing = null;
let opening = null;

/// The toggle of `action` on `table` for `role`, marked when granted;
/// pressed, it grants the action (after a confirmation for a write), edits
/// the grant's row filter, or, when the cell holds several grants, shows
/// them in the role's list below.
function toggle(role, table, action) {
  const grants = MATRIX.grants.filter((g) => g.roleId === role.id && g.resourceId === table.id && g.action === action);
  const everyRow = grants.some((g) => !g.filter && !g.columns);
  const letter = action[0].toUpperCase();
  const name = qualified(table);
  const state = !grants.length ? "not granted" : everyRow ? "granted on every row" : "granted, limited";
  const label = `${letter}: ${action} on ${name} for ${role.name}, ${state}${grants.length > 1 ? ` (${grants.length} grants)` : ""}`;
  const attributes = { type: "button", class: "toggle", "aria-label": label, title: label,
    "data-cell": `${role.name} ${name} ${action}` };
  if (grants.length) attributes["data-granted"] = everyRow ? "every-row" : "limited";
  const button = element("button", letter + (grants.length && !everyRow ? "•" : "") + (grants.length > 1 ? `×${grants.length}` : ""), attributes);
  button.addEventListener("click", async () => {
    if (grants.length > 1) {
      document.getElementById("grant-role").value = role.id;
      await selectRole();
      document.getElementById("grants-title").scrollIntoView({ block: "start" });
      return showStatus(`${role.name} holds ${grants.length} ${action} grants on ${name}: they add up; edit them in the list.`);
    }
    // A function's grant has no filter to edit: pressed again, it goes.
    if (grants.length && table.kind === "function") {
      if (!confirm(`Stop ${role.name} calling ${name}?`)) return;
      const removed = await call("DELETE", `/admin/api/grants/${grants[0].id}`);
      if (removed && removed.status !== 204) return showStatus(refusal(removed));
      showStatus(`${role.name} may no longer call ${name}.`);
      await refreshAll();
      document.querySelector(`[data-cell="${CSS.escape(button.dataset.cell)}"]`)?.focus();
      return;
    }
    if (grants.length) return editGrant(grants[0], label, button.dataset.cell);
    const question = table.kind === "function" ? `Let ${role.name} call ${name}?` : `Let ${role.name} ${action} every row of ${name}?`;
    if (action !== "read" && !confirm(question)) return;
    const result = await call("POST", "/admin/api/grants", { roleId: role.id, resourceId: table.id, action });
    if (!result) return;
    if (result.status !== 201) return showStatus(refusal(result));
    showStatus(`Granted ${action} on ${name} to ${role.name}.`);
    await refreshAll();
    document.querySelector(`[data-cell="${CSS.escape(button.dataset.cell)}"]`)?.focus();
  });
  return button;
}

/// Opens the in-place editor of `grant`'s row filter (`cell`: the toggle
/// focus goes back to).
async function editGrant(grant, label, cell) {
  const mine = { grant, cell };
  opening = mine;
  const table = MATRIX.tables.find((t) => t.id === grant.resourceId);
  const columns = table ? await columnsOfTable(table.schema, table.table) : [];
  // Another cell opened meanwhile: it is the one edited. Until its columns
  // are read, Save and Remove still act on the grant the panel shows.
  if (opening !== mine) return;
  editing = mine;
  matrixFilter.columns(columns);
  matrixFilter.set(grant.filter ?? null);
  document.getElementById("matrix-edit").hidden = false;
  document.getElementById("matrix-edit-title").textContent = label;
  showAlert("matrix-error", "");
  document.querySelector("#matrix-filter select, #matrix-filter button")?.focus();
}

function closeEditor() {
  const cell = editing?.cell;
  editing = null;
  document.getElementById("matrix-edit").hidden = true;
  if (cell) document.querySelector(`[data-cell="${CSS.escape(cell)}"]`)?.focus();
}

/// A changed filter is a new grant (refused: the old one stays), then the
/// old one removed; between the two the role holds both (they add up).
async function saveFilter() {
  showAlert("matrix-error", "");
  const filter = matrixFilter.value();
  if (filter === undefined) return showAlert("matrix-error", matrixFilter.problem());
  if (!editing) return;
  const save = document.getElementById("matrix-save");
  save.disabled = true;
  try {
    const old = editing.grant;
    const data = { roleId: old.roleId, resourceId: old.resourceId, action: old.action };
    if (filter !== null) data.filter = filter;
    if (old.columns) data.columns = old.columns;
    const made = await call("POST", "/admin/api/grants", data);
    if (!made) return;
    if (made.status !== 201) {
      matrixFilter.refuse(refusal(made));
      return showAlert("matrix-error", refusal(made));
    }
    const removed = await call("DELETE", `/admin/api/grants/${old.id}`);
    if (!removed || removed.status !== 204) {
      await refreshAll();
      return showAlert("matrix-error", `The new filter is granted, but the old grant could not be removed, so the role holds both: ${removed ? refusal(removed) : "no answer"}. Remove it in the list below.`);
    }
    showStatus("The row filter is saved.");
    closeEditor();
    await refreshAll();
  } finally {
    save.disabled = false;
  }
}

async function removeEdited() {
  if (!editing) return;
  const result = await call("DELETE", `/admin/api/grants/${editing.grant.id}`);
  if (result && result.status !== 204) return showAlert("matrix-error", refusal(result));
  showStatus("The grant is removed.");
  closeEditor();
  await refreshAll();
}

function drawMatrix() {
  const table = document.getElementById("matrix");
  const head = element("tr");
  head.append(element("th", "Table or function", { scope: "col" }));
  for (const role of MATRIX.roles) {
    const th = element("th", null, { scope: "col" });
    const pick = element("button", role.name, { type: "button", class: "link", "aria-label": `Show the grants of ${role.name}` });
    pick.addEventListener("click", () => {
      document.getElementById("grant-role").value = role.id;
      selectRole();
      document.getElementById("grants-title").scrollIntoView({ block: "start" });
    });
    th.append(pick);
    head.append(th);
  }
  table.tHead.replaceChildren(head);
  const body = table.tBodies[0];
  body.replaceChildren();
  const nothing = !MATRIX.tables.length && !MATRIX.functions.length;
  if (!MATRIX.roles.length || nothing) {
    const row = element("tr");
    row.append(element("td", nothing ? "No tables yet: create one on the Tables page." : "No role but Administrators: add one on the Users and roles page.", { colspan: String(MATRIX.roles.length + 1), class: "empty" }));
    body.append(row);
    return;
  }
  for (const resource of [...MATRIX.tables, ...MATRIX.functions]) {
    const row = element("tr");
    row.append(element("th", qualified(resource) + (resource.kind === "function" ? "()" : ""), { scope: "row" }));
    for (const role of MATRIX.roles) {
      const cell = element("td", null, { class: "toggles" });
      cell.append(...ACTIONS[resource.kind === "function" ? "function" : "resource"].map((action) => toggle(role, resource, action)));
      row.append(cell);
    }
    body.append(row);
  }
}

async function loadMatrix() {
  const result = await api("/admin/api/grants");
  if (!result) return;
  if (result.status !== 200) return showStatus(refusal(result));
  MATRIX.grants = result.answer.data;
  drawMatrix();
}

async function refreshAll() {
  await Promise.all([loadMatrix(), loadGrants()]);
}

async function loadGrants() {
  const result = await api(`/admin/api/grants?roleId=${encodeURIComponent(selectedRole())}`);
  if (!result) return;
  if (result.status !== 200) return showStatus(refusal(result));
  const body = document.querySelector("#grants tbody");
  body.replaceChildren(...result.answer.data.map(grantRow));
  if (!result.answer.data.length) {
    const empty = element("tr");
    empty.append(element("td", "No grants: members read nothing through the Data API.", { colspan: "5", class: "empty" }));
    body.append(empty);
  }
}

async function loadMembers() {
  const select = document.getElementById("preview-user");
  const result = await api(`/admin/api/roles/${encodeURIComponent(selectedRole())}/members`);
  const members = result && result.status === 200 ? result.answer.data : [];
  select.replaceChildren(element("option", "nobody", { value: "" }),
    ...members.map((user) => element("option", user.email, { value: user.id })));
}

// The actions and the filter's columns of the target chosen.
let targetChosen = 0;
async function fillActions() {
  const serial = ++targetChosen;
  const target = targets.get(document.getElementById("grant-target").value);
  const kind = target?.kind || "resource";
  document.getElementById("grant-action").replaceChildren(...ACTIONS[kind].map((a) => element("option", a, { value: a })));
  document.getElementById("grant-filter-box").hidden = kind === "workflow" || kind === "function";
  const columns = target ? await target.columns() : [];
  // A target chosen since: its columns are the ones shown.
  if (serial === targetChosen) newFilter.columns(columns);
}

async function loadTargets() {
  const [resources, workflows, views] = await Promise.all(
    ["/admin/api/resources", "/admin/api/workflows", "/admin/api/dataviews"].map(api));
  const target = document.getElementById("grant-target");
  const groups = [];
  const add = (kind, title, items, label, columns) => {
    const group = element("optgroup", null, { label: title });
    for (const item of items) {
      targets.set(item.id, { kind, label: label(item), columns: () => columns(item) });
      group.append(element("option", label(item), { value: item.id }));
    }
    groups.push(group);
  };
  const tables = (resources?.answer?.data || []).filter((r) => r.kind === "table");
  MATRIX.tables = tables.filter((r) => r.schema !== "svc");
  add("resource", "Tables", tables, (r) => `${r.schema}.${r.table}`, (r) => columnsOfTable(r.schema, r.table));
  MATRIX.functions = (resources?.answer?.data || []).filter((r) => r.kind === "function");
  add("function", "Functions", MATRIX.functions, (f) => `function ${qualified(f)}`, async () => []);
  add("workflow", "Workflows", workflows?.answer?.data || [], (w) => `workflow ${w.slug}`, async () => []);
  // A DataView grant's filter is over the view's output columns: a count
  // is a number; the others are sent as typed, which the server reads.
  add("dataView", "DataViews", views?.answer?.data || [], (v) => `view ${v.slug}`,
    async (v) => (Array.isArray(v.columns) ? v.columns : []).map((c) => ({ name: c.name, dataType: c.agg === "count" ? "bigint" : "" })));
  target.replaceChildren(...groups);
  await fillActions();
  document.getElementById("preview-table").replaceChildren(...tables.filter((r) => r.exposedMethods.includes("GET"))
    .map((r) => element("option", `${r.schema}.${r.table}`, { value: `${r.schema}/${r.table}` })));
}

async function addGrant(event) {
  event.preventDefault();
  showAlert("grant-error", "");
  const id = document.getElementById("grant-target").value;
  const kind = targets.get(id)?.kind;
  if (!kind) return showAlert("grant-error", "Choose what the grant is on.");
  const filter = kind === "workflow" || kind === "function" ? null : newFilter.value();
  if (filter === undefined) return showAlert("grant-error", newFilter.problem());
  // A function is a resource: its grant names it as one.
  const field = kind === "function" ? "resourceId" : `${kind}Id`;
  const data = { roleId: selectedRole(), action: document.getElementById("grant-action").value, [field]: id };
  if (filter !== null) data.filter = filter;
  const columns = document.getElementById("grant-columns").value.split(",").map((c) => c.trim()).filter(Boolean);
  if (columns.length) data.columns = columns;
  const result = await call("POST", "/admin/api/grants", data);
  if (!result) return;
  if (result.status !== 201) {
    if (firstError(result).field?.startsWith("filter")) newFilter.refuse(refusal(result));
    return showAlert("grant-error", refusal(result));
  }
  newFilter.set(null);
  document.getElementById("grant-columns").value = "";
  showStatus(`Granted ${data.action} on ${targets.get(id).label}.`);
  await refreshAll();
}

async function preview(event) {
  event.preventDefault();
  showAlert("preview-error", "");
  const table = document.getElementById("preview-table").value;
  if (!table) return showAlert("preview-error", "No table is exposed for GET yet.");
  const user = document.getElementById("preview-user").value;
  const query = "?limit=50&count=exact" + (user ? "&userId=" + encodeURIComponent(user) : "");
  const result = await api(`/admin/api/roles/${encodeURIComponent(selectedRole())}/preview/${table}${query}`);
  if (!result) return;
  const rows = document.getElementById("preview-rows");
  if (result.status !== 200) {
    rows.replaceChildren();
    document.getElementById("preview-count").textContent = "";
    return showAlert("preview-error", refusal(result));
  }
  const data = result.answer.data;
  document.getElementById("preview-count").textContent = `${data.length} of ${result.answer.meta.total} rows this role reads.`;
  rows.replaceChildren(data.length ? dataTable(Object.keys(data[0]), data) : element("p", "No rows.", { class: "empty" }));
}

async function selectRole() {
  document.getElementById("preview-rows").replaceChildren();
  document.getElementById("preview-count").textContent = "";
  showAlert("preview-error", "");
  await Promise.all([loadGrants(), loadMembers()]);
}

async function grantsPage() {
  const roles = await api("/admin/api/roles");
  if (!roles) return;
  if (roles.status !== 200) return showStatus(refusal(roles));
  const select = document.getElementById("grant-role");
  // Administrators bypass grants; the others are the ones worth granting.
  const listed = roles.answer.data.filter((r) => r.name !== "Administrators");
  MATRIX.roles = listed;
  select.replaceChildren(...listed.map((r) => element("option", r.name, { value: r.id })));
  const wanted = new URLSearchParams(location.search).get("role");
  const chosen = listed.find((r) => r.name === wanted || r.id === wanted);
  if (chosen) select.value = chosen.id;
  select.addEventListener("change", selectRole);
  document.getElementById("grant-target").addEventListener("change", fillActions);
  document.getElementById("new-grant").addEventListener("submit", addGrant);
  document.getElementById("preview").addEventListener("submit", preview);
  newFilter = filterBuilder(document.getElementById("grant-filter"), { name: "Row filter of the new grant" });
  matrixFilter = filterBuilder(document.getElementById("matrix-filter"), { name: "Row filter" });
  document.getElementById("matrix-save").addEventListener("click", saveFilter);
  document.getElementById("matrix-remove").addEventListener("click", removeEdited);
  document.getElementById("matrix-cancel").addEventListener("click", closeEditor);
  await loadTargets();
  await Promise.all([loadMatrix(), selectRole()]);
}
