//! Table definitions, their validation and the DDL they become. Every name is
//! checked and quoted; every type and expression is parsed (see `expr`).

use std::collections::BTreeMap;

use kernel::FieldError;

use crate::expr::{self, Context};

/// Longest identifier PostgreSQL keeps.
const IDENT_MAX: usize = 63;
/// Most columns in one definition.
const COLUMNS_MAX: usize = 200;
/// Longest check message.
const MESSAGE_MAX: usize = 500;
/// Foreign-key actions accepted for `onDelete`.
const ON_DELETE: &[&str] = &[
    "NO ACTION",
    "RESTRICT",
    "CASCADE",
    "SET NULL",
    "SET DEFAULT",
];

/// A foreign key as submitted.
#[derive(Debug, Clone, Default)]
pub struct ForeignKeyInput {
    /// Schema of the target (default: the table's own).
    pub target_schema: Option<String>,
    /// Target table.
    pub target_table: String,
    /// Target column (a primary or unique key).
    pub target_column: String,
    /// `RESTRICT`, `CASCADE`, `SET NULL`, `SET DEFAULT` or `NO ACTION` (default).
    pub on_delete: Option<String>,
}

/// A column as submitted.
#[derive(Debug, Clone, Default)]
pub struct ColumnInput {
    /// Column name.
    pub name: String,
    /// PostgreSQL type.
    pub data_type: String,
    /// Whether it is the primary key.
    pub primary_key: bool,
    /// Default expression.
    pub default: Option<String>,
    /// `ALWAYS` for `GENERATED ALWAYS AS IDENTITY`.
    pub identity: Option<String>,
    /// Whether NULL is allowed (default true, false for keys and identities).
    pub nullable: Option<bool>,
    /// Reference to another table.
    pub foreign_key: Option<ForeignKeyInput>,
    /// CHECK condition.
    pub check: Option<String>,
    /// Message of a CHECK violation.
    pub check_message: Option<String>,
    /// Whether the column's values are unique (a UNIQUE constraint).
    pub unique: bool,
}

/// A table as submitted.
#[derive(Debug, Clone, Default)]
pub struct TableInput {
    /// Table name.
    pub name: String,
    /// Its columns.
    pub columns: Vec<ColumnInput>,
}

/// A fact only the database can confirm, named by the field it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// The type exists (`to_regtype`).
    Type { field: String, data_type: String },
    /// The type is an integer type (identity columns).
    IntegerType { field: String, data_type: String },
    /// The target is an existing table whose column is a primary or unique key.
    KeyTarget {
        field: String,
        schema: String,
        table: String,
        column: String,
    },
}

/// The DDL of a change, with what must be confirmed before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Schema of the table.
    pub schema: String,
    /// The table.
    pub table: String,
    /// Statements, in order.
    pub statements: Vec<String>,
    /// Checks to run first, in the same transaction.
    pub confirm: Vec<Confirm>,
    /// CHECK constraint name -> message shown on violation.
    pub check_messages: BTreeMap<String, String>,
    /// The request field each statement comes from, when one does (a
    /// failure of the statement is reported on it).
    pub fields: Vec<&'static str>,
}

impl Plan {
    /// A plan that runs nothing on `schema.table` (what a resource's
    /// refresh after an index build needs to know).
    pub fn nothing(schema: &str, table: &str) -> Self {
        Self {
            schema: schema.to_owned(),
            table: table.to_owned(),
            statements: Vec::new(),
            confirm: Vec::new(),
            check_messages: BTreeMap::new(),
            fields: Vec::new(),
        }
    }

    /// The statements as one SQL text, as preview shows and create runs.
    pub fn sql(&self) -> String {
        self.statements
            .iter()
            .map(|s| format!("{s};"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Checks a name: ASCII letters, digits and `_`, not starting with a digit, at most 63 bytes.
pub fn identifier(raw: &str, field: &str) -> Result<String, FieldError> {
    let ok = !raw.is_empty()
        && raw.len() <= IDENT_MAX
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !raw.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(FieldError::new(
            field.to_owned(),
            "must be 1 to 63 characters of a-z, A-Z, 0-9 and _, not starting with a digit",
        ))
    }
}

/// Checks a schema name for application tables.
pub fn schema_name(raw: &str) -> Result<String, FieldError> {
    let name = identifier(raw, "schema")?;
    let lower = name.to_ascii_lowercase();
    if lower == "svc" || lower == "information_schema" || lower.starts_with("pg_") {
        return Err(FieldError::new("schema", "is reserved"));
    }
    Ok(name)
}

use kernel::sql::quote_ident as quote;

fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote(schema), quote(table))
}

/// A name of at most 63 bytes derived from `wanted`, unique by a hash suffix when cut.
fn fit_name(wanted: String) -> String {
    if wanted.len() <= IDENT_MAX {
        return wanted;
    }
    let hash = wanted.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}_{:08x}", &wanted[..IDENT_MAX - 9], hash & 0xffff_ffff)
}

