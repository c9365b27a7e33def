// The filter builder the rows, grants and DataViews pages share: rules of a
// column, an operator and a value (the variables of $USER and $PERIOD
// offered as values), in groups whose rules must all hold or any one.
// What is sent is always the filter language's JSON, shown under the rules
// and editable there: the advanced form, for what the rules cannot show
// (not).
"use strict";

const FILTER_OPERATORS = [
  ["eq", "equals"], ["neq", "does not equal"], ["gt", "is greater than"], ["gte", "is at least"],
  ["lt", "is less than"], ["lte", "is at most"], ["in", "is one of"], ["nin", "is none of"],
  ["like", "matches (like, % any text)"], ["ilike", "matches in any case (ilike)"], ["isNull", "is empty"],
  ["search", "contains the words"],
];
const FILTER_VARIABLES = [
  ["$USER.id", "the id of the user reading"], ["$USER.email", "the email of the user reading"],
  ["$PERIOD.now", "now"], ["$PERIOD.today", "start of today, in the reader's time zone"],
  ["$PERIOD.yesterday", "start of yesterday"], ["$PERIOD.tomorrow", "start of tomorrow"],
  ["$PERIOD.startOfWeek", "start of this week (Monday)"], ["$PERIOD.startOfMonth", "start of this month"],
  ["$PERIOD.startOfYear", "start of this year"],
];
// Groups nest this deep at most; a deeper filter is edited as JSON.
const FILTER_DEPTH = 3;

// The values the value inputs offer: one list for the page.
function filterVariablesList() {
  let list = document.getElementById("filter-variables");
  if (list) return list.id;
  list = element("datalist", null, { id: "filter-variables" });
  for (const [name, help] of FILTER_VARIABLES) list.append(element("option", help, { value: name }));
  document.body.append(list);
  return list.id;
}

// A rule's typed value as the JSON the filter language takes: variables
// and the patterns of like, ilike and search as typed, the rest typed by
// the column (console.js's typedValue).
function ruleValue(rule, column) {
  if (rule.op === "isNull") return rule.text !== "false";
  const textual = rule.op === "like" || rule.op === "ilike" || rule.op === "search";
  const one = (text) => (text.trim().startsWith("$") ? text.trim() : textual ? text : typedValue(column?.dataType, text));
  if (rule.op === "in" || rule.op === "nin") return rule.text.split(",").map((part) => part.trim()).filter(Boolean).map(one);
  return one(rule.text);
}

// The text a value shows in a rule's input.
function ruleText(op, value) {
  if (op === "isNull") return value === false ? "false" : "true";
  if (Array.isArray(value)) return value.map(String).join(", ");
  return String(value);
}

// The rules of `filter` (the JSON) over `columns` with `operators`, or
// null when the rules cannot show it exactly (not, a deeper group, an
// operator not offered, a value the rules would send back otherwise): the
// filter is then edited as JSON, never rewritten.
function rulesOf(filter, columns, operators, depth = 1) {
  if (filter === null || filter === undefined) return { join: "and", rules: [] };
  if (typeof filter !== "object" || Array.isArray(filter) || depth > FILTER_DEPTH) return null;
  const keys = Object.keys(filter);
  if (keys.length === 1 && (keys[0] === "and" || keys[0] === "or")) {
    // An empty list is a filter of its own (or: no row): not a group.
    if (!Array.isArray(filter[keys[0]]) || !filter[keys[0]].length) return null;
    const rules = [];
    for (const part of filter[keys[0]]) {
      if (!part || typeof part !== "object" || Array.isArray(part)) return null;
      const only = Object.keys(part);
      const single = only.length === 1 && only[0] !== "and" && only[0] !== "or"
        && part[only[0]] && typeof part[only[0]] === "object" && Object.keys(part[only[0]]).length === 1;
      const group = rulesOf(part, columns, operators, single ? depth : depth + 1);
      if (!group) return null;
      // A part of one rule is that rule; any other part is a group of its own.
      rules.push(single && group.rules.length === 1 ? group.rules[0] : group);
    }
    return { join: keys[0], rules };
  }
  const rules = [];
  for (const column of keys) {
    const ops = filter[column];
    if (column === "not" || !ops || typeof ops !== "object" || Array.isArray(ops) || !Object.keys(ops).length) return null;
    for (const [op, value] of Object.entries(ops)) {
      if (!operators.some(([known]) => known === op)) return null;
      const rule = { column, op, text: ruleText(op, value) };
      const back = ruleValue(rule, columns.find((c) => c.name === column));
      if (JSON.stringify(back) !== JSON.stringify(value)) return null;
      rules.push(rule);
    }
  }
  return { join: "and", rules };
}

