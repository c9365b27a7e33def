//! Indexes: the `CREATE INDEX CONCURRENTLY` of a definition, with a partial
//! index's filter (the Data API's filter language) printed as literals.

use kernel::FieldError;
use kernel::filter::{Filter, Op, Operand};
use serde_json::Value;

use super::{TableFacts, fit_name, identifier, qualified, quote};

/// Index methods accepted; `search` is a GIN index over
/// `to_tsvector('simple', <column>)`.
pub const METHODS: [&str; 6] = ["btree", "hash", "gin", "gist", "brin", "search"];
/// Most columns of one index.
const COLUMNS_MAX: usize = 32;

/// An index as submitted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexInput {
    /// Its name (default `<table>_<col1>_<col2>…_idx`).
    pub name: Option<String>,
    /// Column names, `-name` for descending.
    pub columns: Vec<String>,
    /// Whether values (or combinations) are unique.
    pub unique: bool,
    /// btree (default), hash, gin, gist, brin or search.
    pub method: Option<String>,
    /// A filter of the Data API (no variables): a partial index.
    pub filter: Option<Value>,
}

/// An index ready to build.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexPlan {
    /// Schema of the table.
    pub schema: String,
    /// The table.
    pub table: String,
    /// Index name.
    pub name: String,
    /// `CREATE INDEX CONCURRENTLY …`; `CONCURRENTLY` is left out by
    /// [`IndexPlan::in_transaction`].
    pub sql: String,
    /// The partial index's filter, as submitted.
    pub filter: Option<Value>,
}

impl IndexPlan {
    /// The statement as a transaction may run it (not concurrently).
    pub fn in_transaction(&self) -> String {
        self.sql.replacen(" CONCURRENTLY", "", 1)
    }
}

/// Plans an index over the table `facts` describes.
pub fn create_index(facts: &TableFacts, input: &IndexInput) -> Result<IndexPlan, FieldError> {
    let method = input
        .method
        .as_deref()
        .unwrap_or("btree")
        .to_ascii_lowercase();
    if !METHODS.contains(&method.as_str()) {
        return Err(FieldError::new(
            "method",
            "must be btree, hash, gin, gist, brin or search",
        ));
    }
    if input.columns.is_empty() || input.columns.len() > COLUMNS_MAX {
        return Err(FieldError::new(
            "columns",
            format!("must name 1 to {COLUMNS_MAX} columns"),
        ));
    }
    let mut names = Vec::with_capacity(input.columns.len());
    let mut keys = Vec::with_capacity(input.columns.len());
    for (i, raw) in input.columns.iter().enumerate() {
        let field = format!("columns[{i}]");
        let (descending, bare) = match raw.strip_prefix('-') {
            Some(bare) => (true, bare),
            None => (false, raw.as_str()),
        };
        let name = identifier(bare, &field)?;
        let Some(column) = facts.column(&name) else {
            return Err(FieldError::new(field, "is not a column of the table"));
        };
        if names.contains(&name) {
            return Err(FieldError::new(field, "is named twice"));
        }
        if descending && method != "btree" {
            return Err(FieldError::new(field, "only a btree index is descending"));
        }
        let key = match method.as_str() {
            "search" => {
                if input.columns.len() != 1 || !is_text(&column.data_type) {
                    return Err(FieldError::new(
                        "columns",
                        "a search index covers one text column",
                    ));
                }
                format!("(to_tsvector('simple', {}))", quote(&name))
            }
            _ if descending => format!("{} DESC", quote(&name)),
            _ => quote(&name),
        };
        names.push(name);
        keys.push(key);
    }
    if input.unique && method != "btree" {
        return Err(FieldError::new("unique", "only a btree index is unique"));
    }
    let name = match &input.name {
        Some(name) => identifier(name, "name")?,
        None => fit_name(format!("{}_{}_idx", facts.table, names.join("_"))),
    };
    let using = if method == "search" { "gin" } else { &method };
    let mut sql = format!(
        "CREATE {}INDEX CONCURRENTLY {} ON {} USING {using} ({})",
        if input.unique { "UNIQUE " } else { "" },
        quote(&name),
        qualified(&facts.schema, &facts.table),
        keys.join(", ")
    );
    if let Some(filter) = &input.filter {
        let parsed = Filter::parse(filter, "where")?;
        sql.push_str(" WHERE ");
        sql.push_str(&predicate(facts, &parsed)?);
    }
    Ok(IndexPlan {
        schema: facts.schema.clone(),
        table: facts.table.clone(),
        name,
        sql,
        filter: input.filter.clone(),
    })
}

/// Plans `DROP INDEX CONCURRENTLY`.
pub fn drop_index(schema: &str, name: &str) -> Result<String, FieldError> {
    let name = identifier(name, "name")?;
    Ok(format!(
        "DROP INDEX CONCURRENTLY IF EXISTS {}",
        qualified(schema, &name)
    ))
}

fn is_text(data_type: &str) -> bool {
    data_type == "text" || data_type.starts_with("character")
}

