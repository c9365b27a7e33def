//! Identifiers of service records: UUID v7, so they sort by creation time.

use uuid::Uuid;

/// A new time-ordered record id.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// Id of the built-in `Administrators` role (fixed by the first migration).
pub const ADMINISTRATORS_ROLE_ID: Uuid = Uuid::from_u128(0x0000_0000_0000_7000_8000_0000_0000_0001);
/// Id of the built-in `Users` role (fixed by the first migration).
pub const USERS_ROLE_ID: Uuid = Uuid::from_u128(0x0000_0000_0000_7000_8000_0000_0000_0002);
