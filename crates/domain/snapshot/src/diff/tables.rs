//! The steps of tables: created in an order that puts a referenced table
//! first, their columns, indexes and registrations.

use std::collections::{BTreeMap, BTreeSet};

use kernel::FieldError;
use schema::ColumnPatch;

use super::{Action, Operation, Step, step};
use crate::model::{Index, Snapshot, Table};

/// Tables in an order where each comes after the new tables it references.
pub(super) fn creation_order<'a>(tables: &[&'a Table]) -> Vec<&'a Table> {
    let names: BTreeSet<String> = tables.iter().map(|t| t.qualified()).collect();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    let mut left: Vec<&Table> = tables.to_vec();
    while !left.is_empty() {
        let (ready, waiting): (Vec<&Table>, Vec<&Table>) = left.iter().partition(|t| {
            t.columns
                .iter()
                .filter_map(|c| c.foreign_key.as_ref())
                .all(|fk| {
                    let target = format!("{}.{}", fk.target_schema, fk.target_table);
                    target == t.qualified() || !names.contains(&target) || placed.contains(&target)
                })
        });
        // A cycle: take the rest in name order; the database names the problem.
        let ready = if ready.is_empty() {
            waiting.clone()
        } else {
            ready
        };
        for t in &ready {
            placed.insert(t.qualified());
        }
        left.retain(|t| !placed.contains(&t.qualified()));
        order.extend(ready);
    }
    order
}

/// Steps for tables, columns and indexes; answers the tables created.
pub(super) fn tables(
    current: &Snapshot,
    desired: &Snapshot,
    middle: &mut Vec<Step>,
    last: &mut Vec<Step>,
) -> Result<BTreeSet<String>, FieldError> {
    let by_name: BTreeMap<String, &Table> =
        current.tables.iter().map(|t| (t.qualified(), t)).collect();
    let index_of: BTreeMap<String, usize> = desired
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.qualified(), i))
        .collect();
    let new: Vec<&Table> = desired
        .tables
        .iter()
        .filter(|t| !by_name.contains_key(&t.qualified()))
        .collect();
    let mut created = BTreeSet::new();
    for t in creation_order(&new) {
        let path = format!("tables[{}]", index_of[&t.qualified()]);
        middle.push(step(
            Action::Create,
            "table",
            t.qualified(),
            Operation::CreateTable(t.clone(), path.clone()),
        ));
        let made: BTreeSet<String> = t
            .columns
            .iter()
            .filter(|c| c.foreign_key.is_some())
            .map(|c| schema::fk_index_name(&t.name, &c.name))
            .collect();
        for (j, index) in t
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, x)| !made.contains(&x.name))
        {
            middle.push(step(
                Action::Create,
                "index",
                format!("{}.{}", t.schema, index.name),
                Operation::CreateIndex(
                    t.schema.clone(),
                    t.name.clone(),
                    index.clone(),
                    format!("{path}.indexes[{j}]"),
                ),
            ));
        }
        created.insert(t.qualified());
    }
    for (i, t) in desired.tables.iter().enumerate() {
        if let Some(c) = by_name.get(&t.qualified()) {
            columns(c, t, &format!("tables[{i}]"), middle, last)?;
        }
    }
    let dropped: Vec<&Table> = current
        .tables
        .iter()
        .filter(|t| !index_of.contains_key(&t.qualified()))
        .collect();
    for t in creation_order(&dropped).into_iter().rev() {
        last.push(step(
            Action::Drop,
            "table",
            t.qualified(),
            Operation::DropTable(t.schema.clone(), t.name.clone()),
        ));
    }
    Ok(created)
}

