// The audit log page: entries newest first, filtered by action and actor,
// 50 at a time with Older for the next page (the `before` cursor).
"use strict";

const AUDIT_PAGE = 50;

let auditEntries = [];

async function loadAudit(more) {
  showAlert("audit-error", "");
  const query = new URLSearchParams({ limit: String(AUDIT_PAGE) });
  const action = document.getElementById("audit-action").value.trim();
  const actor = document.getElementById("audit-actor").value.trim();
  if (action) query.set("action", action);
  if (actor) query.set("actorId", actor);
  if (more && auditEntries.length) query.set("before", auditEntries[auditEntries.length - 1].id);
  const result = await api(`/admin/api/audit?${query}`);
  if (!result) return;
  if (result.status !== 200) return showAlert("audit-error", refusal(result));
  const page = result.answer.data;
  auditEntries = more ? auditEntries.concat(page) : page;
  const actions = new Set(auditEntries.map((e) => e.action));
  document.getElementById("audit-actions").replaceChildren(...[...actions].sort().map((a) => element("option", null, { value: a })));
  document.getElementById("audit").replaceChildren(auditEntries.length
    ? dataTable(["at", "action", "actor", "target", "details", "ip"], auditEntries.map((e) =>
      [new Date(e.at).toLocaleString(), e.action, e.actorId && `${e.actorType} ${e.actorId}`, e.target, e.details, e.ip]))
    : element("p", "No entries.", { class: "empty" }));
  document.getElementById("audit-older").hidden = page.length < AUDIT_PAGE;
  // What the entries shown are filtered by.
  document.getElementById("audit").dataset.action = action;
}

function auditPage() {
  document.getElementById("audit-filter").addEventListener("submit", (event) => { event.preventDefault(); loadAudit(false); });
  document.getElementById("audit-older").addEventListener("click", () => loadAudit(true));
  loadAudit(false);
}