// The JSON of a group of rules: null when it has none, undefined when a
// rule names no column.
function filterOf(group, columns) {
  const parts = [];
  for (const rule of group.rules) {
    if (rule.rules) {
      const inner = filterOf(rule, columns);
      if (inner === undefined) return undefined;
      if (inner) parts.push(inner);
      continue;
    }
    if (!rule.column) return undefined;
    parts.push({ [rule.column]: { [rule.op]: ruleValue(rule, columns.find((c) => c.name === rule.column)) } });
  }
  if (!parts.length) return null;
  return parts.length === 1 ? parts[0] : { [group.join]: parts };
}

// A filter builder in `box` over `columns` ({ name, dataType }): `filter`,
// the JSON it starts with; `search`, whether full-text search is offered;
// `name`, what the rules filter (in the controls' names); `changed`, told
// after every edit; `enter`, whether Enter in a value submits its form
// (the rows page) or not (a grant, which Enter must not make half typed).
// Answers { value() (the JSON; undefined while a rule has no column or the
// JSON typed does not parse), problem() (what is wrong then), set(filter),
// columns(list), refuse(message) }.
function filterBuilder(box, { columns = [], filter = null, search = false, name = "Filter", changed = () => {}, enter = false } = {}) {
  const operators = FILTER_OPERATORS.filter(([op]) => search || op !== "search");
  const variables = filterVariablesList();
  let group = { join: "and", rules: [] };
  let json = null;
  let advanced = false;
  const rulesBox = element("div", null, { class: "filter-rules" });
  const details = element("details", null, { class: "filter-json" });
  const text = element("textarea", null, { rows: "3", spellcheck: "false", "aria-label": `${name} as JSON` });
  const error = element("p", null, { class: "widget-error", role: "alert", hidden: "" });
  details.append(element("summary", "JSON (advanced)"), text);
  box.replaceChildren(rulesBox, error, details);
  box.classList.add("filter-builder");
  if (!enter) {
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && event.target.matches("input")) event.preventDefault();
    });
  }
  const problem = () => (json !== undefined ? "" : error.textContent || "Choose a column for every rule.");
  const say = (message) => { error.textContent = message; error.hidden = !message; };

  const emit = () => {
    json = advanced ? json : filterOf(group, columns);
    if (document.activeElement !== text && json !== undefined) text.value = json === null ? "" : JSON.stringify(json, null, 2);
    text.removeAttribute("aria-invalid");
    say(json === undefined ? "Choose a column for every rule." : "");
    changed();
  };

  const ruleRow = (owner, rule, index, label) => {
    const row = element("li", null, { class: "filter-rule", "data-rule": label });
    const column = element("select", null, { class: "filter-column", "aria-label": `${name}: column of rule ${label}` });
    column.append(element("option", "Choose a column", { value: "" }),
      ...columns.map((c) => element("option", c.name, { value: c.name })));
    if (rule.column && !columns.some((c) => c.name === rule.column)) column.append(element("option", rule.column, { value: rule.column }));
    column.value = rule.column || "";
    const op = element("select", null, { class: "filter-op", "aria-label": `${name}: operator of rule ${label}` });
    op.append(...operators.map(([value, text]) => element("option", text, { value })));
    op.value = rule.op;
    const value = rule.op === "isNull"
      ? element("select", null, { class: "filter-value", "aria-label": `${name}: value of rule ${label}` })
      : element("input", null, { class: "filter-value", "aria-label": `${name}: value of rule ${label}`, list: variables, autocomplete: "off", spellcheck: "false",
        placeholder: rule.op === "in" || rule.op === "nin" ? "a, b, c" : "a value or $USER.id, $PERIOD.today…" });
    if (rule.op === "isNull") value.append(element("option", "yes", { value: "true" }), element("option", "no", { value: "false" }));
    value.value = rule.op === "isNull" ? (rule.text === "false" ? "false" : "true") : rule.text;
    column.addEventListener("change", () => { rule.column = column.value; emit(); });
    op.addEventListener("change", () => {
      const redraw = (op.value === "isNull") !== (rule.op === "isNull");
      rule.op = op.value;
      if (redraw) { rule.text = op.value === "isNull" ? "true" : ""; draw(`[data-rule="${label}"] .filter-op`); }
      emit();
    });
    value.addEventListener(rule.op === "isNull" ? "change" : "input", () => { rule.text = value.value; emit(); });
    const remove = element("button", "Remove", { type: "button", class: "ghost", "aria-label": `${name}: remove rule ${label}` });
    remove.addEventListener("click", () => { owner.rules.splice(index, 1); draw(); emit(); });
    row.append(column, op, value, remove);
    return row;
  };

  const groupBox = (owner, parent, index, label) => {
    const fieldset = element("div", null, { class: "filter-group", role: "group", "aria-label": label ? `${name}: group ${label}` : name, "data-group": label });
    const head = element("div", null, { class: "inline" });
    const join = element("select", null, { class: "filter-join", "aria-label": `${name}: how the rules of ${label ? `group ${label}` : "the filter"} join` });
    join.append(element("option", "All of these hold", { value: "and" }), element("option", "Any of these holds", { value: "or" }));
    join.value = owner.join;
    join.addEventListener("change", () => { owner.join = join.value; emit(); });
    head.append(join);
    if (parent) {
      const remove = element("button", "Remove the group", { type: "button", class: "ghost", "aria-label": `${name}: remove group ${label}` });
      remove.addEventListener("click", () => { parent.rules.splice(index, 1); draw(); emit(); });
      head.append(remove);
    }
    const list = element("ul", null, { class: "filter-list" });
    owner.rules.forEach((rule, i) => {
      const at = label ? `${label}.${i + 1}` : String(i + 1);
      if (rule.rules) {
        const item = element("li");
        item.append(groupBox(rule, owner, i, at));
        list.append(item);
      } else {
        list.append(ruleRow(owner, rule, i, at));
      }
    });
    if (!owner.rules.length) list.append(element("li", parent ? "No rule in this group yet." : "No rule: every row.", { class: "empty" }));
    const add = element("button", "Add a rule", { type: "button", "data-filter-add": label || "top" });
    add.addEventListener("click", () => {
      owner.rules.push({ column: columns[0]?.name || "", op: "eq", text: "" });
      draw(`[data-rule="${label ? `${label}.` : ""}${owner.rules.length}"] .filter-column`);
      emit();
    });
    const actions = element("p", null, { class: "actions" });
    actions.append(add);
    if (!label || label.split(".").length < FILTER_DEPTH - 1) {
      const nest = element("button", "Add a group", { type: "button", class: "ghost", "data-filter-group": label || "top" });
      nest.addEventListener("click", () => {
        owner.rules.push({ join: owner.join === "and" ? "or" : "and", rules: [{ column: columns[0]?.name || "", op: "eq", text: "" }] });
        draw(`[data-group="${label ? `${label}.` : ""}${owner.rules.length}"] .filter-column`);
        emit();
      });
      actions.append(nest);
    }
    fieldset.append(head, list, actions);
    return fieldset;
  };

  const draw = (focus) => {
    if (advanced) {
      rulesBox.replaceChildren(element("p", "This filter uses what the rules cannot show exactly (not, deeper groups, values of other types): it is edited as JSON below.", { class: "help" }));
      details.open = true;
      return;
    }
    rulesBox.replaceChildren(groupBox(group, null, 0, ""));
    if (focus) box.querySelector(focus)?.focus();
  };

  const set = (filter) => {
    const rules = rulesOf(filter, columns, operators);
    advanced = !rules;
    group = rules || { join: "and", rules: [] };
    json = filter ?? null;
    draw();
    text.value = json === null ? "" : JSON.stringify(json, null, 2);
    text.removeAttribute("aria-invalid");
    say("");
  };

  // The JSON typed: rules again when they can show it.
  text.addEventListener("input", () => {
    const typed = text.value.trim();
    let parsed = null;
    try {
      parsed = typed ? JSON.parse(typed) : null;
    } catch (failure) {
      text.setAttribute("aria-invalid", "true");
      json = undefined;
      say(`Not JSON: ${failure.message}`);
      changed();
      return;
    }
    const rules = rulesOf(parsed, columns, operators);
    advanced = !rules;
    if (rules) group = rules;
    json = parsed;
    draw();
    text.removeAttribute("aria-invalid");
    say("");
    changed();
  });

  set(filter);
  return {
    value: () => json,
    problem,
    set,
    columns: (list) => { columns = list; draw(); },
    // Marks the filter refused (its JSON shown, with the message).
    refuse: (message) => { details.open = true; text.setAttribute("aria-invalid", "true"); say(message); },
  };
}
