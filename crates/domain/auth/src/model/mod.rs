//! Records of the auth domain, independent of storage and wire formats.

mod accounts;
mod factors;
mod sessions;

pub use accounts::*;
pub use factors::*;
pub use sessions::*;
