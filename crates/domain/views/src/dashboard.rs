//! A dashboard's widgets: each a chart or table over a DataView's output,
//! placed on a 12-column grid.

use kernel::FieldError;
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// Columns of the grid.
pub const GRID_COLUMNS: u64 = 12;
/// Most widgets on a dashboard.
const WIDGETS_MAX: usize = 50;

/// What a widget draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WidgetType {
    /// One value: the first row's `y`.
    Number,
    /// Lines of the `y` columns along `x`.
    Line,
    /// Bars of the `y` columns along `x`.
    Bar,
    /// Slices of `y` labelled by `x`.
    Pie,
    /// The rows.
    Table,
}

impl WidgetType {
    const NAMES: [(&'static str, WidgetType); 5] = [
        ("number", WidgetType::Number),
        ("line", WidgetType::Line),
        ("bar", WidgetType::Bar),
        ("pie", WidgetType::Pie),
        ("table", WidgetType::Table),
    ];

    fn parse(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
    }

    fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("table", |(n, _)| n)
    }
}

/// A widget's place on the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// First grid column, from 0.
    pub col: u64,
    /// First grid row, from 0.
    pub row: u64,
    /// Width in grid columns.
    pub w: u64,
    /// Height in grid rows.
    pub h: u64,
}

/// A widget.
#[derive(Debug, Clone, PartialEq)]
pub struct Widget {
    /// Its id, unique on the dashboard.
    pub id: String,
    /// What it draws.
    pub kind: WidgetType,
    /// Its heading.
    pub title: String,
    /// The DataView it shows.
    pub data_view_id: Uuid,
    /// The output column along the axis (labels of a pie).
    pub x: Option<String>,
    /// The output columns drawn (a table: the columns shown, all when empty).
    pub y: Vec<String>,
    /// Its place.
    pub layout: Layout,
}

impl Widget {
    /// The widget as stored and shown.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id, "type": self.kind.as_str(), "title": self.title,
            "dataViewId": self.data_view_id, "x": self.x, "y": self.y,
            "layout": { "col": self.layout.col, "row": self.layout.row,
                        "w": self.layout.w, "h": self.layout.h },
        })
    }

    /// Checks that `x` and `y` name columns of the view's output.
    pub fn check_columns(&self, index: usize, outputs: &[String]) -> Result<(), FieldError> {
        let known = |name: &str| outputs.iter().any(|o| o == name);
        if let Some(x) = &self.x
            && !known(x)
        {
            return Err(FieldError::new(
                format!("widgets[{index}].x"),
                format!("{x} is not an output column of the view"),
            ));
        }
        match self.y.iter().position(|y| !known(y)) {
            Some(i) => Err(FieldError::new(
                format!("widgets[{index}].y[{i}]"),
                format!("{} is not an output column of the view", self.y[i]),
            )),
            None => Ok(()),
        }
    }
}

/// Parses the `widgets` of a dashboard body (their views are checked by the service).
pub fn parse_widgets(value: Option<&Value>) -> Result<Vec<Widget>, FieldError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= WIDGETS_MAX => items,
        Some(_) => {
            return Err(FieldError::new(
                "widgets",
                format!("must be an array of at most {WIDGETS_MAX} widgets"),
            ));
        }
    };
    let mut widgets: Vec<Widget> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let widget = parse_widget(item, i)?;
        if widgets.iter().any(|w| w.id == widget.id) {
            return Err(FieldError::new(
                format!("widgets[{i}].id"),
                format!("{} is the id of an earlier widget", widget.id),
            ));
        }
        widgets.push(widget);
    }
    Ok(widgets)
}

fn parse_widget(item: &Value, i: usize) -> Result<Widget, FieldError> {
    let path = |key: &str| format!("widgets[{i}].{key}");
    let object: &Map<String, Value> = item
        .as_object()
        .ok_or_else(|| FieldError::new(format!("widgets[{i}]"), "must be an object"))?;
    let text = |key: &str| object.get(key).and_then(Value::as_str);
    let id = text("id")
        .filter(|id| !id.is_empty() && id.len() <= 64 && !id.chars().any(char::is_control))
        .ok_or_else(|| FieldError::new(path("id"), "must be a text of 1 to 64 characters"))?;
    let kind = text("type")
        .and_then(WidgetType::parse)
        .ok_or_else(|| FieldError::new(path("type"), "must be number, line, bar, pie or table"))?;
    let title = match object.get("title") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) if t.chars().count() <= 200 => t.trim().to_owned(),
        Some(_) => {
            return Err(FieldError::new(
                path("title"),
                "must be a text of at most 200 characters",
            ));
        }
    };
    let data_view_id = text("dataViewId")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| FieldError::new(path("dataViewId"), "must be the id of a DataView"))?;
    let x = match object.get("x") {
        None | Some(Value::Null) => None,
        Some(Value::String(x)) => Some(x.clone()),
        Some(_) => return Err(FieldError::new(path("x"), "must be an output column name")),
    };
    let y: Vec<String> = match object.get("y") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(y)) => vec![y.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| FieldError::new(path("y"), "must be output column names"))?,
        Some(_) => return Err(FieldError::new(path("y"), "must be output column names")),
    };
    match kind {
        WidgetType::Line | WidgetType::Bar | WidgetType::Pie if x.is_none() => {
            return Err(FieldError::new(
                path("x"),
                format!("a {} widget needs x", kind.as_str()),
            ));
        }
        WidgetType::Number | WidgetType::Pie if y.len() != 1 => {
            return Err(FieldError::new(
                path("y"),
                format!("a {} widget shows exactly one column", kind.as_str()),
            ));
        }
        WidgetType::Line | WidgetType::Bar if y.is_empty() => {
            return Err(FieldError::new(
                path("y"),
                format!("a {} widget needs at least one column", kind.as_str()),
            ));
        }
        _ => {}
    }
    let layout = parse_layout(object.get("layout"), i)?;
    Ok(Widget {
        id: id.to_owned(),
        kind,
        title,
        data_view_id,
        x,
        y,
        layout,
    })
}

