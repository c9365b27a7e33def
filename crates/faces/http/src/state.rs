//! What the handlers share: the services, and the facts of the deployment
//! they need.

use std::net::IpAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;

/// Answers whether the database is reachable.
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// Everything the handlers need, shared by all workers.
pub struct AppState {
    /// The domain services.
    pub services: services::Services,
    /// The MCP tools.
    pub mcp_server: mcp::McpServer,
    /// The MCP endpoint over `mcp_server`.
    pub mcp: Arc<mcp::McpService>,
    /// The readiness probe.
    pub ready: ReadinessCheck,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Where the routes are mounted: empty for the standalone server, the
    /// host's prefix (`/backend`) when embedded. Links and documents use it.
    pub base_path: String,
}
