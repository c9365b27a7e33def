//! `select` with related rows (API.md 13): `col`, `*`,
//! `alias:fk_column(...)` (to-one) and `alias:schema.table!fk_column(...)`
//! (to-many), nested up to [`DEPTH_MAX`] deep. Parsed into a tree of names
//! first; the related tables are loaded; then the tree is checked against
//! them and the caller's grants into the columns and embeds a read shows.

use std::collections::HashMap;
use std::sync::Arc;

use permissions::{Access, Action, Principal};

use crate::checks::{masked, readable, readable_columns, scoped};
use crate::error::{DataError, query_error};
use crate::query::{Embed, Output};
use crate::table::{Column, Table};

/// Deepest embed: one inside the listed table's rows is at depth 1.
pub const DEPTH_MAX: usize = 3;
/// Most embeds in one `select`, all depths together.
const EMBEDS_MAX: usize = 20;

/// One item of a `select` list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// `*`: every readable column.
    All,
    /// A column by name.
    Column(String),
    /// Related rows.
    Embed(EmbedItem),
}

/// `alias:relation(items)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmbedItem {
    alias: String,
    relation: Relation,
    items: Vec<Item>,
}

/// How an embed reaches its table.
#[derive(Debug, Clone, PartialEq)]
enum Relation {
    /// The row this table's foreign-key column points at.
    ToOne { column: String },
    /// The rows of `schema.table` whose foreign-key column points here.
    ToMany {
        schema: String,
        table: String,
        column: String,
    },
}

/// The related tables a `select` reaches, by schema and name.
pub(crate) type Related = HashMap<(String, String), Arc<Table>>;

/// What a read shows of each row: columns, then embeds.
pub(crate) struct Selection<'a> {
    pub(crate) columns: Vec<Output<'a>>,
    pub(crate) embeds: Vec<Embed<'a>>,
}

/// Parses `select`; every item is checked later against the tables.
pub(crate) fn parse(raw: &str) -> Result<Vec<Item>, DataError> {
    let mut embeds = 0;
    parse_items(raw, 0, &mut embeds)
}

fn parse_items(raw: &str, depth: usize, embeds: &mut usize) -> Result<Vec<Item>, DataError> {
    split_top(raw)?
        .into_iter()
        .map(|part| parse_item(part.trim(), depth, embeds))
        .collect()
}

