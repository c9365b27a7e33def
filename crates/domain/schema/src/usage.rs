//! What depends on a table's columns outside the table itself: grant filters,
//! DataViews, published workflows' data steps, indexes and other tables'
//! foreign keys. A column still in use is neither renamed nor dropped.

use serde_json::Value;
use uuid::Uuid;

/// Everything that may name the columns of one table, read in the change's
/// transaction.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// `schema.table`, as data steps and DataViews name it.
    pub resource: String,
    /// The table's grants: id and row filter.
    pub grants: Vec<(Uuid, Option<Value>)>,
    /// DataViews by slug, with their draft and published definitions.
    pub dataviews: Vec<(String, Vec<Value>)>,
    /// Published workflows by slug, with their published definition.
    pub workflows: Vec<(String, Value)>,
    /// The table's indexes (primary key and unique constraints left out)
    /// with the columns each covers.
    pub indexes: Vec<(String, Vec<String>)>,
    /// Foreign keys of other tables on a column of this one:
    /// (`schema.table` of the other table, the column here).
    pub referenced_by: Vec<(String, String)>,
}

impl Usage {
    /// What still uses `column`, named for a 409 message; `None` when free.
    pub fn user_of(&self, column: &str) -> Option<String> {
        if let Some((id, _)) = self
            .grants
            .iter()
            .find(|(_, filter)| filter.as_ref().is_some_and(|f| filter_names(f, column)))
        {
            return Some(format!("grant {id} filters on column {column}"));
        }
        if let Some((slug, _)) = self
            .dataviews
            .iter()
            .find(|(_, definitions)| definitions.iter().any(|d| self.view_uses(d, column)))
        {
            return Some(format!("DataView {slug} uses column {column}"));
        }
        if let Some((slug, _)) = self
            .workflows
            .iter()
            .find(|(_, published)| self.steps_use(published, column))
        {
            return Some(format!("workflow {slug} uses column {column}"));
        }
        if let Some((name, _)) = self
            .indexes
            .iter()
            .find(|(_, columns)| columns.len() > 1 && columns.iter().any(|c| c == column))
        {
            return Some(format!("index {name} covers column {column}"));
        }
        if let Some((table, _)) = self.referenced_by.iter().find(|(_, c)| c == column) {
            return Some(format!(
                "a foreign key of {table} references column {column}"
            ));
        }
        None
    }

    fn view_uses(&self, definition: &Value, column: &str) -> bool {
        if definition["source"].as_str() != Some(self.resource.as_str()) {
            return false;
        }
        let in_columns = definition["columns"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["column"].as_str() == Some(column)));
        in_columns || filter_names(&definition["filter"], column)
    }

    /// Whether a data step over this table, at any depth of `value`, names
    /// `column` in its filter, sort or data.
    fn steps_use(&self, value: &Value, column: &str) -> bool {
        match value {
            Value::Array(items) => items.iter().any(|v| self.steps_use(v, column)),
            Value::Object(map) => {
                let here = map.get("resource").and_then(Value::as_str) == Some(&self.resource)
                    && (map.get("filter").is_some_and(|f| filter_names(f, column))
                        || map.get("sort").is_some_and(|s| sort_names(s, column))
                        || map.get("data").is_some_and(|d| data_names(d, column)));
                here || map.values().any(|v| self.steps_use(v, column))
            }
            _ => false,
        }
    }
}

/// Whether a filter of the filter language names `column` at any depth.
fn filter_names(filter: &Value, column: &str) -> bool {
    match filter {
        Value::Object(map) => map
            .iter()
            .any(|(key, inner)| key == column || filter_names(inner, column)),
        Value::Array(items) => items.iter().any(|f| filter_names(f, column)),
        _ => false,
    }
}

