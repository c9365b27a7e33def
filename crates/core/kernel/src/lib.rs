//! Shared vocabulary of every Tessera crate: error codes, ids, the clock,
//! validated input types and the runtime settings registry.

pub mod clock;
pub mod error;
pub mod filter;
pub mod function;
pub mod id;
pub mod page;
pub mod settings;
pub mod sql;
pub mod store;
pub mod validate;
pub mod versions;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Code, ErrorCode, ErrorKind, FieldError};
pub use id::{ADMINISTRATORS_ROLE_ID, USERS_ROLE_ID, new_id};
pub use store::StoreError;
pub use versions::Versions;
