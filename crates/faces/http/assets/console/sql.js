// The SQL console page: one statement (with parameters, read only or not)
// through POST /admin/api/sql, its rows as a table, PostgreSQL's refusal
// with the position it names selected in the statement.
"use strict";

async function runStatement(event) {
  event.preventDefault();
  showAlert("sql-error", "");
  const box = document.getElementById("sql-query");
  const params = jsonOf("sql-params", "sql-error");
  if (params === undefined) return;
  const data = { query: box.value, readOnly: document.getElementById("sql-read-only").checked };
  if (params !== null) data.params = params;
  const result = await call("POST", "/admin/api/sql", data);
  if (!result) return;
  const summary = document.getElementById("sql-summary");
  const rows = document.getElementById("sql-rows");
  if (result.status !== 200) {
    summary.textContent = "";
    rows.replaceChildren();
    const position = result.answer?.errors?.[0]?.position;
    showAlert("sql-error", refusal(result) + (position ? ` (at character ${position})` : ""));
    if (position) {
      box.focus();
      box.setSelectionRange(position - 1, position);
    }
    return;
  }
  const answer = result.answer.data;
  summary.textContent = `${answer.rowCount} row${answer.rowCount === 1 ? "" : "s"} in ${answer.durationMs.toFixed(1)} ms.`;
  rows.replaceChildren(answer.columns.length
    ? dataTable(answer.columns.map((c) => `${c.name} (${c.type})`), answer.rows)
    : element("p", "The statement returns no rows.", { class: "empty" }));
}

function sqlPage() {
  const form = document.getElementById("sql");
  form.addEventListener("submit", runStatement);
  document.getElementById("sql-query").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
}
