//! SQL fragments of a table definition, parsed before any SQL is built:
//! a data type, or one scalar expression built only from literals, allowed
//! operators, casts, allowed functions and (in checks) the table's columns.
//! What reaches the DDL is the parsed tree printed again, never the input text.

use sqlparser::ast::{
    DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectNamePart,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

/// Longest fragment accepted, in bytes.
const FRAGMENT_MAX: usize = 1000;
/// Deepest expression nesting accepted.
const DEPTH_MAX: usize = 32;

/// Functions an expression may call.
const ALLOWED_FUNCTIONS: &[&str] = &[
    "now",
    "current_timestamp",
    "current_date",
    "current_time",
    "localtimestamp",
    "localtime",
    "gen_random_uuid",
    "lower",
    "upper",
    "length",
    "char_length",
    "character_length",
    "coalesce",
    "nullif",
    "trim",
    "btrim",
    "ltrim",
    "rtrim",
    "abs",
    "round",
    "floor",
    "ceil",
    "ceiling",
    "greatest",
    "least",
    "substr",
    "substring",
    "left",
    "right",
    "concat",
    "date_trunc",
    "position",
    "starts_with",
];

/// Why a fragment is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(why.into()))
}

fn screen(text: &str) -> Result<(), Refused> {
    if text.trim().is_empty() {
        return refuse("must not be empty");
    }
    if text.len() > FRAGMENT_MAX {
        return refuse(format!("must be at most {FRAGMENT_MAX} bytes"));
    }
    if text.contains(';') {
        return refuse("must not contain ';'");
    }
    if text.contains("--") || text.contains("/*") || text.contains("*/") {
        return refuse("must not contain comments");
    }
    if text.contains('$') {
        return refuse("must not contain '$' (dollar quoting or parameters)");
    }
    if text.contains('\0') || text.contains('\\') {
        return refuse("must not contain NUL or backslashes");
    }
    Ok(())
}

fn parser(text: &str) -> Result<Parser<'static>, Refused> {
    static DIALECT: PostgreSqlDialect = PostgreSqlDialect {};
    Parser::new(&DIALECT)
        .try_with_sql(text)
        .map_err(|e| Refused(format!("does not parse: {e}")))
}

fn expect_end(parser: &Parser<'_>) -> Result<(), Refused> {
    if parser.peek_token().token == Token::EOF {
        Ok(())
    } else {
        refuse("must be exactly one expression")
    }
}

/// Parses a PostgreSQL type name (with modifiers and `[]`); answers it printed canonically.
pub fn data_type(text: &str) -> Result<String, Refused> {
    screen(text)?;
    let mut p = parser(text)?;
    let parsed: DataType = p
        .parse_data_type()
        .map_err(|e| Refused(format!("is not a type: {e}")))?;
    expect_end(&p)?;
    let printed = parsed.to_string();
    plain_modifiers(&printed)?;
    Ok(printed)
}

