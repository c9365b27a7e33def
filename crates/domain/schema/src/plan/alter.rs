//! Changes to tables that exist: rename a table, change or drop a column.
//! Planned from the catalog's facts as read in the change's own transaction.

use std::collections::BTreeMap;

use kernel::FieldError;

use super::{Plan, fit_name, identifier, qualified, quote, unique_constraint};
use crate::expr::{self, Context};
use crate::plan::{Confirm, MESSAGE_MAX};

/// What the catalog says about one column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnFacts {
    /// Column name.
    pub name: String,
    /// Its type, as `format_type` prints it.
    pub data_type: String,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// Whether it is (part of) the primary key.
    pub primary_key: bool,
    /// Its single-column CHECK constraints.
    pub checks: Vec<String>,
    /// Its single-column UNIQUE constraint.
    pub unique: Option<String>,
}

/// What the catalog says about a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
    /// Its columns, in order.
    pub columns: Vec<ColumnFacts>,
}

impl TableFacts {
    /// The named column.
    pub fn column(&self, name: &str) -> Option<&ColumnFacts> {
        self.columns.iter().find(|c| c.name == name)
    }

    fn names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name.clone()).collect()
    }
}

/// A change of one column: each field absent is kept; `Some(None)` drops a
/// default, a check or a check message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnPatch {
    /// New name.
    pub name: Option<String>,
    /// New type; existing values are converted.
    pub data_type: Option<String>,
    /// Whether NULL is allowed.
    pub nullable: Option<bool>,
    /// Default expression.
    pub default: Option<Option<String>>,
    /// CHECK condition (replaces the column's checks).
    pub check: Option<Option<String>>,
    /// Message of a CHECK violation.
    pub check_message: Option<Option<String>>,
    /// Whether values are unique.
    pub unique: Option<bool>,
}

impl ColumnPatch {
    fn is_empty(&self) -> bool {
        self == &ColumnPatch::default()
    }
}

/// An alter plan's statements, each with the field it answers for.
struct Statements {
    target: String,
    statements: Vec<String>,
    fields: Vec<&'static str>,
}

impl Statements {
    fn push(&mut self, field: &'static str, action: String) {
        self.statements
            .push(format!("ALTER TABLE {} {action}", self.target));
        self.fields.push(field);
    }
}

/// Plans `ALTER TABLE … RENAME TO`.
pub fn rename_table(facts: &TableFacts, name: &str) -> Result<Plan, FieldError> {
    let name = identifier(name, "name")?;
    if name == facts.table {
        return Err(FieldError::new("name", "is the table's name already"));
    }
    Ok(Plan {
        schema: facts.schema.clone(),
        table: name.clone(),
        statements: vec![format!(
            "ALTER TABLE {} RENAME TO {}",
            qualified(&facts.schema, &facts.table),
            quote(&name)
        )],
        confirm: Vec::new(),
        check_messages: BTreeMap::new(),
        fields: vec!["name"],
    })
}

