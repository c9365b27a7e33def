//! The MCP server (`POST /api/mcp`, Streamable HTTP, JSON-RPC 2.0, with the
//! official SDK `rmcp`): the Data API, DataViews and workflow webhooks as
//! eight tools, each running through the same service call as the route it
//! mirrors, as the caller of the request, under their grants. The tools'
//! schemas name the tables and DataViews the caller may use.

mod tools;

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use data::{DataRequest, DataService};
use kernel::ErrorCode;
use permissions::Principal;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use views::ViewService;
use workflows::WorkflowService;

pub use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
pub use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService,
};

/// The HTTP service the route hands requests to.
pub type McpService = StreamableHttpService<McpServer, NeverSessionManager>;

/// Who calls, as the route authenticated them.
#[derive(Debug, Clone)]
pub struct McpCaller {
    /// The bearer secret (the tools run as the Data API's routes do, with it).
    pub bearer: String,
    /// The caller, resolved by the route.
    pub principal: Principal,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<String>,
    /// The client address.
    pub ip: Option<String>,
}

impl McpCaller {
    fn request(&self) -> DataRequest<'_> {
        DataRequest {
            bearer: &self.bearer,
            zone_header: self.zone_header.as_deref(),
            ip: self.ip.as_deref(),
        }
    }
}

/// A refusal, sent as a tool result with `isError` whose text starts with the code.
#[derive(Debug)]
pub(crate) struct ToolError(String);

impl<E: ErrorCode> From<E> for ToolError {
    fn from(error: E) -> Self {
        let mut text = format!("{}: {}", error.code().as_str(), error.message());
        if let Some(field) = error.field() {
            text.push_str(&format!(" (field {field})"));
        }
        Self(text)
    }
}

impl ToolError {
    /// A bad argument.
    pub(crate) fn argument(name: &str, message: &str) -> Self {
        Self(format!("INVALID_PAYLOAD: {message} (argument {name})"))
    }
}

/// The tools' services.
#[derive(Clone)]
pub struct McpServer {
    data: DataService,
    views: ViewService,
    workflows: WorkflowService,
}

impl McpServer {
    /// A server over the services the tools call.
    pub fn new(data: DataService, views: ViewService, workflows: WorkflowService) -> Self {
        Self {
            data,
            views,
            workflows,
        }
    }

    /// The Streamable HTTP service: stateless (every POST stands alone, so
    /// any instance answers it), JSON answers, any `Host` (callers bring a
    /// bearer credential, which a rebinding page cannot).
    pub fn into_service(self) -> McpService {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .disable_allowed_hosts();
        StreamableHttpService::new(move || Ok(self.clone()), Default::default(), config)
    }
}

/// Work a tool handler hands to the request's own task: the services'
/// futures run there, beside the HTTP request, rather than in rmcp's tasks.
enum Job {
    /// `tools/list`.
    List(oneshot::Sender<Result<Vec<Tool>, ToolError>>),
    /// `tools/call`.
    Call {
        name: String,
        arguments: Map<String, Value>,
        reply: oneshot::Sender<Result<String, ToolError>>,
    },
}

/// The way from rmcp's handler back to the request's task.
#[derive(Clone)]
struct Jobs(mpsc::Sender<Job>);

impl McpServer {
    /// Answers one HTTP request of the endpoint as `caller`: rmcp speaks the
    /// protocol while this task runs the tools it asks for.
    pub async fn serve<B>(
        &self,
        service: &McpService,
        mut request: http1::Request<B>,
        caller: McpCaller,
    ) -> http1::Response<BoxBody<Bytes, Infallible>>
    where
        B: http_body::Body + Send + 'static,
        B::Error: std::fmt::Display,
    {
        let (sender, mut jobs) = mpsc::channel(1);
        request.extensions_mut().insert(Jobs(sender));
        let answer = service.handle(request);
        tokio::pin!(answer);
        loop {
            tokio::select! {
                response = &mut answer => return response,
                Some(job) = jobs.recv() => match job {
                    Job::List(reply) => {
                        let _ = reply.send(tools::list(self, &caller).await);
                    }
                    Job::Call { name, arguments, reply } => {
                        let _ = reply.send(tools::call(self, &caller, &name, &arguments).await);
                    }
                },
            }
        }
    }
}

async fn run<T>(
    context: &RequestContext<RoleServer>,
    job: impl FnOnce(oneshot::Sender<Result<T, ToolError>>) -> Job,
) -> Result<Result<T, ToolError>, ErrorData> {
    let jobs = context
        .extensions
        .get::<http1::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Jobs>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))?;
    let (reply, answer) = oneshot::channel();
    let gone = || ErrorData::internal_error("the request ended", None);
    jobs.0.send(job(reply)).await.map_err(|_| gone())?;
    answer.await.map_err(|_| gone())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tessera", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tessera's data under your own permissions: list_resources first, then \
                 query_rows, get_row, insert_row, update_row, delete_row on a resource \
                 (\"schema.table\"), query_dataview on a DataView, invoke_workflow on a \
                 webhook workflow. Filters use Tessera's filter language, such as \
                 {\"status\": {\"eq\": \"open\"}}.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = run(&context, Job::List)
            .await?
            .map_err(|ToolError(text)| ErrorData::internal_error(text, None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.into_owned();
        if !tools::NAMES.contains(&name.as_str()) {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        let result = match run(&context, |reply| Job::Call {
            name,
            arguments,
            reply,
        })
        .await?
        {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(ToolError(text)) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    }
}
