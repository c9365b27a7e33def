// The snapshot page of the console: this instance's configuration
// downloaded, and an uploaded snapshot's changes shown before they apply.
"use strict";

let uploaded = null;

function showSnapshotError(result) {
  const box = document.getElementById("snapshot-error");
  box.textContent = typeof result === "string" ? result : refusal(result);
  box.hidden = false;
}

async function download() {
  const result = await api("/admin/api/snapshot");
  if (!result) return;
  if (result.status !== 200) return showSnapshotError(result);
  const text = JSON.stringify(result.answer.data, null, 2) + "\n";
  const link = document.getElementById("download-link");
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  link.hidden = false;
  link.click();
}

function showSteps(steps, destructive) {
  const list = document.getElementById("steps");
  list.replaceChildren(...steps.map((step) => {
    const item = element("li", `${step.action} ${step.kind} ${step.name}`);
    if (step.adminPower) {
      item.append(" ", element("span", "gives administrator power", { class: "badge" }));
      if (step.adminPowerReason) item.append(element("p", step.adminPowerReason, { class: "reason" }));
    }
    if ("new" in step) item.append(element("pre", `${JSON.stringify(step.old)} → ${JSON.stringify(step.new)}`));
    if (step.sql) item.append(element("pre", step.sql));
    return item;
  }));
  document.getElementById("admin-power").hidden = !steps.some((step) => step.adminPower);
  if (!steps.length) list.append(element("li", "Nothing to change: this instance matches the snapshot.", { class: "empty" }));
  document.getElementById("destructive").hidden = !destructive;
  document.getElementById("apply").disabled = !steps.length;
  document.getElementById("diff").hidden = false;
}

async function diff() {
  document.getElementById("snapshot-error").hidden = true;
  document.getElementById("diff").hidden = true;
  const file = document.getElementById("snapshot-file").files[0];
  if (!file) return;
  try {
    uploaded = JSON.parse(await file.text());
  } catch (error) {
    return showSnapshotError(`Not JSON: ${error.message}`);
  }
  const result = await call("POST", "/admin/api/snapshot/diff", uploaded);
  if (!result) return;
  if (result.status !== 200) return showSnapshotError(result);
  showSteps(result.answer.data.steps, result.answer.data.destructive);
}

async function apply() {
  const allowDestructive = document.getElementById("allow-destructive").checked;
  const allowAdminPower = document.getElementById("allow-admin-power").checked;
  const result = await call("POST", "/admin/api/snapshot/apply", { snapshot: uploaded, allowDestructive, allowAdminPower });
  if (!result) return;
  if (result.status !== 200) return showSnapshotError(result);
  document.getElementById("diff").hidden = true;
  showStatus(`Applied ${result.answer.data.steps.length} changes.`);
}

async function snapshotPage() {
  document.getElementById("download").addEventListener("click", download);
  document.getElementById("snapshot-file").addEventListener("change", diff);
  document.getElementById("apply").addEventListener("click", apply);
}
