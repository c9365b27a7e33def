// The workflows page of the console: a workflow's definition edited as JSON
// (console.js's definition editor), enabled or not, a schedule trigger with
// its next five runs, its draft run in test mode or its published version
// run now, and its runs, newest first, with each step's result, attempts and
// child runs, and a Replay button.
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

const NO_USER = "00000000-0000-0000-0000-000000000000";

/// A step's attempts as text: one line per attempt.
function attemptsOf(step) {
  return (step.attempts || []).map((a, n) => `${n + 1}: ${a.error ? a.error.code : "ok"}`).join("\n");
}

function runEntry(run) {
  const entry = element("details", null, { "data-run": run.id, "data-status": run.status });
  const when = new Date(run.startedAt).toLocaleString();
  const origin = run.parentRunId ? ` — child of ${run.parentRunId}` : run.scheduledAt ? ` — tick ${run.scheduledAt}` : "";
  entry.append(element("summary", `${run.status}${run.test ? " (test)" : ""} — ${when}${origin}${run.error ? ` — ${run.error.code}: ${run.error.message}` : ""}`));
  const replay = element("button", "Replay", { type: "button", "data-replay": run.id });
  replay.addEventListener("click", () => replayRun(run.id));
  entry.append(element("p", null, { class: "actions" }));
  entry.lastChild.append(replay);
  entry.append(element("p", "Input"), element("pre", JSON.stringify(run.input, null, 2)));
  entry.append(dataTable(["step", "type", "iteration", "status", "attempts", "child run", "result", "error"], run.steps.map((step) =>
    [step.id, step.type, (step.iteration || []).join("."), step.status, attemptsOf(step), step.childRunId || "",
      step.result, step.error && `${step.error.code}: ${step.error.message}`])));
  entry.append(element("p", "Result"), element("pre", JSON.stringify(run.result, null, 2)));
  return entry;
}

async function started(result, errorBox) {
  if (!result) return;
  if (result.status !== 202) return showAlert(errorBox, refusal(result));
  showStatus(`Run ${result.answer.data.run.id} started.`);
  await loadRuns();
}

async function replayRun(id) {
  const workflow = workflows.current();
  await started(await call("POST", `/admin/api/workflows/${workflow.id}/runs/${id}/replay`), "test-error");
}

async function runNow() {
  showAlert("test-error", "");
  const workflow = workflows.current();
  if (!workflow) return showAlert("test-error", "Save and publish the workflow first.");
  const input = jsonOf("test-input", "test-error");
  if (input === undefined) return;
  await started(await call("POST", `/admin/api/workflows/${workflow.id}/run`, { input: (input || {}).body ?? {} }), "test-error");
}

/// The trigger in the editor, or null when its JSON does not parse.
function editedTrigger() {
  try { return JSON.parse(document.getElementById("definition").value).trigger || null; } catch { return null; }
}

/// The schedule trigger the fields describe, over the one in the editor.
function scheduleTrigger() {
  const edited = editedTrigger() || {};
  const trigger = { type: "schedule", cron: document.getElementById("cron").value.trim(),
    executeAs: edited.executeAs || NO_USER };
  const zone = document.getElementById("timezone").value.trim();
  if (zone) trigger.timezone = zone;
  if (edited.catchUp) trigger.catchUp = true;
  return trigger;
}

let previewing = 0;

/// Shows the next five runs of the schedule in the fields, or why it is refused.
async function previewSchedule() {
  const list = document.getElementById("next-runs");
  showAlert("schedule-error", "");
  if (!document.getElementById("cron").value.trim()) return list.replaceChildren();
  const mine = ++previewing;
  const result = await call("POST", "/admin/api/workflows/schedule-preview", { trigger: scheduleTrigger() });
  if (!result || mine !== previewing) return;
  if (result.status !== 200) { list.replaceChildren(); return showAlert("schedule-error", refusal(result)); }
  list.replaceChildren(...result.answer.data.next.map((at) =>
    element("li", `${new Date(at).toLocaleString()} (${at})`, { "data-at": at })));
}

/// Fills the schedule fields from the editor's trigger.
function showSchedule() {
  const trigger = editedTrigger();
  const schedule = trigger && trigger.type === "schedule";
  document.getElementById("cron").value = schedule ? trigger.cron : "";
  document.getElementById("timezone").value = schedule ? trigger.timezone || "" : "";
  previewSchedule();
}

/// Writes the schedule fields into the editor's trigger.
function useSchedule(event) {
  event.preventDefault();
  const box = document.getElementById("definition");
  let definition;
  try { definition = JSON.parse(box.value); } catch { return showAlert("schedule-error", "The definition is not valid JSON."); }
  const trigger = scheduleTrigger();
  if (trigger.executeAs === NO_USER) trigger.executeAs = "<the id of the user runs act as>";
  definition.trigger = trigger;
  box.value = JSON.stringify(definition, null, 2);
  showStatus("The trigger is the schedule; save to keep it.");
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
      showSchedule();
      loadRuns();
    },
  });
  let typing;
  for (const id of ["cron", "timezone"]) {
    document.getElementById(id).addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(previewSchedule, 250);
    });
  }
  document.getElementById("schedule").addEventListener("submit", useSchedule);
  document.getElementById("run-now").addEventListener("click", runNow);
  enabled.addEventListener("change", async () => {
    const result = await call("PATCH", `/admin/api/workflows/${workflows.current().id}`, { enabled: enabled.checked });
    if (result && result.status !== 200) { enabled.checked = !enabled.checked; return showStatus(refusal(result)); }
    showStatus(enabled.checked ? "Enabled." : "Disabled.");
    await workflows.reload();
  });
  document.getElementById("test").addEventListener("submit", runTest);
  document.getElementById("refresh-runs").addEventListener("click", loadRuns);
}
