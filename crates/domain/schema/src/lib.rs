//! Schema administration: table definitions, their validation, the DDL they
//! become, and the resources that expose tables.

mod expr;
mod plan;
mod resources;

pub use expr::Refused;
pub use plan::{
    ColumnInput, Confirm, ForeignKeyInput, Plan, TableInput, add_column, create_table, identifier,
    schema_name,
};
pub use resources::*;
