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