pub(super) fn columns(
    current: &Table,
    desired: &Table,
    path: &str,
    middle: &mut Vec<Step>,
    last: &mut Vec<Step>,
) -> Result<(), FieldError> {
    let (schema, table) = (&desired.schema, &desired.name);
    // Indexes go first: one the snapshot drops may block a column's change.
    let wanted: BTreeMap<&str, &Index> = desired
        .indexes
        .iter()
        .map(|x| (x.name.as_str(), x))
        .collect();
    for x in &current.indexes {
        if wanted.get(x.name.as_str()) != Some(&x) {
            middle.push(step(
                Action::Drop,
                "index",
                format!("{schema}.{}", x.name),
                Operation::DropIndex(schema.clone(), x.name.clone()),
            ));
        }
    }
    let mut made = BTreeSet::new();
    for (j, col) in desired.columns.iter().enumerate() {
        let name = format!("{}.{}", desired.qualified(), col.name);
        let at = format!("{path}.columns[{j}]");
        match current.columns.iter().find(|c| c.name == col.name) {
            None => {
                if col.foreign_key.is_some() {
                    made.insert(schema::fk_index_name(table, &col.name));
                }
                middle.push(step(
                    Action::Create,
                    "column",
                    name,
                    Operation::AddColumn(schema.clone(), table.clone(), col.clone(), at),
                ));
            }
            Some(c) => {
                if c.primary_key != col.primary_key
                    || c.identity != col.identity
                    || c.foreign_key != col.foreign_key
                {
                    return Err(FieldError::new(
                        at,
                        "a snapshot does not change a column's primary key, identity or foreign key: drop and add the column",
                    ));
                }
                let patch = ColumnPatch {
                    name: None,
                    data_type: (c.data_type != col.data_type).then(|| col.data_type.clone()),
                    nullable: (c.nullable != col.nullable).then_some(col.nullable),
                    default: (c.default != col.default).then(|| col.default.clone()),
                    check: (c.check != col.check).then(|| col.check.clone()),
                    // A new check takes its message along; a check removed
                    // takes its message with it.
                    check_message: match (c.check != col.check, col.check.is_some()) {
                        (true, true) => Some(col.check_message.clone()),
                        (true, false) => None,
                        (false, _) => (c.check_message != col.check_message)
                            .then(|| col.check_message.clone()),
                    },
                    unique: (c.unique != col.unique).then_some(col.unique),
                };
                if patch != ColumnPatch::default() {
                    middle.push(step(
                        Action::Alter,
                        "column",
                        name,
                        Operation::AlterColumn(
                            schema.clone(),
                            table.clone(),
                            col.name.clone(),
                            patch,
                            at,
                        ),
                    ));
                }
            }
        }
    }
    for (j, x) in desired.indexes.iter().enumerate() {
        let same = current.indexes.iter().any(|c| c == x);
        if !same && !made.contains(&x.name) {
            middle.push(step(
                Action::Create,
                "index",
                format!("{schema}.{}", x.name),
                Operation::CreateIndex(
                    schema.clone(),
                    table.clone(),
                    x.clone(),
                    format!("{path}.indexes[{j}]"),
                ),
            ));
        }
    }
    for c in &current.columns {
        if !desired.columns.iter().any(|d| d.name == c.name) {
            let name = format!("{}.{}", desired.qualified(), c.name);
            last.insert(
                0,
                step(
                    Action::Drop,
                    "column",
                    name,
                    Operation::DropColumn(schema.clone(), table.clone(), c.name.clone()),
                ),
            );
        }
    }
    Ok(())
}

pub(super) fn resources(
    current: &Snapshot,
    desired: &Snapshot,
    created: &BTreeSet<String>,
    out: &mut Vec<Step>,
) {
    for (i, r) in desired.resources.iter().enumerate() {
        let found = current
            .resources
            .iter()
            .find(|c| c.schema == r.schema && c.table == r.table);
        if found.is_none() && !created.contains(&r.qualified()) {
            out.push(step(
                Action::Create,
                "resource",
                r.qualified(),
                Operation::RegisterResource(r.schema.clone(), r.table.clone()),
            ));
        }
        let exposed = found.map_or(&[][..], |c| c.exposed_methods.as_slice());
        if exposed != r.exposed_methods.as_slice() {
            out.push(step(
                Action::Alter,
                "resource",
                r.qualified(),
                Operation::Expose(r.clone(), format!("resources[{i}]")),
            ));
        }
    }
}

/// Registrations and exposures of the functions `desired` has; a function
/// the target's database lacks is refused when the step runs.
pub(super) fn functions(current: &Snapshot, desired: &Snapshot, out: &mut Vec<Step>) {
    for (i, f) in desired.functions.iter().enumerate() {
        let path = format!("functions[{i}]");
        let found = current
            .functions
            .iter()
            .find(|c| c.schema == f.schema && c.function == f.function);
        if found.is_none() {
            out.push(step(
                Action::Create,
                "function",
                f.qualified(),
                Operation::RegisterFunction(f.clone(), path.clone()),
            ));
        }
        let exposed = found.map_or(&[][..], |c| c.exposed_methods.as_slice());
        if exposed != f.exposed_methods.as_slice() {
            out.push(step(
                Action::Alter,
                "function",
                f.qualified(),
                Operation::ExposeFunction(f.clone(), path),
            ));
        }
    }
}
