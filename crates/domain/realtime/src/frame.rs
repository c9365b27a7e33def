//! The text of what a subscriber receives: Server-Sent Events frames.

use serde_json::{Map, Value};

/// Tells a client whose `Last-Event-ID` cannot be replayed to reload.
pub(crate) const RESET: &str = "event: reset\ndata: {}\n\n";
/// Tells a client it was too slow to keep up and was dropped.
pub const OVERFLOW: &str = "event: overflow\ndata: {}\n\n";

/// The frame one event becomes for one view of its table, or nothing when
/// the view sees no difference. `new` and `old` are the rows after and
/// before the change as the view shows them, when it reaches them; `key`
/// names the table's key columns.
pub(crate) fn frame(
    id: i64,
    kind: &str,
    resource: &str,
    key: &[&str],
    new: Option<&str>,
    old: Option<&str>,
) -> Option<String> {
    let resource = Value::String(resource.to_owned());
    let (event, data) = match (kind, new, old) {
        ("insert", Some(row), _) | ("update", Some(row), None) => (
            "insert",
            format!("{{\"resource\":{resource},\"row\":{row}}}"),
        ),
        ("update", Some(row), Some(before)) if row != before => (
            "update",
            format!("{{\"resource\":{resource},\"row\":{row},\"old\":{before}}}"),
        ),
        ("delete" | "update", None, Some(before)) => (
            "delete",
            format!(
                "{{\"resource\":{resource},\"row\":{}}}",
                key_columns(before, key)
            ),
        ),
        _ => return None,
    };
    Some(format!("id: {id}\nevent: {event}\ndata: {data}\n\n"))
}

/// The key columns of the JSON object `row`.
fn key_columns(row: &str, key: &[&str]) -> Value {
    let Ok(Value::Object(mut all)) = serde_json::from_str::<Value>(row) else {
        return Value::Object(Map::new());
    };
    Value::Object(
        key.iter()
            .filter_map(|name| all.remove_entry(*name))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &str = r#"{"id":1,"title":"a","secret":null}"#;
    const CHANGED: &str = r#"{"id":1,"title":"b","secret":null}"#;

    #[test]
    fn each_change_is_told_as_the_view_sees_it() {
        let f = |kind, new, old| frame(7, kind, "app.notes", &["id"], new, old);
        assert_eq!(
            f("insert", Some(ROW), None).as_deref(),
            Some(
                "id: 7\nevent: insert\ndata: {\"resource\":\"app.notes\",\"row\":{\"id\":1,\"title\":\"a\",\"secret\":null}}\n\n"
            )
        );
        assert_eq!(f("insert", None, None), None);
        let update = f("update", Some(CHANGED), Some(ROW)).unwrap();
        assert!(update.contains("event: update\n"), "{update}");
        assert!(update.contains(r#""old":{"id":1,"title":"a""#), "{update}");
        // Nothing this view shows changed: nothing is sent.
        assert_eq!(f("update", Some(ROW), Some(ROW)), None);
        // Out of the view: a delete with the key; into it: an insert.
        assert_eq!(
            f("update", None, Some(ROW)).as_deref(),
            Some("id: 7\nevent: delete\ndata: {\"resource\":\"app.notes\",\"row\":{\"id\":1}}\n\n")
        );
        assert!(
            f("update", Some(ROW), None)
                .unwrap()
                .contains("event: insert\n")
        );
        assert!(
            f("delete", None, Some(ROW))
                .unwrap()
                .contains(r#""row":{"id":1}"#)
        );
        assert_eq!(f("delete", None, None), None);
        assert_eq!(f("update", None, None), None);
    }
}
