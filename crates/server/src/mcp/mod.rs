//! MCP both ways.
//!
//! - [`door`]: each agent's tools served over MCP streamable HTTP at `/v1/agents/{name}/mcp`,
//!   and each live call's at `/v1/calls/{call_id}/mcp` (rmcp's `StreamableHttpService`, both
//!   protocol eras), running every `tools/call` through the same call session and executor as
//!   the other doors.
//! - [`call_token`]: credentials that open one call's endpoint while the call lives (what
//!   OpenAI gets for a Realtime call's MCP tool).
//! - [`sources`]: tenants' MCP servers as tool sources: the store behind the runtime's client
//!   pool, and the synthesized declarative tools an agent gets for `"<label>/<tool>"` entries.
//! - [`sessions`]: the door's sessions, each bound to whoever opened it; [`streams`]: the
//!   door's event streams, each ended after the longest a stream may last.
//!
//! The REST routes that register servers are in `routes::mcp_servers`.

use std::sync::Arc;
use std::time::Duration;

use switchboard_runtime::mcp::{McpClientOptions, McpClients};
use switchboard_store::Store;
use tokio_util::sync::CancellationToken;

pub mod call_token;
pub mod door;
pub mod sessions;
pub mod sources;
pub mod streams;

/// The path of an agent's MCP endpoint (what an MCP client is pointed at).
pub const ENDPOINT_PATH: &str = "/v1/agents/{name}/mcp";
/// The path of a live call's MCP endpoint: the tools of its active agent, every `tools/call`
/// an invocation of that call.
pub const CALL_ENDPOINT_PATH: &str = "/v1/calls/{call_id}/mcp";

/// Settings of both MCP directions; `serve`'s `--mcp-*` flags fill them.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `Host` header values the MCP endpoint accepts (a name, or `name:port`): a guard against
    /// DNS rebinding. Default: the localhost names.
    pub allowed_hosts: Vec<String>,
    /// No MCP sessions: each request stands alone, so several nodes can serve the endpoint.
    pub stateless: bool,
    /// Let tenants register stdio MCP servers (processes started on this machine).
    pub allow_stdio: bool,
    /// Most MCP sessions one tenant may have open on this node (each holds a worker and, once
    /// it calls a tool, a call); a new one beyond it is refused with 429.
    pub max_sessions_per_tenant: usize,
    /// How long a session lives without a message from its client: then it is closed, with
    /// its streams and the call it started.
    pub session_idle: Duration,
    /// The longest one of the door's event streams stays open (a session's GET stream; a POST
    /// answered as a stream): then it ends and a client opens another. Longer than any tool's
    /// deadline (`max_timeout_s`), so no answer is cut.
    pub max_stream: Duration,
    /// A session to a tenant's MCP server with no request through it for this long is closed
    /// (its streams to the server and a stdio server's process with it).
    pub pool_session_idle: Duration,
    /// A session to a tenant's MCP server this old is retired: the next request opens another.
    pub pool_session_max_age: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            stateless: false,
            allow_stdio: false,
            max_sessions_per_tenant: 100,
            session_idle: Duration::from_secs(300),
            max_stream: Duration::from_secs(600),
            pool_session_idle: McpClientOptions::default().session_idle,
            pool_session_max_age: McpClientOptions::default().session_max_age,
        }
    }
}

/// What the MCP code shares: the client pool, the door's sessions and the signal that ends MCP
/// streams on shutdown.
#[derive(Debug, Clone)]
pub struct McpState {
    pub clients: Arc<McpClients>,
    /// The MCP door's sessions, each bound to the tenant and agent that opened it.
    pub sessions: Arc<sessions::OwnedSessions>,
    /// Cancelled when the server shuts down: open MCP streams (and the console's timeline
    /// streams) end so shutdown is not held up.
    pub shutdown: CancellationToken,
}

impl McpState {
    /// The client pool over the store's registrations.
    pub fn new(store: Store, settings: &McpSettings, allow_private_networks: bool) -> Self {
        let options = McpClientOptions {
            allow_private_networks,
            allow_stdio: settings.allow_stdio,
            connect_timeout: Duration::from_secs(10),
            list_timeout: Duration::from_secs(10),
            session_idle: settings.pool_session_idle,
            session_max_age: settings.pool_session_max_age,
            ..McpClientOptions::default()
        };
        McpState {
            clients: Arc::new(McpClients::new(
                Arc::new(sources::StoreSource(store)),
                options,
            )),
            sessions: Arc::new(sessions::OwnedSessions::new(settings.session_idle)),
            shutdown: CancellationToken::new(),
        }
    }
}

/// The MCP endpoint URL of call `call_id` on a server reachable at `base` (e.g.
/// `https://switchboard.example.com`): what the Realtime door gives OpenAI as a `type: "mcp"`
/// tool's `server_url`. `None` when `base` is not a URL.
pub fn call_endpoint(base: &str, call_id: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(base).ok()?;
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["v1", "calls", call_id, "mcp"]);
    Some(url.into())
}