fn parse_layout(value: Option<&Value>, i: usize) -> Result<Layout, FieldError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        // Unplaced widgets stack at full width, in order.
        return Ok(Layout {
            col: 0,
            row: 4 * i as u64,
            w: GRID_COLUMNS,
            h: 4,
        });
    };
    let number = |key: &str, min: u64, max: u64| {
        value
            .get(key)
            .and_then(Value::as_u64)
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                FieldError::new(
                    format!("widgets[{i}].layout.{key}"),
                    format!("must be a whole number from {min} to {max}"),
                )
            })
    };
    let layout = Layout {
        col: number("col", 0, GRID_COLUMNS - 1)?,
        row: number("row", 0, 1000)?,
        w: number("w", 1, GRID_COLUMNS)?,
        h: number("h", 1, 24)?,
    };
    if layout.col + layout.w > GRID_COLUMNS {
        return Err(FieldError::new(
            format!("widgets[{i}].layout.w"),
            format!("col + w must be at most {GRID_COLUMNS}"),
        ));
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(widget: Value) -> String {
        parse_widgets(Some(&json!([widget])))
            .unwrap_err()
            .field
            .to_string()
    }

    #[test]
    fn widgets_round_trip_and_default_their_layout() {
        let view = Uuid::nil();
        let given = json!([
            { "id": "w1", "type": "line", "title": "Sales per day", "dataViewId": view,
              "x": "day", "y": ["total"], "layout": { "col": 0, "row": 0, "w": 6, "h": 4 } },
            { "id": "w2", "type": "number", "title": "", "dataViewId": view, "x": null, "y": ["total"] },
        ]);
        let widgets = parse_widgets(Some(&given)).unwrap();
        assert_eq!(widgets[0].to_json(), given[0]);
        assert_eq!(
            widgets[1].layout,
            Layout {
                col: 0,
                row: 4,
                w: 12,
                h: 4
            }
        );
        assert!(
            widgets[0]
                .check_columns(0, &["day".into(), "total".into()])
                .is_ok()
        );
        assert_eq!(
            widgets[0]
                .check_columns(0, &["day".into()])
                .unwrap_err()
                .field,
            "widgets[0].y[0]"
        );
    }

    #[test]
    fn mistakes_name_their_field() {
        let view = Uuid::nil();
        let cases = [
            (
                json!({ "type": "line", "dataViewId": view }),
                "widgets[0].id",
            ),
            (
                json!({ "id": "a", "type": "donut", "dataViewId": view }),
                "widgets[0].type",
            ),
            (
                json!({ "id": "a", "type": "line", "dataViewId": "x", "x": "d", "y": ["t"] }),
                "widgets[0].dataViewId",
            ),
            (
                json!({ "id": "a", "type": "bar", "dataViewId": view, "y": ["t"] }),
                "widgets[0].x",
            ),
            (
                json!({ "id": "a", "type": "pie", "dataViewId": view, "x": "d", "y": ["t", "u"] }),
                "widgets[0].y",
            ),
            (
                json!({ "id": "a", "type": "number", "dataViewId": view, "y": ["t"],
                        "layout": { "col": 8, "row": 0, "w": 6, "h": 2 } }),
                "widgets[0].layout.w",
            ),
            (
                json!({ "id": "a", "type": "table", "dataViewId": view,
                        "layout": { "col": 12, "row": 0, "w": 1, "h": 2 } }),
                "widgets[0].layout.col",
            ),
        ];
        for (widget, field) in cases {
            assert_eq!(field_of(widget.clone()), field, "{widget}");
        }
        let twice = json!([{ "id": "a", "type": "table", "dataViewId": view },
                           { "id": "a", "type": "table", "dataViewId": view }]);
        assert_eq!(
            parse_widgets(Some(&twice)).unwrap_err().field,
            "widgets[1].id"
        );
    }
}