/// Splits at the commas outside parentheses.
fn split_top(raw: &str) -> Result<Vec<&str>, DataError> {
    let unbalanced = || query_error("select", "has unbalanced parentheses");
    let (mut parts, mut level, mut start) = (Vec::new(), 0usize, 0);
    for (at, c) in raw.char_indices() {
        match c {
            '(' => level += 1,
            ')' => level = level.checked_sub(1).ok_or_else(unbalanced)?,
            ',' if level == 0 => {
                parts.push(&raw[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if level != 0 {
        return Err(unbalanced());
    }
    parts.push(&raw[start..]);
    Ok(parts)
}

fn parse_item(part: &str, depth: usize, embeds: &mut usize) -> Result<Item, DataError> {
    let Some(open) = part.find('(') else {
        if part.contains([':', '!', ')']) {
            return Err(query_error(
                "select",
                format!("{part}: an embed is alias:relation(columns)"),
            ));
        }
        return Ok(match part {
            "*" => Item::All,
            "" => return Err(query_error("select", "names an empty column")),
            name => Item::Column(name.to_owned()),
        });
    };
    let Some(inner) = part[open + 1..].strip_suffix(')') else {
        return Err(query_error(
            "select",
            format!("{part}: an embed ends with its column list in parentheses"),
        ));
    };
    let head = &part[..open];
    let Some((alias, relation)) = head.split_once(':') else {
        return Err(query_error(
            "select",
            format!("{head}: an embed needs an alias (alias:{head}(...))"),
        ));
    };
    let alias = alias.trim();
    if alias.is_empty()
        || alias.len() > 63
        || !alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(query_error(
            "select",
            format!("{alias:?}: an alias is letters, digits and _"),
        ));
    }
    if depth + 1 > DEPTH_MAX {
        return Err(query_error(
            "select",
            format!("{alias}: embeds nest at most {DEPTH_MAX} deep"),
        ));
    }
    *embeds += 1;
    if *embeds > EMBEDS_MAX {
        return Err(query_error(
            "select",
            format!("has more than {EMBEDS_MAX} embeds"),
        ));
    }
    let relation = match relation.trim().split_once('!') {
        None => Relation::ToOne {
            column: relation.trim().to_owned(),
        },
        Some((target, column)) => {
            let Some((schema, table)) = target.split_once('.') else {
                return Err(query_error(
                    "select",
                    format!("{alias}: a to-many embed names schema.table!fk_column"),
                ));
            };
            Relation::ToMany {
                schema: schema.to_owned(),
                table: table.to_owned(),
                column: column.to_owned(),
            }
        }
    };
    Ok(Item::Embed(EmbedItem {
        alias: alias.to_owned(),
        relation,
        items: parse_items(inner, depth + 1, embeds)?,
    }))
}

/// Whether the items embed anything.
pub(crate) fn embeds_any(items: &[Item]) -> bool {
    items.iter().any(|i| matches!(i, Item::Embed(_)))
}

/// The table an embed of `from` reaches, when the names lead to one.
fn target_of(from: &Table, embed: &EmbedItem) -> Option<(String, String)> {
    match &embed.relation {
        Relation::ToOne { column } => from
            .foreign_key(column)
            .map(|k| (k.schema.clone(), k.table.clone())),
        Relation::ToMany { schema, table, .. } => Some((schema.clone(), table.clone())),
    }
}

/// Every table the embeds of `items` under `root` reach, loaded by `load`
/// (names leading nowhere are refused when the selection is built).
pub(crate) async fn related<F, Fut>(
    root: &Arc<Table>,
    items: &[Item],
    load: F,
) -> Result<Related, DataError>
where
    F: Fn(String, String) -> Fut,
    Fut: Future<Output = Result<Option<Arc<Table>>, DataError>>,
{
    let mut found = Related::new();
    let mut pending: Vec<(Arc<Table>, &[Item])> = vec![(root.clone(), items)];
    while let Some((table, items)) = pending.pop() {
        for item in items {
            let Item::Embed(embed) = item else { continue };
            let Some(key) = target_of(&table, embed) else {
                continue;
            };
            let target = match found.get(&key) {
                Some(target) => target.clone(),
                None => match load(key.0.clone(), key.1.clone()).await? {
                    Some(target) => {
                        // Planned on one catalog, or planned again.
                        if target.version != root.version {
                            return Err(DataError::Store(kernel::StoreError::Stale));
                        }
                        found.insert(key, target.clone());
                        target
                    }
                    None => continue,
                },
            };
            pending.push((target, &embed.items));
        }
    }
    Ok(found)
}

/// Checks `items` against `table` and what `access` reads of it: the
/// columns and embeds a read shows. At the top (`depth` 0) a named column
/// the grants leave out is refused, as `select` always did; inside an
/// embed it is left out (API.md 13).
pub(crate) fn build<'a>(
    table: &'a Table,
    access: &Access<'a>,
    items: &'a [Item],
    related: &'a Related,
    principal: &Principal,
    depth: usize,
) -> Result<Selection<'a>, DataError> {
    let mut columns: Vec<Output<'a>> = Vec::new();
    let mut embeds: Vec<Embed<'a>> = Vec::new();
    let add = |output: Output<'a>, columns: &mut Vec<Output<'a>>| {
        if !columns.iter().any(|o| o.column.name == output.column.name) {
            columns.push(output);
        }
    };
    for item in items {
        match item {
            Item::All => readable_columns(table, access)
                .into_iter()
                .for_each(|o| add(o, &mut columns)),
            Item::Column(name) if depth == 0 => {
                let column = readable(table, access, name, "select")?;
                add(masked(access, column), &mut columns);
            }
            Item::Column(name) => {
                let column = table.column(name).ok_or_else(|| {
                    query_error(
                        "select",
                        format!("{name} is not a column of {}", table.name),
                    )
                })?;
                if access.covers(name) {
                    add(masked(access, column), &mut columns);
                }
            }
            Item::Embed(embed) => embeds.push(embed_of(
                table,
                access,
                embed,
                related,
                principal,
                depth + 1,
            )?),
        }
    }
    for embed in &embeds {
        if columns.iter().any(|o| o.column.name == embed.alias)
            || embeds.iter().filter(|e| e.alias == embed.alias).count() > 1
        {
            return Err(query_error(
                "select",
                format!("{} names two things", embed.alias),
            ));
        }
    }
    Ok(Selection { columns, embeds })
}

fn embed_of<'a>(
    parent: &'a Table,
    parent_access: &Access<'a>,
    embed: &'a EmbedItem,
    related: &'a Related,
    principal: &Principal,
    depth: usize,
) -> Result<Embed<'a>, DataError> {
    let alias = embed.alias.as_str();
    let not_a_key = |column: &str, to: &str| {
        query_error(
            "select",
            format!("{alias}: {column} is not a foreign key to {to}"),
        )
    };
    let (target, many, parent_column, child_column): (&'a Table, bool, &'a Column, &str) =
        match &embed.relation {
            Relation::ToOne { column } => {
                let own = readable(parent, parent_access, column, "select")?;
                let key = parent
                    .foreign_key(column)
                    .ok_or_else(|| not_a_key(column, "another table"))?;
                let target = related
                    .get(&(key.schema.clone(), key.table.clone()))
                    .ok_or(DataError::NotFound)?;
                (target, false, own, key.references.as_str())
            }
            Relation::ToMany {
                schema,
                table,
                column,
            } => {
                let target = related
                    .get(&(schema.clone(), table.clone()))
                    .filter(|t| t.exposes("GET"))
                    .ok_or(DataError::NotFound)?;
                // Nothing of a table the caller may not read is told.
                Access::evaluate(principal, &target.scopes, Action::Read)?;
                target.column(column).ok_or_else(|| {
                    query_error(
                        "select",
                        format!("{alias}: {column} is not a column of {schema}.{table}"),
                    )
                })?;
                let to = format!("{}.{}", parent.schema, parent.name);
                let key = target
                    .foreign_key(column)
                    .filter(|k| k.schema == parent.schema && k.table == parent.name)
                    .ok_or_else(|| not_a_key(column, &to))?;
                let own = parent
                    .column(&key.references)
                    .filter(|c| parent_access.covers(&c.name))
                    .ok_or_else(|| not_a_key(column, &to))?;
                (target, true, own, column.as_str())
            }
        };
    if !target.exposes("GET") {
        return Err(DataError::NotFound);
    }
    let access = Access::evaluate(principal, &target.scopes, Action::Read)?;
    let child = target.column(child_column).ok_or(DataError::NotFound)?;
    let Selection { columns, embeds } =
        build(target, &access, &embed.items, related, principal, depth)?;
    Ok(Embed {
        alias,
        table: target,
        many,
        parent: masked(parent_access, parent_column),
        child: masked(&access, child),
        select: columns,
        predicate: scoped(None, &access, None),
        embeds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(raw: &str) -> String {
        match parse(raw) {
            Err(DataError::Query(e)) => e.message.to_string(),
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn parses_columns_and_nested_embeds() {
        let items = parse(
            "id, title,author:owner_id(name),comments:app.comments!post_id(*,by:user_id(email))",
        )
        .unwrap();
        assert_eq!(items[0], Item::Column("id".into()));
        assert_eq!(items[1], Item::Column("title".into()));
        let Item::Embed(author) = &items[2] else {
            panic!()
        };
        assert_eq!(author.alias, "author");
        assert_eq!(
            author.relation,
            Relation::ToOne {
                column: "owner_id".into()
            }
        );
        let Item::Embed(comments) = &items[3] else {
            panic!()
        };
        assert_eq!(
            comments.relation,
            Relation::ToMany {
                schema: "app".into(),
                table: "comments".into(),
                column: "post_id".into()
            }
        );
        assert_eq!(comments.items[0], Item::All);
        assert!(embeds_any(&items));
    }

    #[test]
    fn refuses_what_is_not_an_embed() {
        assert!(field_of("owner_id(name)").contains("alias"));
        assert!(field_of("a:owner_id(name").contains("parentheses"));
        assert!(field_of("a:owner_id(name))").contains("parentheses"));
        assert!(field_of("a:comments!post_id(id)").contains("schema.table"));
        assert!(field_of("a:b").contains("alias:relation"));
        assert!(field_of("a b:x(id)").contains("alias"));
        assert!(field_of("id,,title").contains("empty"));
        assert!(parse("a:x(b:y(c:z(id)))").is_ok());
        assert!(field_of("a:x(b:y(c:z(d:w(id))))").contains("3 deep"));
    }
}
