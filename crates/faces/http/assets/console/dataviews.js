// The DataViews page of the console: a view's definition edited as JSON
// (console.js's definition editor), published, and its saved draft run as
// the administrator, with its SQL and rows.
"use strict";

const VIEW_TEMPLATE = {
  slug: "rows-per-day",
  name: "Rows per day",
  source: "app.orders",
  columns: [{ name: "day", bucket: "day", column: "created_at" }, { name: "count", agg: "count" }],
  filter: null,
  sort: ["day"],
  limit: 1000,
};

let views;

async function previewView() {
  showAlert("preview-error", "");
  const view = views.current();
  const sql = document.getElementById("preview-sql");
  const rows = document.getElementById("preview-rows");
  sql.hidden = true;
  rows.replaceChildren();
  if (!view) return showAlert("preview-error", "Save the view first.");
  const result = await call("POST", `/admin/api/dataviews/${view.id}/preview`);
  if (!result) return;
  if (result.status !== 200) return showAlert("preview-error", refusal(result));
  const preview = result.answer.data;
  sql.textContent = preview.sql;
  sql.hidden = false;
  rows.replaceChildren(preview.rows.length
    ? dataTable(view.columns.map((c) => c.name), preview.rows)
    : element("p", "No rows.", { class: "empty" }));
}

function dataviewsPage() {
  views = definitionEditor({
    path: "/admin/api/dataviews",
    fields: ["slug", "name", "source", "columns", "filter", "sort", "limit"],
    template: VIEW_TEMPLATE,
    chosen: () => {
      document.getElementById("preview-sql").hidden = true;
      document.getElementById("preview-rows").replaceChildren();
    },
  });
  document.getElementById("run-preview").addEventListener("click", previewView);
}
