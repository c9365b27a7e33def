//! Page sizes of every list route (Admin and Data API).

/// Rows or items of a page when `limit` is not given.
pub const LIMIT_DEFAULT: u32 = 100;
/// Largest `limit` a list route takes.
pub const LIMIT_MAX: u32 = 1000;