/// Plans a change of `column`; `check_messages` of the plan are the new
/// messages (an empty message: removed).
pub fn alter_column(
    facts: &TableFacts,
    column: &ColumnFacts,
    patch: &ColumnPatch,
) -> Result<Plan, FieldError> {
    if patch.is_empty() {
        return Err(FieldError::new(
            "data",
            "names nothing to change (name, dataType, nullable, default, check, checkMessage, unique)",
        ));
    }
    let table = &facts.table;
    let mut out = Statements {
        target: qualified(&facts.schema, table),
        statements: Vec::new(),
        fields: Vec::new(),
    };
    let mut confirm = Vec::new();
    let mut check_messages = BTreeMap::new();
    let mut names = facts.names();
    let mut current = column.name.clone();
    if let Some(raw) = &patch.name {
        let name = identifier(raw, "name")?;
        if name != column.name {
            if facts.column(&name).is_some() {
                return Err(FieldError::new("name", "is used by another column"));
            }
            out.push(
                "name",
                format!("RENAME COLUMN {} TO {}", quote(&current), quote(&name)),
            );
            names.retain(|n| n != &current);
            names.push(name.clone());
            current = name;
        }
    }
    let col = quote(&current);
    if let Some(raw) = &patch.data_type {
        let data_type = expr::data_type(raw).map_err(|e| FieldError::new("dataType", e.0))?;
        confirm.push(Confirm::Type {
            field: "dataType".into(),
            data_type: data_type.clone(),
        });
        out.push(
            "dataType",
            format!("ALTER COLUMN {col} TYPE {data_type} USING {col}::{data_type}"),
        );
    }
    match patch.nullable {
        Some(true) if column.primary_key => {
            return Err(FieldError::new(
                "nullable",
                "a primary key column cannot be nullable",
            ));
        }
        Some(true) => out.push("nullable", format!("ALTER COLUMN {col} DROP NOT NULL")),
        Some(false) => out.push("nullable", format!("ALTER COLUMN {col} SET NOT NULL")),
        None => {}
    }
    match &patch.default {
        Some(None) => out.push("default", format!("ALTER COLUMN {col} DROP DEFAULT")),
        Some(Some(raw)) => {
            let default = expr::expression(raw, Context::Default)
                .map_err(|e| FieldError::new("default", e.0))?;
            out.push(
                "default",
                format!("ALTER COLUMN {col} SET DEFAULT {default}"),
            );
        }
        None => {}
    }
    let checked = match &patch.check {
        Some(check) => {
            for old in &column.checks {
                check_messages.insert(old.clone(), String::new());
                out.push("check", format!("DROP CONSTRAINT {}", quote(old)));
            }
            match check {
                None => None,
                Some(raw) => {
                    let condition = expr::expression(raw, Context::Check(&names))
                        .map_err(|e| FieldError::new("check", e.0))?;
                    let name = fit_name(format!("{table}_{current}_check"));
                    out.push(
                        "check",
                        format!("ADD CONSTRAINT {} CHECK ({condition})", quote(&name)),
                    );
                    Some(name)
                }
            }
        }
        None => column.checks.first().cloned(),
    };
    match (&patch.check_message, &checked) {
        (None, _) => {}
        (Some(_), None) => {
            return Err(FieldError::new("checkMessage", "needs a check"));
        }
        (Some(None), Some(name)) => {
            check_messages.insert(name.clone(), String::new());
        }
        (Some(Some(m)), Some(name)) => {
            if m.trim().is_empty() || m.chars().count() > MESSAGE_MAX {
                return Err(FieldError::new(
                    "checkMessage",
                    format!("must be 1 to {MESSAGE_MAX} characters"),
                ));
            }
            check_messages.insert(name.clone(), m.trim().to_owned());
        }
    }
    match (patch.unique, &column.unique) {
        (Some(true), None) if !column.primary_key => {
            out.push(
                "unique",
                format!("ADD {}", unique_constraint(table, &current)),
            );
        }
        (Some(false), Some(name)) => {
            out.push("unique", format!("DROP CONSTRAINT {}", quote(name)));
        }
        _ => {}
    }
    Ok(Plan {
        schema: facts.schema.clone(),
        table: table.clone(),
        statements: out.statements,
        confirm,
        check_messages,
        fields: out.fields,
    })
}