/// A filter printed as SQL with quoted literals cast to each column's type
/// (an index predicate takes no parameters).
fn predicate(facts: &TableFacts, filter: &Filter) -> Result<String, FieldError> {
    let join = |items: &[Filter], glue: &str| -> Result<String, FieldError> {
        let parts = items
            .iter()
            .map(|f| predicate(facts, f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(format!("({})", parts.join(glue)))
    };
    match filter {
        Filter::And(items) => join(items, " AND "),
        Filter::Or(items) => join(items, " OR "),
        Filter::Not(inner) => Ok(format!("(NOT {})", predicate(facts, inner)?)),
        Filter::Condition {
            column,
            op,
            operand,
        } => {
            let Some(facts) = facts.column(column) else {
                return Err(FieldError::new(
                    format!("where.{column}"),
                    "is not a column of the table",
                ));
            };
            let col = quote(column);
            let at = format!("where.{column}");
            let lit = |operand: &Operand| literal(operand, &facts.data_type, &at);
            Ok(match op {
                Op::IsNull => match operand {
                    Operand::Literal(Value::Bool(true)) => format!("{col} IS NULL"),
                    Operand::Literal(Value::Bool(false)) => format!("{col} IS NOT NULL"),
                    _ => return Err(FieldError::new(at, "isNull takes true or false")),
                },
                Op::In | Op::Nin => {
                    let Operand::List(items) = operand else {
                        return Err(FieldError::new(at, "must be an array"));
                    };
                    let items = items.iter().map(lit).collect::<Result<Vec<_>, _>>()?;
                    let not = if *op == Op::Nin { "NOT " } else { "" };
                    format!("{col} {not}IN ({})", items.join(", "))
                }
                Op::Search => format!(
                    "to_tsvector('simple', {col}) @@ websearch_to_tsquery('simple', {})",
                    lit(operand)?
                ),
                _ => format!("{col} {} {}", symbol(*op), lit(operand)?),
            })
        }
    }
}

fn symbol(op: Op) -> &'static str {
    match op {
        Op::Eq => "=",
        Op::Neq => "<>",
        Op::Gt => ">",
        Op::Gte => ">=",
        Op::Lt => "<",
        Op::Lte => "<=",
        Op::Like => "LIKE",
        Op::Ilike => "ILIKE",
        Op::In | Op::Nin | Op::IsNull | Op::Search => "=",
    }
}

fn literal(operand: &Operand, data_type: &str, at: &str) -> Result<String, FieldError> {
    let text = match operand {
        Operand::Literal(Value::String(s)) => s.clone(),
        Operand::Literal(Value::Number(n)) => n.to_string(),
        Operand::Literal(Value::Bool(b)) => b.to_string(),
        Operand::Literal(_) => {
            return Err(FieldError::new(
                at.to_owned(),
                "must be a string, number or boolean",
            ));
        }
        Operand::User(_) | Operand::Period(_) | Operand::List(_) => {
            return Err(FieldError::new(
                at.to_owned(),
                "an index filter takes values, not variables",
            ));
        }
    };
    if text.contains('\0') {
        return Err(FieldError::new(at.to_owned(), "must not contain NUL"));
    }
    // An escape string: safe whatever `standard_conforming_strings` says.
    let escaped = text.replace('\\', "\\\\").replace('\'', "''");
    Ok(format!("E'{escaped}'::{data_type}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ColumnFacts;
    use serde_json::json;

    fn facts() -> TableFacts {
        let col = |name: &str, data_type: &str| ColumnFacts {
            name: name.into(),
            data_type: data_type.into(),
            ..ColumnFacts::default()
        };
        TableFacts {
            schema: "public".into(),
            table: "posts".into(),
            columns: vec![
                col("id", "bigint"),
                col("title", "text"),
                col("state", "text"),
            ],
        }
    }

    fn input(columns: &[&str]) -> IndexInput {
        IndexInput {
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            ..IndexInput::default()
        }
    }

    #[test]
    fn a_partial_descending_index_prints_its_filter_as_quoted_literals() {
        let plan = create_index(
            &facts(),
            &IndexInput {
                filter: Some(json!({ "state": { "in": ["live", "it's\\"] }, "id": { "gt": 3 } })),
                ..input(&["-id", "state"])
            },
        )
        .unwrap();
        assert_eq!(plan.name, "posts_id_state_idx");
        assert_eq!(
            plan.sql,
            "CREATE INDEX CONCURRENTLY \"posts_id_state_idx\" ON \"public\".\"posts\" USING btree (\"id\" DESC, \"state\") \
             WHERE (\"id\" > E'3'::bigint AND \"state\" IN (E'live'::text, E'it''s\\\\'::text))"
        );
        assert!(!plan.in_transaction().contains("CONCURRENTLY"));
    }

    #[test]
    fn a_search_index_is_gin_over_a_simple_tsvector() {
        let plan = create_index(
            &facts(),
            &IndexInput {
                method: Some("search".into()),
                ..input(&["title"])
            },
        )
        .unwrap();
        assert!(
            plan.sql
                .ends_with("USING gin ((to_tsvector('simple', \"title\")))"),
            "{}",
            plan.sql
        );
    }

    #[test]
    fn refusals_name_their_field() {
        let refused = |i: IndexInput| create_index(&facts(), &i).unwrap_err().field;
        assert_eq!(refused(input(&[])), "columns");
        assert_eq!(refused(input(&["nope"])), "columns[0]");
        assert_eq!(refused(input(&["id", "id"])), "columns[1]");
        let hash_desc = IndexInput {
            method: Some("hash".into()),
            ..input(&["-id"])
        };
        assert_eq!(refused(hash_desc), "columns[0]");
        let search_int = IndexInput {
            method: Some("search".into()),
            ..input(&["id"])
        };
        assert_eq!(refused(search_int), "columns");
        let unique_gin = IndexInput {
            method: Some("gin".into()),
            unique: true,
            ..input(&["title"])
        };
        assert_eq!(refused(unique_gin), "unique");
        let variable = IndexInput {
            filter: Some(json!({ "state": { "eq": "$USER.id" } })),
            ..input(&["id"])
        };
        assert_eq!(refused(variable), "where.state");
        let unknown = IndexInput {
            method: Some("rtree".into()),
            ..input(&["id"])
        };
        assert_eq!(refused(unknown), "method");
    }
}
