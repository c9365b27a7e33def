// The workflows page of the console: a workflow's definition edited as JSON
// (console.js's definition editor), enabled or not, its draft run in test
// mode with an input, and its runs, newest first, with each step's result.
"use strict";

const WORKFLOW_TEMPLATE = {
  slug: "hello",
  name: "Hello",
  trigger: { type: "webhook", method: "POST", response: "sync", access: "authenticated" },
  steps: [
    { id: "greet", type: "transform", output: { hello: "{{start.data.body.name}}" } },
    { id: "done", type: "finish", result: "{{steps.greet.result}}" },
  ],
};

let workflows;

function runEntry(run) {
  const entry = element("details", null, { "data-run": run.id, "data-status": run.status });
  const when = new Date(run.startedAt).toLocaleString();
  entry.append(element("summary", `${run.status}${run.test ? " (test)" : ""} — ${when}${run.error ? ` — ${run.error.code}: ${run.error.message}` : ""}`));
  entry.append(element("p", "Input"), element("pre", JSON.stringify(run.input, null, 2)));
  entry.append(dataTable(["step", "type", "status", "result", "error"], run.steps.map((step) =>
    [step.id, step.type, step.status, step.result, step.error && `${step.error.code}: ${step.error.message}`])));
  entry.append(element("p", "Result"), element("pre", JSON.stringify(run.result, null, 2)));
  return entry;
}

async function loadRuns() {
  const box = document.getElementById("runs");
  const workflow = workflows.current();
  if (!workflow) return box.replaceChildren(element("p", "Save the workflow to run it.", { class: "empty" }));
  const result = await api(`/admin/api/workflows/${workflow.id}/runs?limit=20`);
  if (!result) return;
  if (result.status !== 200) return box.replaceChildren(element("p", refusal(result), { class: "widget-error" }));
  const runs = result.answer.data;
  box.replaceChildren(...(runs.length ? runs.map(runEntry) : [element("p", "No runs yet.", { class: "empty" })]));
}

async function runTest(event) {
  event.preventDefault();
  showAlert("test-error", "");
  const workflow = workflows.current();
  if (!workflow) return showAlert("test-error", "Save the workflow first.");
  const input = jsonOf("test-input", "test-error");
  if (input === undefined) return;
  const result = await call("POST", `/admin/api/workflows/${workflow.id}/test`, input || {});
  if (!result) return;
  if (result.status !== 200) return showAlert("test-error", refusal(result));
  const outcome = document.getElementById("test-outcome");
  outcome.textContent = JSON.stringify(result.answer.data, null, 2);
  outcome.dataset.status = result.answer.data.status;
  outcome.hidden = false;
  await loadRuns();
}

function workflowsPage() {
  const enabled = document.getElementById("enabled");
  workflows = definitionEditor({
    path: "/admin/api/workflows",
    fields: ["slug", "name", "trigger", "steps"],
    template: WORKFLOW_TEMPLATE,
    chosen: (workflow) => {
      enabled.disabled = !workflow;
      enabled.checked = !!workflow && workflow.enabled;
      document.getElementById("test-outcome").hidden = true;
      loadRuns();
    },
  });
  enabled.addEventListener("change", async () => {
    const result = await call("PATCH", `/admin/api/workflows/${workflows.current().id}`, { enabled: enabled.checked });
    if (result && result.status !== 200) { enabled.checked = !enabled.checked; return showStatus(refusal(result)); }
    showStatus(enabled.checked ? "Enabled." : "Disabled.");
    await workflows.reload();
  });
  document.getElementById("test").addEventListener("submit", runTest);
  document.getElementById("refresh-runs").addEventListener("click", loadRuns);
}