/// Refuses a type whose modifiers are anything but numbers (`TEXT(SELECT,
/// 1)` parses as a custom type with two modifiers).
fn plain_modifiers(printed: &str) -> Result<(), Refused> {
    let mut inside = false;
    for c in printed.chars() {
        match c {
            '(' if !inside => inside = true,
            ')' if inside => inside = false,
            c if inside && !(c.is_ascii_digit() || c == ',' || c == ' ') => {
                return refuse("type modifiers must be numbers");
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where an expression is used, which decides what it may refer to.
#[derive(Debug, Clone, Copy)]
pub enum Context<'a> {
    /// A column default: no column references.
    Default,
    /// A CHECK: references to these columns only.
    Check(&'a [String]),
}

/// Parses one scalar expression and checks every node; answers it printed from the tree.
pub fn expression(text: &str, context: Context<'_>) -> Result<String, Refused> {
    screen(text)?;
    let mut p = parser(text)?;
    let parsed = p
        .parse_expr()
        .map_err(|e| Refused(format!("does not parse: {e}")))?;
    expect_end(&p)?;
    check(&parsed, context, 0)?;
    Ok(parsed.to_string())
}

fn column_name(ident: &sqlparser::ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn check(expr: &Expr, context: Context<'_>, depth: usize) -> Result<(), Refused> {
    if depth > DEPTH_MAX {
        return refuse("is nested too deeply");
    }
    let next = depth + 1;
    let all = |exprs: &[&Expr]| exprs.iter().try_for_each(|e| check(e, context, next));
    match expr {
        Expr::Value(_) | Expr::TypedString(_) => Ok(()),
        Expr::Identifier(ident) => match context {
            Context::Default => refuse(format!("a default cannot refer to column {}", ident.value)),
            Context::Check(columns) if columns.contains(&column_name(ident)) => Ok(()),
            Context::Check(_) => refuse(format!(
                "refers to {}, which is not a column of this table",
                ident.value
            )),
        },
        Expr::BinaryOp { left, op, right } => {
            use sqlparser::ast::BinaryOperator as B;
            match op {
                B::Plus
                | B::Minus
                | B::Multiply
                | B::Divide
                | B::Modulo
                | B::StringConcat
                | B::Gt
                | B::Lt
                | B::GtEq
                | B::LtEq
                | B::Eq
                | B::NotEq
                | B::And
                | B::Or => all(&[left, right]),
                other => refuse(format!("operator {other} is not allowed")),
            }
        }
        Expr::UnaryOp { op, expr } => {
            use sqlparser::ast::UnaryOperator as U;
            match op {
                // `- -1` would print as `--1`, a comment: signs do not nest.
                U::Plus | U::Minus
                    if matches!(
                        expr.as_ref(),
                        Expr::UnaryOp {
                            op: U::Plus | U::Minus,
                            ..
                        }
                    ) =>
                {
                    refuse("signs cannot follow one another")
                }
                U::Plus | U::Minus | U::Not => check(expr, context, next),
                other => refuse(format!("operator {other} is not allowed")),
            }
        }
        Expr::Nested(inner)
        | Expr::IsNull(inner)
        | Expr::IsNotNull(inner)
        | Expr::IsTrue(inner)
        | Expr::IsFalse(inner)
        | Expr::IsNotTrue(inner)
        | Expr::IsNotFalse(inner) => check(inner, context, next),
        Expr::Cast {
            expr,
            data_type,
            format: None,
            ..
        } => {
            plain_modifiers(&data_type.to_string())?;
            check(expr, context, next)
        }
        Expr::InList { expr, list, .. } => {
            if list.len() > 1000 {
                return refuse("IN lists are limited to 1000 items");
            }
            check(expr, context, next)?;
            list.iter().try_for_each(|e| check(e, context, next))
        }
        Expr::Between {
            expr, low, high, ..
        } => all(&[expr, low, high]),
        Expr::Like {
            expr,
            pattern,
            escape_char: None,
            any: false,
            ..
        }
        | Expr::ILike {
            expr,
            pattern,
            escape_char: None,
            any: false,
            ..
        } => all(&[expr, pattern]),
        Expr::Function(f) => {
            let name = match f.name.0.as_slice() {
                [ObjectNamePart::Identifier(ident)] if ident.quote_style.is_none() => {
                    ident.value.to_lowercase()
                }
                _ => return refuse(format!("function {} is not allowed", f.name)),
            };
            if !ALLOWED_FUNCTIONS.contains(&name.as_str()) {
                return refuse(format!("function {name} is not allowed"));
            }
            if f.over.is_some()
                || f.filter.is_some()
                || !f.within_group.is_empty()
                || f.null_treatment.is_some()
                || f.uses_odbc_syntax
                || !matches!(f.parameters, FunctionArguments::None)
            {
                return refuse(format!("{name} may only be called plainly"));
            }
            match &f.args {
                FunctionArguments::None => Ok(()),
                FunctionArguments::List(list)
                    if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
                {
                    list.args.iter().try_for_each(|arg| match arg {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => check(e, context, next),
                        _ => refuse(format!("{name} takes plain arguments only")),
                    })
                }
                _ => refuse(format!("{name} takes plain arguments only")),
            }
        }
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
            refuse("subqueries are not allowed")
        }
        _ => refuse("uses a construct that is not allowed in a default or check"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types() {
        assert_eq!(data_type("numeric(10,2)").unwrap(), "NUMERIC(10,2)");
        assert!(data_type("text[]").is_ok());
        assert!(data_type("uuid").is_ok());
        assert!(data_type("int; drop table x").is_err());
        assert!(data_type("int -- x").is_err());
        assert!(data_type("int int").is_err());
        // Found by the fuzzer: a custom type's modifiers are any tokens.
        assert!(data_type("text(select, 1)").is_err());
        assert!(expression("1::text (SELECT 1)", Context::Default).is_err());
        assert!(data_type("timestamp(3) with time zone").is_ok());
        assert!(expression("- + amount", Context::Default).is_err());
        assert!(expression("amount > - - 1", Context::Check(&["amount".to_string()])).is_err());
        assert!(expression("-1", Context::Default).is_ok());
    }

    #[test]
    fn expressions() {
        let cols = ["amount".to_string(), "status".to_string()];
        let check_ctx = Context::Check(&cols);
        assert!(expression("now()", Context::Default).is_ok());
        assert!(expression("gen_random_uuid()", Context::Default).is_ok());
        assert!(expression("'draft'", Context::Default).is_ok());
        assert!(expression("amount >= 0 AND amount < 1000", check_ctx).is_ok());
        assert!(expression("status IN ('a', 'b')", check_ctx).is_ok());
        assert!(expression("lower(status) LIKE 'x%'", check_ctx).is_ok());
        assert!(expression("amount::int > 0", check_ctx).is_ok());
        for bad in [
            "1; DROP TABLE x",
            "1 -- c",
            "1 /* c */",
            "$$x$$",
            "(SELECT 1)",
            "pg_sleep(10)",
            "pg_read_file('/etc/passwd')",
            "EXISTS (SELECT 1)",
            "other_col > 0",
            "now() OVER ()",
            "count(*)",
            "amount IN (SELECT 1)",
            "1 1",
            "public.lower('x')",
            "\"lower\"('x')",
            "E'\\x00'",
        ] {
            assert!(expression(bad, check_ctx).is_err(), "{bad}");
        }
        assert!(expression("amount", Context::Default).is_err());
    }

    /// Text assembled from SQL's pieces, hostile ones included: the checks
    /// answer an expression or a refusal, never panic, and what they accept
    /// prints as one statement-free expression that reads back the same.
    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop::sample::select(vec![
                    "amount",
                    "status",
                    "secret",
                    "1",
                    "0.5",
                    "'a'",
                    "'it''s'",
                    "(",
                    ")",
                    ",",
                    "+",
                    "-",
                    "*",
                    "/",
                    "=",
                    "<",
                    ">=",
                    "AND",
                    "OR",
                    "NOT",
                    "IS NULL",
                    "IN",
                    "LIKE",
                    "now()",
                    "lower(",
                    "pg_sleep(",
                    "(SELECT 1)",
                    ";",
                    "--",
                    "/*",
                    "*/",
                    "$1",
                    "\"amount\"",
                    "::text",
                    "CASE WHEN",
                    "THEN",
                    "ELSE",
                    "END",
                    "DROP TABLE x",
                ]),
                1..12,
            )
            .prop_map(|parts| parts.join(" "))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]
            #[test]
            fn accepted_expressions_are_one_clean_expression(raw in text()) {
                let columns = ["amount".to_string(), "status".to_string()];
                for context in [Context::Default, Context::Check(&columns)] {
                    if let Ok(printed) = expression(&raw, context) {
                        prop_assert!(!printed.contains(';') && !printed.contains("--"), "{}", printed);
                        prop_assert!(!printed.to_lowercase().contains("select"), "{}", printed);
                        prop_assert!(!printed.contains("secret"), "{}", printed);
                        prop_assert_eq!(expression(&printed, context).ok(), Some(printed.clone()));
                    }
                }
                let _ = data_type(&raw);
            }
        }
    }
}
