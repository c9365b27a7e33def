//! sea-orm entities of the service schema `svc`.

pub mod api_token;
pub mod audit_log;
pub mod email_outbox;
pub mod invitation;
pub mod one_time_token;
pub mod role;
pub mod role_member;
pub mod session;
pub mod setting;
pub mod user;