fn sort_names(sort: &Value, column: &str) -> bool {
    let named = |s: &str| {
        s.split(',')
            .any(|part| part.trim().trim_start_matches('-') == column)
    };
    match sort {
        Value::String(s) => named(s),
        Value::Array(items) => items.iter().filter_map(Value::as_str).any(named),
        _ => false,
    }
}

fn data_names(data: &Value, column: &str) -> bool {
    match data {
        Value::Object(map) => map.contains_key(column),
        Value::Array(rows) => rows.iter().any(|row| data_names(row, column)),
        _ => false,
    }
}

/// The step types that name a table by `resource`.
const DATA_STEPS: [&str; 4] = ["query", "insert", "update", "delete"];

/// Rewrites every data step's `resource` equal to `from` into `to`, at any
/// depth (steps inside conditions, loops and error branches); a value a
/// step carries that merely has a `resource` key is left alone. Answers
/// whether anything changed.
pub fn rename_resource(value: &mut Value, from: &str, to: &str) -> bool {
    match value {
        Value::Array(items) => {
            let mut changed = false;
            for v in items {
                changed |= rename_resource(v, from, to);
            }
            changed
        }
        Value::Object(map) => {
            let mut changed = false;
            let data_step = map
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|kind| DATA_STEPS.contains(&kind));
            if data_step
                && let Some(resource) = map.get_mut("resource")
                && resource.as_str() == Some(from)
            {
                *resource = Value::String(to.to_owned());
                changed = true;
            }
            for v in map.values_mut() {
                changed |= rename_resource(v, from, to);
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn usage() -> Usage {
        Usage {
            resource: "public.orders".into(),
            grants: vec![(
                Uuid::nil(),
                Some(json!({ "or": [{ "owner": { "eq": "$USER.id" } }] })),
            )],
            dataviews: vec![(
                "totals".into(),
                vec![
                    json!({ "source": "public.orders", "columns": [{ "name": "t", "agg": "sum", "column": "amount" }] }),
                ],
            )],
            workflows: vec![(
                "intake".into(),
                json!({ "steps": [{ "id": "c", "type": "condition", "if": {}, "then": [
                    { "id": "q", "type": "query", "resource": "public.orders", "sort": "-placed_at" }
                ], "else": [] }] }),
            )],
            indexes: vec![
                ("orders_note_idx".into(), vec!["note".into()]),
                ("orders_a_b_idx".into(), vec!["state".into(), "kind".into()]),
            ],
            referenced_by: vec![("public.items".into(), "code".into())],
        }
    }

    #[test]
    fn each_kind_of_user_is_named() {
        let u = usage();
        assert!(u.user_of("owner").unwrap().starts_with("grant "));
        assert!(u.user_of("amount").unwrap().starts_with("DataView totals"));
        assert!(
            u.user_of("placed_at")
                .unwrap()
                .starts_with("workflow intake")
        );
        assert!(
            u.user_of("kind")
                .unwrap()
                .starts_with("index orders_a_b_idx")
        );
        assert!(u.user_of("code").unwrap().contains("public.items"));
        assert_eq!(
            u.user_of("note"),
            None,
            "an index on the column alone goes with it"
        );
        assert_eq!(u.user_of("free"), None);
    }

    #[test]
    fn renamed_resources_are_rewritten_at_every_depth() {
        let mut steps = usage().workflows[0].1.clone();
        assert!(rename_resource(
            &mut steps,
            "public.orders",
            "public.purchases"
        ));
        assert_eq!(steps["steps"][0]["then"][0]["resource"], "public.purchases");
        assert!(!rename_resource(&mut steps, "public.orders", "public.x"));
        // A value that only has a `resource` key is the workflow's data.
        let mut payload = json!({ "steps": [{ "id": "i", "type": "insert",
            "resource": "public.log", "data": { "resource": "public.orders" } }] });
        assert!(!rename_resource(&mut payload, "public.orders", "public.x"));
        assert_eq!(payload["steps"][0]["data"]["resource"], "public.orders");
    }
}
