// The workflows page of the console: a workflow's definition built as cards
// (the trigger and each step with a form of its type, nested branches and
// loops, reordering by drag or keys, template paths offered, a refusal
// shown on its card)
// or edited as JSON (console.js's definition editor, tabs.js's tabs),
// unsaved edits kept and guarded, enabled or not, a schedule trigger with
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
  return (step.attempts || []).map((a, n) => `${n + 1}: ${a.error ? a.error.code : "ok"}`).join(", ");
}

/// How long from `start` to `end` (times as the API gives them).
function duration(start, end) {
  if (!start || !end) return "";
  const ms = new Date(end) - new Date(start);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/// A run's step as the builder's card: its status, time, attempts, child
/// run, what it was given (its definition) and what it gave.
function runStepCard(step, definition) {
  const ok = step.status === "SUCCEEDED";
  const card = element("li", null, { class: "card step-card run-step", "data-status": step.status, "data-step": step.id });
  const head = element("div", null, { class: "card-head" });
  head.append(element("strong", step.id), element("span", (STEP_TYPES[step.type] || [step.type])[0], { class: "badge" }),
    element("span", step.status, { class: `badge ${ok ? "ok" : step.status === "FAILED" ? "bad" : ""}` }),
    element("span", duration(step.startedAt, step.finishedAt), { class: "meta" }));
  card.append(head);
  const facts = [
    (step.iteration || []).length ? `Iteration ${step.iteration.join(".")}` : "",
    (step.attempts || []).length ? `Attempts: ${attemptsOf(step)}` : "",
    step.childRunId ? `Child run ${step.childRunId}` : "",
  ].filter(Boolean);
  if (facts.length) card.append(element("p", facts.join(" · "), { class: "meta" }));
  if (definition) {
    const given = Object.fromEntries(Object.entries(definition).filter(([k]) => !["id", "type", "then", "else", "steps", "onError"].includes(k)));
    card.append(element("p", "Input", { class: "field-name" }), element("pre", JSON.stringify(given, null, 2)));
  }
  card.append(element("p", "Output", { class: "field-name" }), element("pre", JSON.stringify(step.result ?? null, null, 2)));
  if ((step.logs || []).length) card.append(element("p", "Logs", { class: "field-name" }), element("pre", step.logs.join("\n"), { class: "logs" }));
  if (step.error) card.append(element("p", `${step.error.code}: ${step.error.message}`, { class: "widget-error" }));
  return card;
}

function runEntry(run) {
  const entry = element("details", null, { "data-run": run.id, "data-status": run.status });
  const when = new Date(run.startedAt).toLocaleString();
  const origin = run.parentRunId ? ` — child of ${run.parentRunId}` : run.scheduledAt ? ` — tick ${run.scheduledAt}` : "";
  entry.append(element("summary", `${run.status}${run.test ? " (test)" : ""} — ${when}${origin}${run.error ? ` — ${run.error.code}: ${run.error.message}` : ""}`));
  const replay = element("button", "Replay", { type: "button", "data-replay": run.id });
  replay.addEventListener("click", () => replayRun(run.id));
  entry.append(element("p", null, { class: "actions" }));
  entry.lastChild.append(replay, element("span", `Took ${duration(run.startedAt, run.finishedAt) || "—"}`, { class: "meta" }));
  entry.append(element("p", "Input", { class: "field-name" }), element("pre", JSON.stringify(run.input, null, 2)));
  const byId = new Map(allSteps(workflows.current()?.steps).map((s) => [s.id, s]));
  const steps = element("ol", null, { class: "steps-list" });
  steps.append(...run.steps.map((step) => runStepCard(step, byId.get(step.id))));
  entry.append(steps, element("p", "Result", { class: "field-name" }), element("pre", JSON.stringify(run.result, null, 2)));
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
  builderFromBox();
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

async function workflowsPage() {
  const enabled = document.getElementById("enabled");
  builderShown = startDefinitionTabs((parsed) => { draft = parsed; drawBuilder(); });
  await loadChoices();
  workflows = definitionEditor({
    path: "/admin/api/workflows",
    fields: ["slug", "name", "trigger", "steps"],
    template: WORKFLOW_TEMPLATE,
    refused: refusedInBuilder,
    redraw: builderFromBox,
    chosen: (workflow) => {
      enabled.disabled = !workflow;
      enabled.checked = !!workflow && workflow.enabled;
      document.getElementById("test-outcome").hidden = true;
      builderFromBox();
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

// ---- The builder: the definition as cards -------------------------------
//
// `draft` is the definition being edited; every change writes it into the
// JSON tab's text box, which Save sends. Typing changes `draft` in place;
// adding, removing, moving or retyping a step draws the cards again.

const STEP_TYPES = {
  transform: ["Transform", "Builds a value from the trigger and earlier steps."],
  condition: ["Condition", "Runs one branch or the other, as its rules hold."],
  query: ["Query rows", "Reads rows of a table, as the run's user may."],
  insert: ["Insert a row", "Adds a row to a table."],
  update: ["Update a row", "Changes the row with this key."],
  delete: ["Delete a row", "Removes the row with this key."],
  http: ["HTTP request", "Calls another service."],
  delay: ["Delay", "Waits, then goes on."],
  forEach: ["For each", "Runs its steps once per item of a list."],
  call: ["Call a workflow", "Runs another published workflow and takes its result."],
  script: ["Script", "Runs JavaScript over the run's context in a sandbox: its default export's value is the result."],
  finish: ["Finish", "Ends the run with a result."],
  fail: ["Fail", "Ends the run with an error."],
};

const OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin", "like", "ilike", "isNull"];

const TRIGGERS = {
  webhook: "Webhook: an HTTP call",
  dbEvent: "A change to a table",
  beforeWrite: "Before a write to a table (a hook)",
  schedule: "A schedule",
  manual: "Manual: run from this page or the API",
};

let draft = null;
// Whether the Builder tab is the one shown (set by startDefinitionTabs).
let builderShown = () => true;
// Resources, users and workflows offered in the cards' lists.
const choices = { resources: [], users: [], workflows: [] };

/// Writes `draft` into the text box after a change in the builder.
function changed() {
  writeDefinition(draft);
}

/// A value as its input shows it: text as is, anything else as JSON.
function valueText(value) {
  if (value === undefined) return "";
  // Text that would read back as JSON is shown quoted, so it stays text.
  if (typeof value === "string") {
    try { JSON.parse(value); return JSON.stringify(value); } catch { return value; }
  }
  return JSON.stringify(value);
}

/// What an input's text stands for: JSON when it parses (a number, true,
/// an object...), else the text, templates included.
function parseValue(text) {
  try { return JSON.parse(text); } catch { return text; }
}

/// An input bound to `owner[key]` (`parse` turns its text into the value;
/// an empty text removes the key when `optional`).
function bound(owner, key, path, { parse = (t) => t, show = (v) => v ?? "", list, type = "text", optional = false, placeholder } = {}) {
  const input = element("input", null, { type, "data-path": path, autocomplete: "off", spellcheck: "false" });
  if (list) input.setAttribute("list", list);
  if (placeholder) input.placeholder = placeholder;
  input.value = show(owner[key]);
  input.addEventListener("input", () => {
    if (optional && input.value === "") delete owner[key];
    else owner[key] = parse(input.value);
    changed();
  });
  return input;
}

/// A monospace text area with its line numbers beside it.
function codeEditor(owner, key, path) {
  const box = element("div", null, { class: "code-editor" });
  const numbers = element("pre", null, { class: "line-numbers", "aria-hidden": "true" });
  const text = element("textarea", null, { "data-path": path, spellcheck: "false", autocomplete: "off", rows: "12", "aria-label": "Code", wrap: "off" });
  text.value = owner[key] ?? "";
  const number = () => {
    const lines = text.value.split("\n").length;
    numbers.textContent = Array.from({ length: lines }, (_, i) => i + 1).join("\n");
  };
  number();
  text.addEventListener("input", () => { owner[key] = text.value; number(); changed(); });
  text.addEventListener("scroll", () => { numbers.scrollTop = text.scrollTop; });
  // Tab indents instead of leaving the field; Escape then Tab leaves it.
  let leaving = false;
  text.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { leaving = true; return; }
    if (event.key !== "Tab" || event.shiftKey || leaving) { leaving = false; return; }
    event.preventDefault();
    text.setRangeText("  ", text.selectionStart, text.selectionEnd, "end");
    text.dispatchEvent(new Event("input"));
  });
  box.append(numbers, text);
  return box;
}

function numberInput(owner, key, path, optional = true) {
  return bound(owner, key, path, { type: "number", optional, parse: Number, show: (v) => (v === undefined ? "" : String(v)) });
}

function valueInput(owner, key, path) {
  return bound(owner, key, path, { list: "context-templates", parse: parseValue, show: valueText, placeholder: "text, a number, or {{start.data.body}}" });
}

function select(owner, key, path, options, { optional = false, onChange } = {}) {
  const box = element("select", null, { "data-path": path });
  if (optional) box.append(element("option", "—", { value: "" }));
  for (const [value, text] of options) box.append(element("option", text, { value }));
  const current = owner[key];
  if (current !== undefined && current !== "" && !options.some(([value]) => value === current)) {
    box.append(element("option", `${current} (unknown)`, { value: current }));
  }
  box.value = current ?? "";
  box.addEventListener("change", () => {
    if (optional && box.value === "") delete owner[key];
    else owner[key] = box.value;
    changed();
    if (onChange) onChange();
  });
  return box;
}

function resourceSelect(owner, key, path) {
  return select(owner, key, path, choices.resources.map((r) => [`${r.schema}.${r.table}`, `${r.schema}.${r.table}`]));
}

/// Key and value rows for an object (`owner[key]`): a row's data, an HTTP
/// header set, a transform's output.
function pairsEditor(owner, key, path, what, { text = false } = {}) {
  const current = owner[key];
  // A template or a list (an insert's rows) is not pairs: one value box.
  if (current !== undefined && (current === null || typeof current !== "object" || Array.isArray(current))) return valueInput(owner, key, path);
  const box = element("div", null, { class: "pairs", "data-path": path });
  const pairs = Object.entries(current || {});
  const read = text ? (t) => t : parseValue;
  const write = () => { owner[key] = Object.fromEntries(pairs.filter(([name]) => name !== "")); changed(); };
  const draw = () => {
    box.replaceChildren();
    pairs.forEach((pair, i) => {
      const row = element("div", null, { class: "pair" });
      const name = element("input", null, { "aria-label": `${what} ${i + 1} name`, autocomplete: "off", "data-path": `${path}.${pair[0]}` });
      name.value = pair[0];
      name.addEventListener("input", () => { pair[0] = name.value; write(); });
      const value = element("input", null, { "aria-label": `${what} ${i + 1} value`, list: "context-templates", autocomplete: "off", placeholder: "text, a number, or {{…}}" });
      value.value = text ? String(pair[1] ?? "") : valueText(pair[1]);
      value.addEventListener("input", () => { pair[1] = read(value.value); write(); });
      const remove = element("button", "Remove", { type: "button", class: "ghost", "aria-label": `Remove ${what} ${i + 1}` });
      remove.addEventListener("click", () => { pairs.splice(i, 1); write(); draw(); box.lastElementChild.focus(); });
      row.append(name, value, remove);
      box.append(row);
    });
    const add = element("button", `Add a ${what}`, { type: "button" });
    add.addEventListener("click", () => { pairs.push(["", ""]); draw(); box.querySelector(".pair:last-of-type input").focus(); });
    box.append(add);
  };
  draw();
  return box;
}

/// A filter over context paths (or columns) as rules that all must hold;
/// a filter with and/or/not stays JSON.
function rulesEditor(owner, key, path, keys) {
  const filter = owner[key] && typeof owner[key] === "object" ? owner[key] : {};
  const simple = Object.entries(filter).every(([name, ops]) =>
    !["and", "or", "not"].includes(name) && ops && typeof ops === "object" && !Array.isArray(ops));
  if (!simple) {
    const text = element("textarea", null, { rows: "4", "data-path": path, "aria-label": "Rules as JSON" });
    text.value = JSON.stringify(filter, null, 2);
    text.addEventListener("input", () => { try { owner[key] = JSON.parse(text.value); text.removeAttribute("aria-invalid"); changed(); } catch { text.setAttribute("aria-invalid", "true"); } });
    const box = element("div");
    box.append(element("p", "These rules combine and, or or not: they are edited as JSON.", { class: "help" }), text);
    return box;
  }
  const rules = Object.entries(filter).flatMap(([name, ops]) => Object.entries(ops).map(([op, value]) => [name, op, value]));
  const box = element("div", null, { class: "rules", "data-path": path });
  const write = () => {
    const built = {};
    for (const [name, op, value] of rules) if (name) built[name] = { ...(built[name] || {}), [op]: value };
    owner[key] = built;
    changed();
  };
  const draw = () => {
    box.replaceChildren();
    if (!rules.length) box.append(element("p", "No rule: always true.", { class: "help" }));
    rules.forEach((rule, i) => {
      const row = element("div", null, { class: "pair" });
      const name = element("input", null, { "aria-label": `Rule ${i + 1}: value at`, autocomplete: "off", placeholder: keys ? "start.data.body.amount" : "column", "data-path": `${path}.${rule[0]}` });
      if (keys) name.setAttribute("list", keys);
      name.value = rule[0];
      name.addEventListener("input", () => { rule[0] = name.value; write(); });
      const op = element("select", null, { "aria-label": `Rule ${i + 1}: operator` });
      for (const o of OPERATORS) op.append(element("option", o, { value: o }));
      op.value = rule[1];
      op.addEventListener("change", () => { rule[1] = op.value; write(); });
      const value = element("input", null, { "aria-label": `Rule ${i + 1}: compared with`, list: "context-templates", autocomplete: "off" });
      value.value = valueText(rule[2]);
      value.addEventListener("input", () => { rule[2] = parseValue(value.value); write(); });
      const remove = element("button", "Remove", { type: "button", class: "ghost", "aria-label": `Remove rule ${i + 1}` });
      remove.addEventListener("click", () => { rules.splice(i, 1); write(); draw(); box.lastElementChild.focus(); });
      row.append(name, op, value, remove);
      box.append(row);
    });
    const add = element("button", "Add a rule", { type: "button" });
    add.addEventListener("click", () => { rules.push(["", "eq", ""]); draw(); box.querySelector(".pair:last-of-type input").focus(); });
    box.append(add);
  };
  draw();
  return box;
}

/// A step of `type` with an id no other step of the draft has.
function newStep(type) {
  const taken = new Set(allSteps(draft.steps).map((s) => s.id));
  let n = 1;
  while (taken.has(`${type}${n}`)) n += 1;
  const defaults = {
    transform: { output: {} }, condition: { if: {}, then: [], else: [] }, query: { resource: "", filter: {}, limit: 100 },
    insert: { resource: "", data: {} }, update: { resource: "", key: "", data: {} }, delete: { resource: "", key: "" },
    http: { method: "GET", url: "" }, delay: { ms: 1000 }, forEach: { items: "", steps: [] },
    call: { workflow: "", input: {} }, finish: { result: "" }, fail: { code: "FAILED", message: "" },
    script: { code: "export default function (ctx) {\n  // ctx.start, ctx.steps, ctx.user (and ctx.item, ctx.index in a loop)\n  return null;\n}\n" },
  };
  return { id: `${type}${n}`, type, ...structuredClone(defaults[type] || {}) };
}

/// Every step of `steps`, nested ones included.
function allSteps(steps) {
  return (Array.isArray(steps) ? steps : []).flatMap((step) => [step,
    ...["then", "else", "steps"].flatMap((k) => allSteps(step[k])), ...(Array.isArray(step.onError) ? allSteps(step.onError) : [])]);
}

/// The template paths offered while typing: the trigger's data, the run's
/// user, each step's result, a loop's item.
function offerPaths() {
  const start = { webhook: ["body", "query", "meta"], dbEvent: ["event", "resource", "new", "old"], beforeWrite: ["event", "resource", "new", "old"], schedule: ["scheduledAt"], manual: [] };
  const keys = [...(start[draft.trigger?.type] || []).map((k) => `start.data.${k}`), "start.data", "user.id", "user.email",
    ...allSteps(draft.steps).filter((s) => s.id).flatMap((s) => [`steps.${s.id}.result`, `steps.${s.id}.error`]), "item", "index"];
  document.getElementById("context-keys").replaceChildren(...keys.map((k) => element("option", null, { value: k })));
  document.getElementById("context-templates").replaceChildren(...keys.map((k) => element("option", null, { value: `{{${k}}}` })));
}

/// Where the webhook trigger is called.
function webhookAddress() {
  return `Called at ${draft.trigger.method || "POST"} ${location.origin}${BASE}/api/workflows/${draft.slug || "<slug>"}/webhook`;
}

function triggerCard() {
  const trigger = draft.trigger && typeof draft.trigger === "object" ? draft.trigger : (draft.trigger = { type: "webhook" });
  const card = element("fieldset", null, { class: "card trigger-card", "data-path": "trigger" });
  card.append(element("legend", "When it runs"));
  const body = element("div", null, { class: "card-fields" });
  const users = [["00000000-0000-0000-0000-000000000000", "nobody (no grants)"], ...choices.users.map((u) => [u.id, u.email])];
  const retype = () => {
    const kept = trigger.executeAs;
    for (const k of Object.keys(trigger)) if (k !== "type") delete trigger[k];
    if (trigger.type === "webhook") Object.assign(trigger, { method: "POST", response: "sync", access: "authenticated" });
    if (trigger.type === "dbEvent" || trigger.type === "beforeWrite") Object.assign(trigger, { resourceId: choices.resources[0]?.id || "", events: ["insert"] });
    if (trigger.type === "schedule") Object.assign(trigger, { cron: "0 6 * * *", executeAs: kept || users[0][0] });
    changed();
    drawBuilder();
  };
  body.append(field("Trigger", select(trigger, "type", "trigger.type", Object.entries(TRIGGERS), { onChange: retype })));
  if (trigger.type === "webhook") {
    body.append(
      field("Method", select(trigger, "method", "trigger.method", [["POST", "POST"], ["GET", "GET"]])),
      field("Answer", select(trigger, "response", "trigger.response", [["sync", "with the run's result (sync)"], ["async", "at once with the run's id (async)"]], {
        onChange: () => { if (trigger.response === "async") { delete trigger.waitSeconds; delete trigger.onTimeout; changed(); } drawBuilder(); },
      })),
      field("Who may call", select(trigger, "access", "trigger.access", [["authenticated", "signed-in callers"], ["public", "anyone"]], { onChange: drawBuilder })),
    );
    if (trigger.access === "public") body.append(field("Runs as", select(trigger, "executeAs", "trigger.executeAs", users.slice(1), { optional: true }), "A public call has no user: the run acts as this one."));
    if (trigger.response !== "async") {
      body.append(field("Wait at most (seconds)", numberInput(trigger, "waitSeconds", "trigger.waitSeconds")),
        field("When the wait ends", select(trigger, "onTimeout", "trigger.onTimeout", [["continue", "the run goes on"], ["cancel", "the run is cancelled"]], { optional: true })));
    }
    body.append(element("p", webhookAddress(), { class: "help webhook-url" }));
  } else if (trigger.type === "dbEvent" || trigger.type === "beforeWrite") {
    if (trigger.type === "beforeWrite") body.append(element("p", "Runs as the writer before each row is written; a finish step's object is written over the row, a failure refuses the write. Only transform, condition, script, query, forEach, finish and fail steps.", { class: "help" }));
    body.append(field("Table", select(trigger, "resourceId", "trigger.resourceId", choices.resources.map((r) => [r.id, `${r.schema}.${r.table}`]))));
    const events = element("div", null, { class: "inline", role: "group", "aria-label": "Events", "data-path": "trigger.events" });
    for (const name of ["insert", "update", "delete"]) {
      const box = element("input", null, { type: "checkbox" });
      box.checked = (trigger.events || []).includes(name);
      box.addEventListener("change", () => {
        trigger.events = ["insert", "update", "delete"].filter((e) => e === name ? box.checked : (trigger.events || []).includes(e));
        changed();
      });
      events.append(field(name, box));
    }
    body.append(events);
  } else if (trigger.type === "schedule") {
    body.append(field("Cron", bound(trigger, "cron", "trigger.cron", { placeholder: "0 6 * * *" }), "Five fields, or six with seconds first; the Schedule panel below shows the next runs."),
      field("Time zone", bound(trigger, "timezone", "trigger.timezone", { optional: true, placeholder: "Europe/Paris" })),
      field("Runs as", select(trigger, "executeAs", "trigger.executeAs", users)));
  }
  card.append(body, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  return card;
}

/// The fields of a step of its type.
function stepFields(step, path) {
  const box = element("div", null, { class: "card-fields" });
  const add = (...nodes) => box.append(...nodes);
  switch (step.type) {
    case "transform": add(field("Output", pairsEditor(step, "output", `${path}.output`, "field"))); break;
    case "condition":
      add(field("Runs “then” when every rule holds", rulesEditor(step, "if", `${path}.if`, "context-keys")),
        branch(step, "then", `${path}.then`, "Then"), branch(step, "else", `${path}.else`, "Else"));
      break;
    case "query":
      add(field("Table", resourceSelect(step, "resource", `${path}.resource`)),
        field("Rows where", rulesEditor(step, "filter", `${path}.filter`)),
        field("Sort", bound(step, "sort", `${path}.sort`, { optional: true, placeholder: "-created_at" })),
        field("At most", numberInput(step, "limit", `${path}.limit`)));
      break;
    case "insert": add(field("Table", resourceSelect(step, "resource", `${path}.resource`)), field("Values", pairsEditor(step, "data", `${path}.data`, "column"))); break;
    case "update":
      add(field("Table", resourceSelect(step, "resource", `${path}.resource`)), field("Key", bound(step, "key", `${path}.key`, { list: "context-templates" })),
        field("New values", pairsEditor(step, "data", `${path}.data`, "column")));
      break;
    case "delete": add(field("Table", resourceSelect(step, "resource", `${path}.resource`)), field("Key", bound(step, "key", `${path}.key`, { list: "context-templates" }))); break;
    case "http":
      add(field("Method", select(step, "method", `${path}.method`, ["GET", "POST", "PUT", "PATCH", "DELETE"].map((m) => [m, m]))),
        field("URL", bound(step, "url", `${path}.url`, { list: "context-templates", placeholder: "https://example.com/hook" })),
        field("Headers", pairsEditor(step, "headers", `${path}.headers`, "header", { text: true })),
        field("Body", valueInput(step, "body", `${path}.body`)),
        field("Time limit (ms)", numberInput(step, "timeoutMs", `${path}.timeoutMs`)));
      break;
    case "delay": add(field("Wait (ms)", numberInput(step, "ms", `${path}.ms`, false))); break;
    case "forEach":
      add(field("Items", valueInput(step, "items", `${path}.items`), "A list, or a template that gives one, such as {{steps.rows.result}}."),
        field("At once", numberInput(step, "concurrency", `${path}.concurrency`)), branch(step, "steps", `${path}.steps`, "For each item (item, index)"));
      break;
    case "call":
      add(field("Workflow", select(step, "workflow", `${path}.workflow`, choices.workflows.map((w) => [w.slug, `${w.name} (${w.slug})`]))),
        field("Input", pairsEditor(step, "input", `${path}.input`, "field")));
      break;
    case "script":
      add(field("Code", codeEditor(step, "code", `${path}.code`), "A module: export default a function of the context; throw { code, message } to fail with your code. No network, files or timers."),
        field("Time limit (ms)", numberInput(step, "timeoutMs", `${path}.timeoutMs`)), field("Memory (MB)", numberInput(step, "memoryMb", `${path}.memoryMb`)));
      break;
    case "finish": add(field("Result", valueInput(step, "result", `${path}.result`))); break;
    case "fail": add(field("Code", bound(step, "code", `${path}.code`)), field("Message", bound(step, "message", `${path}.message`, { list: "context-templates" }))); break;
    default: add(element("p", `“${step.type}” is not a step type: remove this step and add one, or fix it in the JSON tab.`, { class: "widget-error" }));
  }
  return box;
}

/// Retry and what a failure does, folded away unless set.
function failureFields(step, path) {
  const box = element("details", null, { class: "failure" });
  if (step.retry || step.onError) box.open = true;
  box.append(element("summary", "Retries and errors"));
  const retry = step.retry || {};
  const retryField = (key, text) => {
    const input = element("input", null, { type: "number", "data-path": `${path}.retry.${key}` });
    input.value = retry[key] ?? "";
    input.addEventListener("input", () => {
      if (input.value === "") delete retry[key]; else retry[key] = Number(input.value);
      if (Object.keys(retry).length) step.retry = retry; else delete step.retry;
      changed();
    });
    return field(text, input);
  };
  const onError = { value: Array.isArray(step.onError) ? "steps" : step.onError || "fail" };
  const mode = select(onError, "value", `${path}.onError`, [["fail", "the run fails"], ["continue", "the run goes on (its error is kept)"], ["steps", "these steps run, then the run goes on"]], {
    onChange: () => {
      if (Array.isArray(step.onError) && step.onError.length && onError.value !== "steps"
        && !confirm(`Drop the ${step.onError.length} step(s) run on error?`)) { onError.value = "steps"; drawBuilder(); return; }
      if (onError.value === "fail") delete step.onError;
      else step.onError = onError.value === "steps" ? [] : onError.value;
      changed();
      drawBuilder();
    },
  });
  box.append(element("div", null, { class: "card-fields" }));
  box.lastChild.append(retryField("attempts", "Attempts in all"), retryField("backoffMs", "First wait (ms)"), retryField("factor", "Wait factor"), field("When it fails", mode));
  if (Array.isArray(step.onError)) box.append(branch(step, "onError", `${path}.onError`, "On error"));
  return box;
}

function stepCard(list, i, path) {
  const step = list[i];
  const [title, help] = STEP_TYPES[step.type] || ["Unknown step", ""];
  const card = element("li", null, { class: "card step-card", "data-path": path, "data-type": step.type });
  const head = element("div", null, { class: "card-head" });
  head.append(element("span", String(i + 1), { class: "step-number", "aria-hidden": "true" }),
    element("strong", title, { "data-path": `${path}.type` }));
  const id = bound(step, "id", `${path}.id`);
  id.setAttribute("aria-label", "Step id (its result is steps.<id>.result)");
  id.addEventListener("change", offerPaths);
  const move = (to, text) => {
    const button = element("button", text, { type: "button", class: "ghost", "aria-label": `${text}: ${step.id}` });
    button.disabled = to < 0 || to >= list.length;
    button.addEventListener("click", () => {
      list.splice(to, 0, list.splice(i, 1)[0]);
      changed();
      drawBuilder();
      const moved = path.replace(/\[\d+\]$/, `[${to}]`);
      document.querySelector(`#builder [data-path="${CSS.escape(moved)}"] .card-head input`)?.focus();
    });
    return button;
  };
  const remove = element("button", "Remove", { type: "button", class: "ghost danger", "aria-label": `Remove step ${step.id}` });
  remove.addEventListener("click", () => { list.splice(i, 1); changed(); drawBuilder(); document.querySelector(`#builder [data-add="${CSS.escape(path.replace(/\[\d+\]$/, ""))}"]`)?.focus(); });
  head.append(id, move(i - 1, "Move up"), move(i + 1, "Move down"), remove);
  draggable(card, head, list, i, path);
  card.append(head, element("p", help, { class: "help" }), stepFields(step, path), failureFields(step, path),
    element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  return card;
}

// The step being dragged: its list and place.
let dragging = null;

/// Lets `card` (step `i` of `list`) be dragged by its handle onto another
/// card of the same list, which it then takes the place of.
function draggable(card, head, list, i, path) {
  const handle = element("span", "⠿", { class: "drag-handle", draggable: "true", title: "Drag to move the step (or use Move up and Move down)", "aria-hidden": "true" });
  head.prepend(handle);
  handle.addEventListener("dragstart", (event) => {
    dragging = { list, i };
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", path);
    event.dataTransfer.setDragImage(card, 12, 12);
    card.classList.add("dragging");
  });
  handle.addEventListener("dragend", () => { dragging = null; card.classList.remove("dragging"); });
  card.addEventListener("dragover", (event) => {
    if (!dragging || dragging.list !== list || event.target.closest(".step-card") !== card) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    card.classList.add("drop-target");
  });
  card.addEventListener("dragleave", () => card.classList.remove("drop-target"));
  card.addEventListener("drop", (event) => {
    card.classList.remove("drop-target");
    if (!dragging || dragging.list !== list || dragging.i === i) return;
    event.preventDefault();
    list.splice(i, 0, list.splice(dragging.i, 1)[0]);
    dragging = null;
    changed();
    drawBuilder(`${path}.id`);
  });
}

/// A list of steps (the workflow's, a branch's, a loop's) with its Add row.
function branch(owner, key, path, title) {
  if (!Array.isArray(owner[key])) owner[key] = [];
  const list = owner[key];
  const box = element("div", null, { class: "branch", "data-path": path });
  box.append(element("p", title, { class: "branch-title" }));
  const cards = element("ol", null, { class: "steps-list" });
  list.forEach((_, i) => cards.append(stepCard(list, i, `${path}[${i}]`)));
  if (!list.length) cards.append(element("li", "No step yet.", { class: "empty" }));
  const adder = element("div", null, { class: "inline add-step" });
  const kind = element("select", null, { "aria-label": `Type of the new step in ${title}` });
  for (const [k, [t]] of Object.entries(STEP_TYPES)) kind.append(element("option", t, { value: k }));
  const add = element("button", "Add a step", { type: "button", "data-add": path });
  add.addEventListener("click", () => { list.push(newStep(kind.value)); changed(); drawBuilder(`${path}[${list.length - 1}].id`); });
  adder.append(kind, add);
  box.append(cards, adder);
  return box;
}

/// Draws the cards from `draft`; `focus`: the path of the control to focus after.
function drawBuilder(focus) {
  const builder = document.getElementById("builder");
  if (!draft) {
    builder.replaceChildren(element("p", "The JSON tab holds a definition that does not parse: fix it there.", { class: "widget-error" }));
    return;
  }
  const basics = element("fieldset", null, { class: "card basics-card", "data-path": "" });
  basics.append(element("legend", "Workflow"));
  const fields = element("div", null, { class: "card-fields" });
  const slug = bound(draft, "slug", "slug", { placeholder: "order-intake" });
  slug.addEventListener("input", () => {
    const url = document.querySelector("#builder .webhook-url");
    if (url) url.textContent = webhookAddress();
  });
  fields.append(field("Slug (in its address)", slug), field("Name", bound(draft, "name", "name", { optional: true })));
  basics.append(fields, element("p", null, { class: "card-error widget-error", role: "alert", hidden: "" }));
  const before = JSON.stringify(draft);
  builder.replaceChildren(basics, triggerCard(), branch(draft, "steps", "steps", "Steps, in order"));
  // Drawing fills in missing parts (an empty list, a trigger): kept.
  if (JSON.stringify(draft) !== before) changed();
  offerPaths();
  if (focus) document.querySelector(`#builder [data-path="${CSS.escape(focus)}"]`)?.focus();
}

/// Draws the builder from the text box (a record shown, the JSON tab left).
function builderFromBox() {
  draft = definitionInBox();
  drawBuilder();
}

/// Shows a refusal on the card of the field it names: the deepest element
/// whose path the field starts with.
function refusedInBuilder(error) {
  for (const old of document.querySelectorAll("#builder .card-error")) old.hidden = true;
  for (const old of document.querySelectorAll("#builder [aria-invalid]")) old.removeAttribute("aria-invalid");
  if (!error.field) return;
  let path = error.field.replace(/^data\./, "");
  let found = null;
  for (;;) {
    found = document.querySelector(`#builder [data-path="${CSS.escape(path)}"]`);
    if (found || !path) break;
    const shorter = path.replace(/(\.[^.[\]]*|\[\d+\])$/, "");
    path = shorter === path ? "" : shorter;
  }
  const card = found?.closest(".card") || document.querySelector("#builder .basics-card");
  for (let open = found?.closest("details"); open; open = open.parentElement.closest("details")) open.open = true;
  const message = card.querySelector(":scope > .card-error");
  message.textContent = `${error.message} (${error.field})`;
  message.hidden = false;
  if (found && found.matches("input, select, textarea")) { found.setAttribute("aria-invalid", "true"); if (builderShown()) found.focus(); }
  else if (builderShown()) card.scrollIntoView({ block: "center" });
}

async function loadChoices() {
  const [resources, users, flows] = await Promise.all(["/admin/api/resources", "/admin/api/users?limit=1000", "/admin/api/workflows"].map(api));
  choices.resources = (resources?.answer?.data || []).filter((r) => r.kind === "table");
  choices.users = users?.answer?.data || [];
  choices.workflows = flows?.answer?.data || [];
}
