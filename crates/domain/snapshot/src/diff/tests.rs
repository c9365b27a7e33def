//! The diff's order and its steps.

use super::*;
use crate::model::ForeignKey;

fn col(name: &str, data_type: &str) -> Column {
    Column {
        name: name.into(),
        data_type: data_type.into(),
        nullable: true,
        ..Column::default()
    }
}

fn table(name: &str, columns: Vec<Column>) -> Table {
    Table {
        schema: "public".into(),
        name: name.into(),
        columns,
        indexes: Vec::new(),
    }
}

fn snapshot(tables: Vec<Table>) -> Snapshot {
    Snapshot {
        version: 1,
        tables,
        ..Snapshot::default()
    }
}

#[test]
fn new_tables_come_after_the_tables_they_reference_and_drops_come_last() {
    let mut item = col("order_id", "bigint");
    item.foreign_key = Some(ForeignKey {
        target_schema: "public".into(),
        target_table: "orders".into(),
        target_column: "id".into(),
        on_delete: "CASCADE".into(),
    });
    let current = snapshot(vec![table("old", vec![col("id", "bigint")])]);
    let desired = snapshot(vec![
        table("items", vec![col("id", "bigint"), item]),
        table("orders", vec![col("id", "bigint")]),
    ]);
    let steps = diff(&current, &desired).unwrap();
    let names: Vec<(&str, &str, &str)> = steps
        .iter()
        .map(|s| (s.action.as_str(), s.kind, s.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("create", "table", "public.orders"),
            ("create", "table", "public.items"),
            ("drop", "table", "public.old"),
        ]
    );
    assert!(steps[2].destructive && !steps[0].destructive);
    assert!(diff(&desired, &desired).unwrap().is_empty());
}

#[test]
fn a_type_change_is_destructive_and_a_key_change_is_refused() {
    let current = snapshot(vec![table(
        "t",
        vec![col("a", "integer"), col("b", "text")],
    )]);
    let mut retyped = current.clone();
    retyped.tables[0].columns[0].data_type = "bigint".into();
    retyped.tables[0].columns[1].nullable = false;
    let steps = diff(&current, &retyped).unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps[0].destructive);
    assert!(!steps[1].destructive);
    let mut keyed = current.clone();
    keyed.tables[0].columns[1].primary_key = true;
    assert_eq!(
        diff(&current, &keyed).unwrap_err().field,
        "tables[0].columns[1]"
    );
}