/// A column ready for DDL.
struct Column {
    name: String,
    sql: String,
    primary_key: bool,
    check: Option<(String, String)>,
    foreign_key: Option<String>,
    check_message: Option<String>,
    unique: Option<String>,
}

fn column(
    schema: &str,
    table: &str,
    input: &ColumnInput,
    path: &str,
    columns: &[String],
    confirm: &mut Vec<Confirm>,
) -> Result<Column, FieldError> {
    let at = |attr: &str| {
        if path.is_empty() {
            attr.to_owned()
        } else {
            format!("{path}.{attr}")
        }
    };
    let invalid = |attr: &str, e: expr::Refused| FieldError::new(at(attr), e.0);
    let name = identifier(&input.name, &at("name"))?;
    let data_type = expr::data_type(&input.data_type).map_err(|e| invalid("dataType", e))?;
    confirm.push(Confirm::Type {
        field: at("dataType"),
        data_type: data_type.clone(),
    });
    let identity = match input
        .identity
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None => false,
        Some("ALWAYS") => true,
        Some(_) => return Err(FieldError::new(at("identity"), "must be ALWAYS")),
    };
    if identity {
        if input.default.is_some() {
            return Err(FieldError::new(
                at("identity"),
                "an identity column has no default",
            ));
        }
        confirm.push(Confirm::IntegerType {
            field: at("identity"),
            data_type: data_type.clone(),
        });
    }
    let not_null = match input.nullable {
        Some(true) if input.primary_key || identity => {
            return Err(FieldError::new(
                at("nullable"),
                "a key or identity column cannot be nullable",
            ));
        }
        Some(nullable) => !nullable,
        None => input.primary_key || identity,
    };
    let mut sql = format!("{} {data_type}", quote(&name));
    if identity {
        sql.push_str(" GENERATED ALWAYS AS IDENTITY");
    }
    if not_null {
        sql.push_str(" NOT NULL");
    }
    if let Some(default) = &input.default {
        let default =
            expr::expression(default, Context::Default).map_err(|e| invalid("default", e))?;
        sql.push_str(&format!(" DEFAULT {default}"));
    }
    let check = match &input.check {
        Some(raw) => {
            let condition =
                expr::expression(raw, Context::Check(columns)).map_err(|e| invalid("check", e))?;
            Some((fit_name(format!("{table}_{name}_check")), condition))
        }
        None => None,
    };
    let check_message = match (&input.check_message, &check) {
        (None, _) => None,
        (Some(_), None) => return Err(FieldError::new(at("checkMessage"), "needs a check")),
        (Some(m), Some(_)) if m.trim().is_empty() || m.chars().count() > MESSAGE_MAX => {
            return Err(FieldError::new(
                at("checkMessage"),
                format!("must be 1 to {MESSAGE_MAX} characters"),
            ));
        }
        (Some(m), Some(_)) => Some(m.trim().to_owned()),
    };
    let foreign_key = match &input.foreign_key {
        None => None,
        Some(fk) => {
            let target_schema = match &fk.target_schema {
                Some(s) => identifier(s, &at("foreignKey.targetSchema"))?,
                None => schema.to_owned(),
            };
            let target_table = identifier(&fk.target_table, &at("foreignKey.targetTable"))?;
            let target_column = identifier(&fk.target_column, &at("foreignKey.targetColumn"))?;
            let on_delete = fk
                .on_delete
                .as_deref()
                .map(|a| a.trim().to_ascii_uppercase())
                .unwrap_or_else(|| "NO ACTION".into());
            if !ON_DELETE.contains(&on_delete.as_str()) {
                return Err(FieldError::new(
                    at("foreignKey.onDelete"),
                    "must be RESTRICT, CASCADE, SET NULL, SET DEFAULT or NO ACTION",
                ));
            }
            confirm.push(Confirm::KeyTarget {
                field: at("foreignKey"),
                schema: target_schema.clone(),
                table: target_table.clone(),
                column: target_column.clone(),
            });
            Some(format!(
                "CONSTRAINT {} FOREIGN KEY ({}) REFERENCES {} ({}) ON DELETE {on_delete}",
                quote(&fit_name(format!("{table}_{name}_fkey"))),
                quote(&name),
                qualified(&target_schema, &target_table),
                quote(&target_column)
            ))
        }
    };
    let unique = (input.unique && !input.primary_key).then(|| unique_constraint(table, &name));
    Ok(Column {
        name,
        sql,
        primary_key: input.primary_key,
        check,
        foreign_key,
        check_message,
        unique,
    })
}

/// `CONSTRAINT <table>_<column>_key UNIQUE (<column>)`.
fn unique_constraint(table: &str, column: &str) -> String {
    format!(
        "CONSTRAINT {} UNIQUE ({})",
        quote(&fit_name(format!("{table}_{column}_key"))),
        quote(column)
    )
}

/// The name of the index made with a foreign-key column.
pub fn fk_index_name(table: &str, column: &str) -> String {
    fit_name(format!("{table}_{column}_fkey_idx"))
}

