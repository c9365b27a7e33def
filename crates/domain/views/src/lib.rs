//! DataViews and dashboards (API.md sections 7 and 8): saved read-only
//! queries over one resource, grouped by columns and time buckets cut in
//! each caller's time zone, published as snapshots and read under grants on
//! the view and on its source; dashboards of charts over them.

pub mod dashboard;
mod dashboards;
mod dataviews;
pub mod definition;
mod error;
pub mod query;
mod reads;
mod service;
pub mod store;

pub use dashboards::{ResolvedDashboard, ResolvedWidget};
pub use dataviews::{Preview, PreviewAs};
pub use error::ViewError;
pub use service::ViewService;
