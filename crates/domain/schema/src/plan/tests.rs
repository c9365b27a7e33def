use super::*;

fn col(name: &str, data_type: &str) -> ColumnInput {
    ColumnInput {
        name: name.into(),
        data_type: data_type.into(),
        ..ColumnInput::default()
    }
}

#[test]
fn plans_the_rich_definition() {
    let table = TableInput {
        name: "orders".into(),
        columns: vec![
            ColumnInput {
                primary_key: true,
                default: Some("gen_random_uuid()".into()),
                ..col("id", "uuid")
            },
            ColumnInput {
                identity: Some("ALWAYS".into()),
                ..col("number", "bigint")
            },
            ColumnInput {
                nullable: Some(false),
                ..col("title", "text")
            },
            ColumnInput {
                check: Some("amount >= 0".into()),
                check_message: Some("Amount must not be negative".into()),
                ..col("amount", "numeric(10,2)")
            },
            ColumnInput {
                foreign_key: Some(ForeignKeyInput {
                    target_table: "customers".into(),
                    target_column: "id".into(),
                    on_delete: Some("restrict".into()),
                    ..ForeignKeyInput::default()
                }),
                ..col("customer_id", "uuid")
            },
        ],
    };
    let plan = create_table("public", &table).unwrap();
    let sql = plan.sql();
    assert!(sql.contains("CREATE TABLE \"public\".\"orders\""), "{sql}");
    assert!(
        sql.contains("\"id\" UUID NOT NULL DEFAULT gen_random_uuid()"),
        "{sql}"
    );
    assert!(
        sql.contains("\"number\" BIGINT GENERATED ALWAYS AS IDENTITY NOT NULL"),
        "{sql}"
    );
    assert!(
        sql.contains("CONSTRAINT \"orders_amount_check\" CHECK (amount >= 0)"),
        "{sql}"
    );
    assert!(
        sql.contains("REFERENCES \"public\".\"customers\" (\"id\") ON DELETE RESTRICT"),
        "{sql}"
    );
    assert!(
        sql.contains("CREATE INDEX \"orders_customer_id_fkey_idx\""),
        "{sql}"
    );
    assert_eq!(
        plan.check_messages["orders_amount_check"],
        "Amount must not be negative"
    );
}

#[test]
fn refuses_bad_definitions() {
    let one = |c: ColumnInput| TableInput {
        name: "t".into(),
        columns: vec![c],
    };
    assert_eq!(
        create_table("svc", &one(col("a", "int")))
            .unwrap_err()
            .field,
        "schema"
    );
    assert_eq!(
        create_table("pg_catalog", &one(col("a", "int")))
            .unwrap_err()
            .field,
        "schema"
    );
    assert_eq!(
        create_table("public", &one(col("A b", "int")))
            .unwrap_err()
            .field,
        "columns[0].name"
    );
    assert_eq!(
        create_table("public", &one(col(&"a".repeat(64), "int")))
            .unwrap_err()
            .field,
        "columns[0].name"
    );
    let two = TableInput {
        name: "t".into(),
        columns: vec![col("a", "int"), col("a", "int")],
    };
    assert_eq!(
        create_table("public", &two).unwrap_err().field,
        "columns[1].name"
    );
    let keys = TableInput {
        name: "t".into(),
        columns: vec![
            ColumnInput {
                primary_key: true,
                ..col("a", "int")
            },
            ColumnInput {
                primary_key: true,
                ..col("b", "int")
            },
        ],
    };
    assert_eq!(
        create_table("public", &keys).unwrap_err().field,
        "columns[1].primaryKey"
    );
    let check = one(ColumnInput {
        check: Some("b > 0".into()),
        ..col("a", "int")
    });
    assert_eq!(
        create_table("public", &check).unwrap_err().field,
        "columns[0].check"
    );
    assert!(fit_name("x".repeat(80)).len() <= 63);
}

/// Table definitions with hostile names, types, defaults, checks and
/// references: the planner answers a plan or a refusal, never panics,
/// and a plan holds one statement per entry with every input name
/// quoted (nothing of the input reaches the DDL bare).
mod fuzz {
    use proptest::prelude::*;

    use super::super::*;

    fn piece() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "notes",
            "id",
            "Amount",
            "a b",
            "x\"y",
            "x;y",
            "drop table t",
            "--",
            "1st",
            "_ok",
            "é",
            "integer",
            "text",
            "numeric(10,2)",
            "varchar(5)",
            "text[]",
            "bigint",
            "uuid",
            "int; DROP TABLE x",
            "now()",
            "0",
            "'a'",
            "amount > 0",
            "(SELECT 1)",
            "ALWAYS",
            "CASCADE",
            "",
        ])
        .prop_map(str::to_owned)
    }

    /// Mostly well-formed names, so that many definitions are planned.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z_][a-z0-9_]{0,8}",
            1 => piece(),
        ]
    }

    /// Mostly known types.
    fn data_type() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => prop::sample::select(vec!["integer", "text", "bigint", "numeric(10,2)", "boolean", "jsonb"])
                .prop_map(str::to_owned),
            1 => piece(),
        ]
    }

    fn column() -> impl Strategy<Value = ColumnInput> {
        (
            (name(), data_type(), any::<bool>()),
            (
                prop::option::weighted(0.15, piece()),
                prop::option::weighted(0.15, piece()),
                prop::option::of(any::<bool>()),
            ),
            (
                prop::option::weighted(
                    0.15,
                    (piece(), piece(), prop::option::weighted(0.15, piece())),
                ),
                prop::option::weighted(0.15, piece()),
            ),
        )
            .prop_map(
                |((name, data_type, primary_key), (default, identity, nullable), (fk, check))| {
                    ColumnInput {
                        name,
                        data_type,
                        primary_key,
                        default,
                        identity,
                        nullable,
                        foreign_key: fk.map(|(target_table, target_column, on_delete)| {
                            ForeignKeyInput {
                                target_schema: None,
                                target_table,
                                target_column,
                                on_delete,
                            }
                        }),
                        check,
                        check_message: None,
                        unique: primary_key,
                    }
                },
            )
    }

    #[test]
    fn plans_quote_every_name() {
        let planned = std::cell::Cell::new(0);
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(3000));
        let inputs = (name(), prop::collection::vec(column(), 1..4));
        let outcome = runner.run(&inputs, |(name, columns)| {
            let input = TableInput { name, columns };
            if let Ok(plan) = create_table("app", &input) {
                planned.set(planned.get() + 1);
                let sql = plan.sql();
                prop_assert!(plan.statements.iter().all(|s| !s.contains(';')), "{}", sql);
                prop_assert!(sql.contains(&format!("\"{}\"", input.name)), "{}", sql);
                for column in &input.columns {
                    prop_assert!(sql.contains(&format!("\"{}\"", column.name)), "{}", sql);
                }
            }
            Ok(())
        });
        assert!(outcome.is_ok(), "{outcome:?}");
        // The generator gets past the checks often enough to test plans.
        assert!(
            planned.get() > 100,
            "only {} of 3000 definitions planned",
            planned.get()
        );
    }
}
