//! A PostgreSQL function as the Data API describes and calls it (API.md
//! 18): its named arguments, its result and its volatility, as the
//! database has them now.

use serde_json::{Value, json};

/// One input argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionArgument {
    /// Its name (a function with an unnamed argument is not registered).
    pub name: String,
    /// Its type as PostgreSQL writes it (`integer`, `text[]`, `jsonb`).
    pub data_type: String,
    /// Whether it has a default, so that a call may leave it out.
    pub has_default: bool,
}

/// What a function returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionReturns {
    /// The type as PostgreSQL writes it (`integer`, `orders`,
    /// `TABLE(id integer, total numeric)`, `void`).
    pub data_type: String,
    /// Whether it returns a set of them (`SETOF`, `TABLE`).
    pub set: bool,
}

impl FunctionReturns {
    /// Whether it returns nothing.
    pub fn is_void(&self) -> bool {
        !self.set && self.data_type == "void"
    }
}

/// Whether a function may change the database (PostgreSQL's volatility).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volatility {
    /// The same arguments give the same result, always.
    Immutable,
    /// Reads only, within a statement.
    Stable,
    /// May write.
    Volatile,
}

impl Volatility {
    /// From `pg_proc.provolatile`.
    pub fn from_code(code: &str) -> Self {
        match code {
            "i" => Self::Immutable,
            "s" => Self::Stable,
            _ => Self::Volatile,
        }
    }

    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Immutable => "immutable",
            Self::Stable => "stable",
            Self::Volatile => "volatile",
        }
    }

    /// Whether its calls run in a read-only transaction and may be made
    /// with GET.
    pub fn reads_only(self) -> bool {
        self != Self::Volatile
    }
}

/// A function's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSignature {
    /// Its input arguments, in order.
    pub arguments: Vec<FunctionArgument>,
    /// Its result.
    pub returns: FunctionReturns,
    /// Its volatility.
    pub volatility: Volatility,
}

impl FunctionSignature {
    /// The description as the database's JSON gives it:
    /// `{ arguments: [{ name, type, hasDefault }], returns: { type, set },
    /// volatility }` with `provolatile`'s letter. An argument without a
    /// name has an empty one.
    pub fn from_json(value: &Value) -> Option<Self> {
        let arguments = value["arguments"]
            .as_array()?
            .iter()
            .map(|a| {
                Some(FunctionArgument {
                    name: a["name"].as_str().unwrap_or_default().to_owned(),
                    data_type: a["type"].as_str()?.to_owned(),
                    has_default: a["hasDefault"].as_bool()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            arguments,
            returns: FunctionReturns {
                data_type: value["returns"]["type"].as_str()?.to_owned(),
                set: value["returns"]["set"].as_bool()?,
            },
            volatility: Volatility::from_code(value["volatility"].as_str()?),
        })
    }

    /// The arguments as the API answers them.
    pub fn arguments_json(&self) -> Value {
        Value::Array(
            self.arguments
                .iter()
                .map(
                    |a| json!({ "name": a.name, "type": a.data_type, "hasDefault": a.has_default }),
                )
                .collect(),
        )
    }
}

/// The SQL that describes the function `regprocedure` `$oid` as
/// [`FunctionSignature::from_json`] reads it (`p` is its `pg_proc` row).
pub const SIGNATURE_SQL: &str = "jsonb_build_object(\
    'arguments', coalesce((SELECT jsonb_agg(jsonb_build_object('name', coalesce(a.name, ''), \
        'type', format_type(a.type, NULL), 'hasDefault', a.input > p.pronargs - p.pronargdefaults) ORDER BY a.ord) \
      FROM (SELECT t.type, t.ord, (p.proargnames)[t.ord] AS name, \
              row_number() OVER (ORDER BY t.ord) AS input \
            FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS t(type, ord) \
            WHERE coalesce((p.proargmodes)[t.ord], 'i') IN ('i', 'b', 'v')) AS a), '[]'::jsonb), \
    'returns', jsonb_build_object('type', regexp_replace(coalesce(pg_get_function_result(p.oid), ''), '^SETOF ', ''), \
        'set', p.proretset), \
    'volatility', p.provolatile::text)";
