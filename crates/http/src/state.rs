//! What the handlers share: the services, and the facts of the deployment
//! they need.

use std::net::IpAddr;
use std::sync::Arc;

use auth::AuthService;
use futures_util::future::BoxFuture;
use permissions::RoleService;

/// Answers whether the database is reachable.
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// Everything the handlers need, shared by all workers.
pub struct AppState {
    /// Sign-in, credentials and users.
    pub auth: AuthService,
    /// Sign-in with providers.
    pub oauth: oauth::OAuthService,
    /// The runtime settings.
    pub settings: auth::SettingsService,
    /// Roles and memberships.
    pub roles: RoleService,
    /// Tables and resources.
    pub schema: schema::SchemaService,
    /// Grants.
    pub grants: permissions::GrantService,
    /// The Data API.
    pub data: data::DataService,
    /// Workflows.
    pub workflows: workflows::WorkflowService,
    /// DataViews and dashboards.
    pub views: views::ViewService,
    /// The MCP tools.
    pub mcp_server: mcp::McpServer,
    /// The MCP endpoint.
    pub mcp: Arc<mcp::McpService>,
    /// Files.
    pub files: files::FileService,
    /// The SQL console.
    pub sql: sql_console::SqlConsole,
    /// Realtime subscriptions.
    pub realtime: realtime::RealtimeService,
    /// The audit log.
    pub audit: audit::AuditService,
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
