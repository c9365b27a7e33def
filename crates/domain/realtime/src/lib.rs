//! Realtime (API.md section 11): every committed change to a subscribed
//! table, whatever wrote it, streamed to each subscriber as the list route
//! would show the row to them (grants, row filters, column masks, their own
//! filter), with ids from the database so that a client resumes on any
//! instance. One hub per instance reads the change log for all its
//! subscribers; subscribers sharing a view of a table share one statement.

mod error;
mod frame;
mod hub;
mod service;
mod store;

pub use error::RealtimeError;
pub use frame::OVERFLOW;
pub use service::{EndReason, RealtimeService, Subscription, SubscriptionRequest};
pub use store::{Change, EventRef, Poll, RealtimeStore};
