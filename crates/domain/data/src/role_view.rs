//! What a role may do with a table, for its OpenAPI document.

use permissions::Action;

use crate::table::{Column, Table};

/// What one role may do with one exposed table, for its OpenAPI document.
#[derive(Debug)]
pub struct RoleView<'t> {
    /// The table.
    pub table: &'t Table,
    /// Each method the role may use, with the columns it reaches.
    pub methods: Vec<(&'static str, Vec<&'t Column>)>,
}

impl<'t> RoleView<'t> {
    /// The role's view of `table`; `None` when it may do nothing there.
    /// Members of Administrators (`admin`) may use every exposed method.
    pub fn of(table: &'t Table, role_id: uuid::Uuid, admin: bool) -> Option<Self> {
        let methods: Vec<(&'static str, Vec<&'t Column>)> = [
            ("GET", Action::Read),
            ("POST", Action::Create),
            ("PATCH", Action::Update),
            ("DELETE", Action::Delete),
        ]
        .into_iter()
        .filter(|(method, _)| table.exposes(method))
        .filter_map(|(method, action)| {
            let scopes: Vec<_> = table
                .scopes
                .iter()
                .filter(|s| s.role_id == role_id && s.action == action)
                .collect();
            if !admin && scopes.is_empty() {
                return None;
            }
            let columns = table
                .columns
                .iter()
                .filter(|c| admin || scopes.iter().any(|s| s.covers(&c.name)))
                .filter(|c| action == Action::Read || action == Action::Delete || c.writable)
                .collect();
            Some((method, columns))
        })
        .collect();
        (!methods.is_empty()).then_some(Self { table, methods })
    }
}

/// The embeds of related rows a role may put in `select` on `table`, as
/// `alias:fk_column(*)` and `alias:schema.table!fk_column(*)`: each
/// single-column foreign key whose column `readable_columns` holds, to a
/// table in `readable`, and each foreign key of a table in `readable` to
/// this one.
pub fn embeds_from(
    table: &Table,
    readable_columns: &[&Column],
    readable: &[&Table],
) -> Vec<String> {
    let reachable = |schema: &str, name: &str| {
        readable
            .iter()
            .any(|t| t.schema == schema && t.name == name)
    };
    let to_one = table
        .foreign_keys
        .iter()
        .filter(|k| readable_columns.iter().any(|c| c.name == k.column))
        .filter(|k| reachable(&k.schema, &k.table))
        .map(|k| format!("{}:{}(*)", k.table, k.column));
    let to_many = readable.iter().flat_map(|other| {
        other
            .foreign_keys
            .iter()
            .filter(|k| k.schema == table.schema && k.table == table.name)
            .map(move |k| {
                format!(
                    "{}:{}.{}!{}(*)",
                    other.name, other.schema, other.name, k.column
                )
            })
    });
    to_one.chain(to_many).collect()
}