fn fk_index(schema: &str, table: &str, column: &str) -> String {
    format!(
        "CREATE INDEX {} ON {} ({})",
        quote(&fk_index_name(table, column)),
        qualified(schema, table),
        quote(column)
    )
}

/// Plans `CREATE TABLE` (and its schema and foreign-key indexes) for a definition.
pub fn create_table(schema: &str, input: &TableInput) -> Result<Plan, FieldError> {
    let schema = schema_name(schema)?;
    let table = identifier(&input.name, "name")?;
    if input.columns.is_empty() || input.columns.len() > COLUMNS_MAX {
        return Err(FieldError::new("columns", "must have 1 to 200 columns"));
    }
    let mut names: Vec<String> = Vec::with_capacity(input.columns.len());
    for (i, c) in input.columns.iter().enumerate() {
        let name = identifier(&c.name, &format!("columns[{i}].name"))?;
        if names.contains(&name) {
            return Err(FieldError::new(
                format!("columns[{i}].name"),
                "is used by another column",
            ));
        }
        names.push(name);
    }
    if let Some(second) = input
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.primary_key)
        .nth(1)
    {
        return Err(FieldError::new(
            format!("columns[{}].primaryKey", second.0),
            "a table has one primary key column",
        ));
    }
    let mut confirm = Vec::new();
    let mut lines = Vec::new();
    let mut constraints = Vec::new();
    let mut indexes = Vec::new();
    let mut check_messages = BTreeMap::new();
    for (i, input_column) in input.columns.iter().enumerate() {
        let c = column(
            &schema,
            &table,
            input_column,
            &format!("columns[{i}]"),
            &names,
            &mut confirm,
        )?;
        lines.push(c.sql);
        if c.primary_key {
            constraints.push(format!(
                "CONSTRAINT {} PRIMARY KEY ({})",
                quote(&fit_name(format!("{table}_pkey"))),
                quote(&c.name)
            ));
        }
        if let Some((constraint, condition)) = c.check {
            if let Some(message) = c.check_message {
                check_messages.insert(constraint.clone(), message);
            }
            constraints.push(format!(
                "CONSTRAINT {} CHECK ({condition})",
                quote(&constraint)
            ));
        }
        constraints.extend(c.unique);
        if let Some(fk) = c.foreign_key {
            constraints.push(fk);
            indexes.push(fk_index(&schema, &table, &c.name));
        }
    }
    lines.extend(constraints);
    let mut statements = vec![
        format!("CREATE SCHEMA IF NOT EXISTS {}", quote(&schema)),
        format!(
            "CREATE TABLE {} (\n  {}\n)",
            qualified(&schema, &table),
            lines.join(",\n  ")
        ),
    ];
    statements.extend(indexes);
    Ok(Plan {
        schema,
        table,
        statements,
        confirm,
        check_messages,
        fields: Vec::new(),
    })
}

/// Plans `ALTER TABLE … ADD COLUMN` for one column; `existing` are the table's columns.
pub fn add_column(
    schema: &str,
    table: &str,
    input: &ColumnInput,
    existing: &[String],
) -> Result<Plan, FieldError> {
    let schema = schema_name(schema)?;
    let table = identifier(table, "table")?;
    let name = identifier(&input.name, "name")?;
    if existing.contains(&name) {
        return Err(FieldError::new("name", "is used by another column"));
    }
    if input.primary_key {
        return Err(FieldError::new(
            "primaryKey",
            "a primary key cannot be added to an existing table",
        ));
    }
    let mut columns = existing.to_vec();
    columns.push(name);
    let mut confirm = Vec::new();
    let c = column(&schema, &table, input, "", &columns, &mut confirm)?;
    let target = qualified(&schema, &table);
    let mut statements = vec![format!("ALTER TABLE {target} ADD COLUMN {}", c.sql)];
    let mut check_messages = BTreeMap::new();
    if let Some((constraint, condition)) = c.check {
        if let Some(message) = c.check_message {
            check_messages.insert(constraint.clone(), message);
        }
        statements.push(format!(
            "ALTER TABLE {target} ADD CONSTRAINT {} CHECK ({condition})",
            quote(&constraint)
        ));
    }
    if let Some(unique) = c.unique {
        statements.push(format!("ALTER TABLE {target} ADD {unique}"));
    }
    if let Some(fk) = c.foreign_key {
        statements.push(format!("ALTER TABLE {target} ADD {fk}"));
        statements.push(fk_index(&schema, &table, &c.name));
    }
    Ok(Plan {
        schema,
        table,
        statements,
        confirm,
        check_messages,
        fields: Vec::new(),
    })
}

mod alter;
mod index;

pub use alter::{ColumnFacts, ColumnPatch, TableFacts, alter_column, drop_column, rename_table};
pub use index::{IndexInput, IndexPlan, METHODS as INDEX_METHODS, create_index, drop_index};

#[cfg(test)]
mod tests;