/// Plans `ALTER TABLE … DROP COLUMN`; a primary-key column is refused.
pub fn drop_column(facts: &TableFacts, column: &ColumnFacts) -> Result<Plan, FieldError> {
    if column.primary_key {
        return Err(FieldError::new(
            "column",
            "a primary key column cannot be dropped",
        ));
    }
    if facts.columns.len() == 1 {
        return Err(FieldError::new(
            "column",
            "a table keeps at least one column (drop the table instead)",
        ));
    }
    Ok(Plan {
        schema: facts.schema.clone(),
        table: facts.table.clone(),
        statements: vec![format!(
            "ALTER TABLE {} DROP COLUMN {}",
            qualified(&facts.schema, &facts.table),
            quote(&column.name)
        )],
        confirm: Vec::new(),
        check_messages: BTreeMap::new(),
        fields: vec!["column"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> TableFacts {
        TableFacts {
            schema: "public".into(),
            table: "orders".into(),
            columns: vec![
                ColumnFacts {
                    name: "id".into(),
                    data_type: "uuid".into(),
                    primary_key: true,
                    ..ColumnFacts::default()
                },
                ColumnFacts {
                    name: "amount".into(),
                    data_type: "integer".into(),
                    nullable: true,
                    checks: vec!["orders_amount_check".into()],
                    ..ColumnFacts::default()
                },
            ],
        }
    }

    #[test]
    fn a_rename_and_a_new_type_run_in_that_order_on_the_new_name() {
        let f = facts();
        let patch = ColumnPatch {
            name: Some("total".into()),
            data_type: Some("numeric(12,2)".into()),
            ..ColumnPatch::default()
        };
        let plan = alter_column(&f, &f.columns[1], &patch).unwrap();
        assert_eq!(
            plan.sql(),
            "ALTER TABLE \"public\".\"orders\" RENAME COLUMN \"amount\" TO \"total\";\n\
             ALTER TABLE \"public\".\"orders\" ALTER COLUMN \"total\" TYPE NUMERIC(12,2) USING \"total\"::NUMERIC(12,2);"
        );
        assert_eq!(plan.fields, ["name", "dataType"]);
    }

    #[test]
    fn a_new_check_replaces_the_old_and_may_name_renamed_columns() {
        let f = facts();
        let patch = ColumnPatch {
            name: Some("total".into()),
            check: Some(Some("total > 0".into())),
            check_message: Some(Some(" Positive ".into())),
            ..ColumnPatch::default()
        };
        let plan = alter_column(&f, &f.columns[1], &patch).unwrap();
        assert!(
            plan.sql()
                .contains("DROP CONSTRAINT \"orders_amount_check\"")
        );
        assert!(
            plan.sql()
                .contains("ADD CONSTRAINT \"orders_total_check\" CHECK (total > 0)")
        );
        assert_eq!(plan.check_messages["orders_total_check"], "Positive");
        assert_eq!(plan.check_messages["orders_amount_check"], "");
    }

    #[test]
    fn refusals_name_their_field() {
        let f = facts();
        let refused = |patch: ColumnPatch, column: usize| {
            alter_column(&f, &f.columns[column], &patch)
                .unwrap_err()
                .field
        };
        assert_eq!(refused(ColumnPatch::default(), 1), "data");
        let taken = ColumnPatch {
            name: Some("id".into()),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(taken, 1), "name");
        let bad_type = ColumnPatch {
            data_type: Some("text; DROP TABLE x".into()),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(bad_type, 1), "dataType");
        let nullable_key = ColumnPatch {
            nullable: Some(true),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(nullable_key, 0), "nullable");
        let subquery = ColumnPatch {
            default: Some(Some("(SELECT 1)".into())),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(subquery, 1), "default");
        let foreign = ColumnPatch {
            check: Some(Some("other > 1".into())),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(foreign, 1), "check");
        let orphan_message = ColumnPatch {
            check: Some(None),
            check_message: Some(Some("x".into())),
            ..ColumnPatch::default()
        };
        assert_eq!(refused(orphan_message, 1), "checkMessage");
        assert_eq!(drop_column(&f, &f.columns[0]).unwrap_err().field, "column");
    }

    #[test]
    fn renames_are_quoted_and_checked() {
        let f = facts();
        assert_eq!(
            rename_table(&f, "purchases").unwrap().sql(),
            "ALTER TABLE \"public\".\"orders\" RENAME TO \"purchases\";"
        );
        assert_eq!(rename_table(&f, "Bad\"").unwrap_err().field, "name");
        assert_eq!(rename_table(&f, "orders").unwrap_err().field, "name");
    }
}
