//! MCP servers as tool sources: a per-tenant pool of MCP client sessions that lists a server's
//! tools (cached until the server says `notifications/tools/list_changed`) and performs
//! `mcp.call` effects with `tools/call`.
//!
//! The pool knows no database: where a tenant's servers are comes from an [`McpServerSource`].
//! Failures are outcomes, never panics: a server that cannot be reached is `upstream_unavailable`,
//! one that does not answer by the tool's deadline is `timeout` (and is sent
//! `notifications/cancelled`), and a session that broke is dropped so the next call opens a new
//! one. Every error leaving the pool, and every log line it writes, names the server by its
//! label and `scheme://host:port` ([`Scrubber`]), never by its URL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation,
};
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::NeverRetry;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_core::effect::{EffectOutcome, McpRequest};
use switchboard_core::{ErrorCode, ToolError};
use tracing::Instrument;

use crate::BoxFuture;
use crate::breaker::{Admission, BreakerState, Breakers, Ticket, Upstream, Verdict, paused};
use crate::effects::McpCalls;

mod answers;
mod lifetime;
mod scrub;
mod transport;

pub use scrub::{Scrubber, origin_of};

/// How to reach one registered MCP server. Its `Debug` shows only where (`scheme://host:port`,
/// or the program): the URL may carry a credential.
#[derive(Clone)]
pub enum McpTransportSpec {
    /// Streamable HTTP: the endpoint URL and headers sent with every request (e.g. a token).
    Http {
        url: String,
        headers: Vec<(String, SecretString)>,
    },
    /// A local process speaking MCP over stdio (only where the operator allows it).
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, SecretString)>,
    },
}

impl std::fmt::Debug for McpTransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            McpTransportSpec::Http { .. } => "Http",
            McpTransportSpec::Stdio { .. } => "Stdio",
        };
        f.debug_struct(kind)
            .field("at", &Scrubber::new(self).origin())
            .finish_non_exhaustive()
    }
}

/// One tenant's registered MCP server as the pool needs it.
#[derive(Debug, Clone)]
pub struct McpServerSpec {
    pub label: String,
    pub transport: McpTransportSpec,
    /// Changes whenever the registration changes (its `updated_at`), so the pool reconnects.
    pub revision: String,
}

/// Where the pool finds a tenant's MCP servers (the store, in the server).
pub trait McpServerSource: Send + Sync {
    /// The server registered under `label`, `None` when there is none.
    fn server<'a>(
        &'a self,
        tenant_id: &'a str,
        label: &'a str,
    ) -> BoxFuture<'a, Result<Option<McpServerSpec>, String>>;
}

/// One tool of an MCP server, as `tools/list` described it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The tool's `inputSchema` (a JSON Schema object).
    pub input_schema: Value,
    /// `annotations.readOnlyHint`: the tool changes nothing.
    #[serde(default)]
    pub read_only: bool,
}

/// Settings of the pool.
#[derive(Debug, Clone)]
pub struct McpClientOptions {
    /// Let HTTP servers be on loopback and private addresses (as `api_call`'s guard allows).
    pub allow_private_networks: bool,
    /// Start stdio servers; off unless the operator turns it on.
    pub allow_stdio: bool,
    /// Longest wait for a new session's `initialize` handshake.
    pub connect_timeout: Duration,
    /// Longest wait for `tools/list`.
    pub list_timeout: Duration,
    /// Failures in a row (unreachable, or gone mid-request) after which a tenant's requests to
    /// one server fail fast for `breaker_cooldown`, then one trial at a time.
    pub breaker_failure_threshold: u32,
    pub breaker_cooldown: Duration,
    /// A session with no request through it for this long is closed (its streams to the
    /// server and a stdio server's process with it).
    pub session_idle: Duration,
    /// A session this old is retired: the next request opens a new one.
    pub session_max_age: Duration,
}

impl Default for McpClientOptions {
    fn default() -> Self {
        McpClientOptions {
            allow_private_networks: false,
            allow_stdio: false,
            connect_timeout: Duration::from_secs(10),
            list_timeout: Duration::from_secs(10),
            breaker_failure_threshold: 5,
            breaker_cooldown: Duration::from_secs(30),
            session_idle: Duration::from_secs(300),
            session_max_age: Duration::from_secs(3600),
        }
    }
}

type Session = RunningService<RoleClient, Listener>;

/// Longest a server's `ttlMs` is honoured (a list older than this is asked for again).
const MAX_LIST_TTL_MS: u64 = 3_600_000;

/// How a session starts: `server/discover` at 2026-07-28 first, falling back to the legacy
/// `initialize` handshake (2025-11-25) for a server that does not know it.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Marks a server's tool list stale when it says its tools changed.
#[derive(Debug, Clone)]
struct Listener {
    stale: Arc<AtomicBool>,
    label: String,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(name: "mcp_tools_list_changed", server = %self.label, "mcp_tools_list_changed");
        self.stale.store(true, Ordering::Release);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("switchboard", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A server's last tool list, and until when it may be reused (`None`: until it says it
/// changed).
type Listed = (Arc<Vec<McpToolInfo>>, Option<tokio::time::Instant>);

/// One server of one tenant: its session (opened on demand) and its cached tool list.
#[derive(Debug)]
struct Pooled {
    revision: String,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// The last list and until when it may be reused: the server's `ttlMs`; a legacy server
    /// that gives none announces changes on its session (`stale`), so its list is kept until
    /// then.
    tools: Mutex<Option<Listed>>,
    stale: Arc<AtomicBool>,
    /// When the session was opened and last used: it is closed when idle and retired when old.
    lifetime: lifetime::Lifetime,
}

impl Pooled {
    fn new(revision: &str) -> Self {
        Pooled {
            revision: revision.to_owned(),
            session: tokio::sync::Mutex::new(None),
            tools: Mutex::new(None),
            stale: Arc::new(AtomicBool::new(false)),
            lifetime: lifetime::Lifetime::new(),
        }
    }
}

/// The per-tenant pool of MCP client sessions; implements [`McpCalls`] for `mcp.call`.
pub struct McpClients {
    source: Arc<dyn McpServerSource>,
    options: McpClientOptions,
    /// One client for every HTTP server: no proxy, the outbound address guard on DNS and
    /// redirects, exactly as `api_call`'s.
    http: Option<reqwest::Client>,
    pool: Mutex<HashMap<(String, String), Arc<Pooled>>>,
    /// Per tenant and server label: a server that cannot be reached fails fast instead of
    /// costing every call the connect timeout.
    breakers: Breakers,
    /// Sessions opened since the pool was made.
    opened: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClients")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl McpClients {
    /// A pool over `source`. Should reqwest fail to build the HTTP client (a broken TLS setup),
    /// the failure is logged and every HTTP server answers `upstream_unavailable`.
    pub fn new(source: Arc<dyn McpServerSource>, options: McpClientOptions) -> Self {
        let http = crate::http::guarded_client_builder(options.allow_private_networks)
            .user_agent(format!("switchboard/{}", env!("CARGO_PKG_VERSION")))
            // Idle pooled connections of a server that restarted would fail the next request.
            .pool_max_idle_per_host(0)
            .build()
            .inspect_err(|e| tracing::error!(name: "mcp_http_client_failed", error = %e, "mcp_http_client_failed"))
            .ok();
        let breakers = Breakers::new(
            Upstream::Mcp,
            options.breaker_failure_threshold,
            options.breaker_cooldown,
        );
        McpClients {
            source,
            options,
            http,
            pool: Mutex::new(HashMap::new()),
            breakers,
            opened: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The settings the pool runs with.
    pub fn options(&self) -> &McpClientOptions {
        &self.options
    }

    /// How many sessions the pool holds open now, and how many it has opened in all.
    pub fn sessions(&self) -> (usize, u64) {
        let entries: Vec<Arc<Pooled>> = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let open = entries
            .iter()
            .filter(|p| p.session.try_lock().map_or(true, |s| s.is_some()))
            .count();
        (open, self.opened.load(Ordering::Relaxed))
    }

    /// Drops the session and cached tools of one server (its registration changed or went).
    pub fn forget(&self, tenant_id: &str, label: &str) {
        let removed = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(tenant_id.to_owned(), label.to_owned()));
        if let Some(p) = removed {
            tokio::spawn(async move {
                if let Some(s) = p.session.lock().await.take() {
                    s.cancellation_token().cancel();
                }
            });
        }
    }

    /// The server's tools: the cached list unless it is stale or `refresh`, else `tools/list`.
    ///
    /// # Errors
    /// A [`ToolError`] naming the server: not registered, not reachable, or refusing the list.
    pub async fn list_tools(
        &self,
        tenant_id: &str,
        label: &str,
        refresh: bool,
    ) -> Result<Arc<Vec<McpToolInfo>>, ToolError> {
        let spec = self.spec(tenant_id, label).await?;
        let ticket = self.admit(tenant_id, &spec)?;
        let listed = self.list_tools_of(tenant_id, &spec, refresh).await;
        ticket.settle(verdict(&listed));
        listed.map_err(|e| scrubbed(e, &spec))
    }

    /// Tells `watch` of every server breaker that opens (its upstream is `mcp:<label>`).
    pub fn watch_breakers(&self, watch: crate::breaker::BreakerWatch) {
        self.breakers.watch(watch);
    }

    /// The state of a tenant's breaker for the server registered as `label`.
    pub fn breaker_state(&self, tenant_id: &str, label: &str) -> BreakerState {
        self.breakers.state(tenant_id, label)
    }

    /// A request to `spec`'s server may go out, unless its breaker is open.
    fn admit(&self, tenant_id: &str, spec: &McpServerSpec) -> Result<Ticket<'_>, ToolError> {
        match self.breakers.admit(tenant_id, &spec.label) {
            Admission::Go(ticket) => Ok(ticket),
            Admission::Rejected { until } => Err(ToolError::new(
                ErrorCode::UpstreamUnavailable,
                format!(
                    "MCP server `{}` ({}) is failing; {} after repeated failures. Tell the caller this cannot be done right now.",
                    spec.label,
                    Scrubber::new(&spec.transport).origin(),
                    paused(until)
                ),
            )),
        }
    }

    async fn list_tools_of(
        &self,
        tenant_id: &str,
        spec: &McpServerSpec,
        refresh: bool,
    ) -> Result<Arc<Vec<McpToolInfo>>, ToolError> {
        let label = spec.label.as_str();
        let pooled = self.pooled(tenant_id, spec);
        if !refresh && !pooled.stale.load(Ordering::Acquire) {
            let cached = pooled
                .tools
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some((tools, fresh_until)) = cached
                && fresh_until.is_none_or(|t| tokio::time::Instant::now() < t)
            {
                return Ok(tools);
            }
        }
        let session = self
            .session(&pooled, spec, self.options.connect_timeout)
            .await?;
        // Cleared before asking, so a change announced while the list travels is not lost.
        pooled.stale.store(false, Ordering::Release);
        let listed = match tokio::time::timeout(
            self.options.list_timeout,
            session.peer().list_all_tools_with_cache_hint(),
        )
        .await
        {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                pooled.stale.store(true, Ordering::Release);
                return Err(self.failed(&pooled, spec, "tools/list", e).await);
            }
            Err(_) => {
                pooled.stale.store(true, Ordering::Release);
                return Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "MCP server `{label}` did not list its tools within {} s",
                        self.options.list_timeout.as_secs_f64()
                    ),
                ));
            }
        };
        let modern = session
            .peer()
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        let fresh_until = match listed.ttl_ms {
            Some(ms) => {
                Some(tokio::time::Instant::now() + Duration::from_millis(ms.min(MAX_LIST_TTL_MS)))
            }
            // No hint: a modern server's list is stale at once (the revision's rule); a legacy
            // one tells its session when the list changes.
            None if modern => Some(tokio::time::Instant::now()),
            None => None,
        };
        let tools: Arc<Vec<McpToolInfo>> = Arc::new(
            listed
                .items
                .into_iter()
                .map(|t| McpToolInfo {
                    read_only: t
                        .annotations
                        .as_ref()
                        .and_then(|a| a.read_only_hint)
                        .unwrap_or(false),
                    name: t.name.into_owned(),
                    title: t.title,
                    description: t.description.map(|d| d.into_owned()),
                    input_schema: Value::Object((*t.input_schema).clone()),
                })
                .collect(),
        );
        *pooled.tools.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Arc::clone(&tools), fresh_until));
        tracing::info!(name: "mcp_tools_listed", tenant_id = %tenant_id, server = %label, tools = tools.len(), "mcp_tools_listed");
        Ok(tools)
    }

    async fn spec(&self, tenant_id: &str, label: &str) -> Result<McpServerSpec, ToolError> {
        match self.source.server(tenant_id, label).await {
            Ok(Some(spec)) => Ok(spec),
            Ok(None) => Err(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!("No MCP server `{label}` is registered for this tenant."),
            )),
            Err(e) => {
                tracing::warn!(name: "mcp_server_lookup_failed", server = %label, error = %e, "mcp_server_lookup_failed");
                Err(ToolError::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "The registration of MCP server `{label}` could not be read; try again."
                    ),
                ))
            }
        }
    }

    /// The pool entry of a server, replaced when its registration changed.
    fn pooled(&self, tenant_id: &str, spec: &McpServerSpec) -> Arc<Pooled> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (tenant_id.to_owned(), spec.label.clone());
        match pool.get(&key) {
            Some(p) if p.revision == spec.revision => Arc::clone(p),
            _ => {
                let p = Arc::new(Pooled::new(&spec.revision));
                if let Some(old) = pool.insert(key, Arc::clone(&p)) {
                    tokio::spawn(async move {
                        if let Some(s) = old.session.lock().await.take() {
                            s.cancellation_token().cancel();
                        }
                    });
                }
                p
            }
        }
    }

    /// The server's open session, opening one (bounded by `budget`) when there is none.
    async fn session(
        &self,
        pooled: &Arc<Pooled>,
        spec: &McpServerSpec,
        budget: Duration,
    ) -> Result<Arc<Session>, ToolError> {
        let (idle, max_age) = (self.options.session_idle, self.options.session_max_age);
        let mut slot = pooled.session.lock().await;
        if let Some(s) = slot.as_ref() {
            if !s.is_closed() && !pooled.lifetime.expired(idle, max_age) {
                pooled.lifetime.used();
                return Ok(Arc::clone(s));
            }
            // Gone, or past its life: requests still running on it keep it until they end.
            *slot = None;
        }
        let label = &spec.label;
        let budget = budget.min(self.options.connect_timeout);
        let listener = Listener {
            stale: Arc::clone(&pooled.stale),
            label: label.clone(),
        };
        let opened = match tokio::time::timeout(budget, self.open(listener, spec)).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "no answer to `server/discover` or `initialize` within {} s",
                budget.as_secs_f64()
            )),
        };
        match opened {
            Ok(session) => {
                tracing::info!(name: "mcp_session_opened", server = %label, "mcp_session_opened");
                // A new session may see another tool list than the cached one.
                pooled.stale.store(true, Ordering::Release);
                let session = Arc::new(session);
                self.opened.fetch_add(1, Ordering::Relaxed);
                pooled.lifetime.opened();
                lifetime::watch(pooled, &session, idle, max_age, label.clone());
                listen_for_changes(&session, &pooled.stale, label);
                *slot = Some(Arc::clone(&session));
                Ok(session)
            }
            Err(e) => {
                let scrubber = Scrubber::new(&spec.transport);
                let origin = scrubber.origin();
                tracing::warn!(name: "mcp_session_failed", server = %label, origin = %origin, error = %e, "mcp_session_failed");
                Err(ToolError::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "MCP server `{label}` ({origin}) is not reachable ({e}). Tell the caller this cannot be done right now."
                    ),
                ))
            }
        }
    }

    /// Opens a session; the error says why it could not, scrubbed.
    async fn open(&self, listener: Listener, spec: &McpServerSpec) -> Result<Session, String> {
        let scrubber = Arc::new(Scrubber::new(&spec.transport));
        match &spec.transport {
            McpTransportSpec::Http { url, headers } => {
                check_url(url, self.options.allow_private_networks)?;
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = reqwest::header::HeaderName::try_from(name.as_str())
                        .map_err(|_| format!("header name `{name}` is not valid"))?;
                    let mut value =
                        reqwest::header::HeaderValue::from_str(value.expose_secret())
                            .map_err(|_| format!("the value of header `{name}` is not valid"))?;
                    value.set_sensitive(true);
                    custom.insert(name, value);
                }
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                // A dropped stream means the server went away: fail the call now rather than
                // reconnect in the background while the caller waits.
                config.retry_config = Arc::new(NeverRetry::default());
                let http = self
                    .http
                    .clone()
                    .ok_or("the MCP HTTP client could not be built (see the server's log)")?;
                let http = transport::UrlFreeClient {
                    http,
                    scrubber: Arc::clone(&scrubber),
                };
                let transport = StreamableHttpClientTransport::with_client(http, config);
                listener
                    .serve_with_lifecycle(transport, lifecycle())
                    .await
                    .map_err(|e| describe_init(&e, &scrubber))
            }
            McpTransportSpec::Stdio { command, args, env } => {
                if !self.options.allow_stdio {
                    return Err(
                        "stdio MCP servers are turned off on this server (serve --allow-mcp-stdio)"
                            .to_owned(),
                    );
                }
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).kill_on_drop(true);
                for (k, v) in env {
                    cmd.env(k, v.expose_secret());
                }
                let transport = rmcp::transport::TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map(|(t, _)| t)
                    .map_err(|e| scrubber.brief(&format!("could not start `{command}`: {e}")))?;
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| describe_init(&e, &scrubber))
            }
        }
    }

    /// Turns a failed request into the model's error; a broken session is dropped so the next
    /// call opens a new one.
    async fn failed(
        &self,
        pooled: &Pooled,
        spec: &McpServerSpec,
        what: &str,
        e: ServiceError,
    ) -> ToolError {
        let label = &spec.label;
        let scrubber = Scrubber::new(&spec.transport);
        match e {
            // An answer that named another request's id, caught where its POST was read
            // (`answers`): the server mixed up its answers, so this one is not used. The session
            // stays for the calls it answers right; failures in a row open the breaker.
            ServiceError::McpError(err) if answers::is_misaddressed(&err) => {
                tracing::warn!(name: "mcp_answer_misaddressed", server = %label, origin = %scrubber.origin(), "mcp_answer_misaddressed");
                ToolError::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "MCP server `{label}` ({}) answered {what} with the id of another request, a protocol error, so its answer was not used. Tell the caller this cannot be done right now; it may work again later.",
                        scrubber.origin()
                    ),
                )
            }
            ServiceError::McpError(err) => ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "MCP server `{label}` ({}) refused {what}: {}",
                    scrubber.origin(),
                    scrubber.brief(&err.message)
                ),
            ),
            other => {
                let other = scrubber.brief(&other.to_string());
                tracing::warn!(name: "mcp_session_broken", server = %label, origin = %scrubber.origin(), error = %other, "mcp_session_broken");
                if let Some(s) = pooled.session.lock().await.take() {
                    s.cancellation_token().cancel();
                }
                ToolError::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "MCP server `{label}` ({}) went away during {what} ({other}). Tell the caller this cannot be done right now; it may work again later.",
                        scrubber.origin()
                    ),
                )
            }
        }
    }

    async fn call_tool(
        &self,
        tenant_id: &str,
        request: &McpRequest,
        timeout: Duration,
    ) -> Result<Value, ToolError> {
        let started = tokio::time::Instant::now();
        let spec = self.spec(tenant_id, &request.server).await?;
        let ticket = self.admit(tenant_id, &spec)?;
        let answered = self
            .call_tool_on(tenant_id, &spec, request, timeout, started)
            .await;
        ticket.settle(verdict(&answered));
        answered.map_err(|e| scrubbed(e, &spec))
    }

    async fn call_tool_on(
        &self,
        tenant_id: &str,
        spec: &McpServerSpec,
        request: &McpRequest,
        timeout: Duration,
        started: tokio::time::Instant,
    ) -> Result<Value, ToolError> {
        let label = spec.label.as_str();
        let pooled = self.pooled(tenant_id, spec);
        let session = self.session(&pooled, spec, timeout).await?;
        let arguments = match &request.arguments {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let mut params = CallToolRequestParams::new(request.tool.clone()).with_arguments(arguments);
        // The same key on every retry of this effect, for servers that deduplicate.
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.0.0.insert(
            "switchboard/idempotency_key".into(),
            json!(request.idempotency_key),
        );
        // The effect's span as the server's parent (`_meta` as SEP-414 has it; the transport
        // sends the same as headers).
        if let Some((parent, state)) = crate::traces::current_headers() {
            meta.0.set_traceparent(parent);
            if let Some(state) = state {
                meta.0.set_tracestate(state);
            }
        }
        params.meta = Some(meta);
        let left = timeout.saturating_sub(started.elapsed());
        // Dropping the request future (deadline, or the run aborted) makes rmcp send
        // `notifications/cancelled` for it.
        let answer = tokio::time::timeout(left, session.peer().call_tool_once(params)).await;
        let what = format!("the call of `{}`", request.tool);
        match answer {
            Err(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "MCP tool `{}` on `{label}` did not answer within {} s; it was cancelled. Tell the caller it is taking too long and offer to try again.",
                    request.tool,
                    timeout.as_secs_f64()
                ),
            )),
            Ok(Err(e)) => Err(self.failed(&pooled, spec, &what, e).await),
            Ok(Ok(CallToolResponse::Complete(result))) => {
                tool_result(label, &request.tool, result, request.max_json_depth)
            }
            Ok(Ok(_)) => Err(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "MCP tool `{}` on `{label}` asked for more input (or started a background task) instead of answering; this runtime cannot ask the caller on the server's behalf. Tell the caller this cannot be done by phone right now.",
                    request.tool
                ),
            )),
        }
    }
}

impl McpCalls for McpClients {
    fn call<'a>(
        &'a self,
        tenant_id: &'a str,
        request: &'a McpRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, EffectOutcome> {
        let span = tracing::info_span!("mcp_call", server = %request.server, tool = %request.tool);
        Box::pin(
            async move {
                match self.call_tool(tenant_id, request, timeout).await {
                    Ok(value) => EffectOutcome::Done { value },
                    Err(error) => {
                        tracing::info!(name: "mcp_call_failed", code = %error.code, "mcp_call_failed");
                        EffectOutcome::Failed(error)
                    }
                }
            }
            .instrument(span),
        )
    }
}

/// On a 2026-07-28 session whose server announces tool list changes: a subscription
/// (`subscriptions/listen`) that marks the cached list stale at each
/// `notifications/tools/list_changed` (a legacy session gets them on its own stream, see
/// [`Listener`]). Both the request and its stream end when the session's service stops; a
/// server that refuses the subscription leaves the list to its `ttlMs`.
fn listen_for_changes(session: &Session, stale: &Arc<AtomicBool>, label: &str) {
    let Some(info) = session.peer().peer_info() else {
        return;
    };
    let announces = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if info.protocol_version.has_initialize() || !announces {
        return;
    }
    let peer = session.peer().clone();
    let (stale, label) = (Arc::clone(stale), label.to_owned());
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(name: "mcp_listen_refused", server = %label, error = %e, "mcp_listen_refused");
                return;
            }
        };
        loop {
            match subscription.next().await {
                Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                    tracing::info!(name: "mcp_tools_list_changed", server = %label, "mcp_tools_list_changed");
                    stale.store(true, Ordering::Release);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    });
}

/// What a request says about its server's health: unreachable (or gone mid-request) is a
/// failure; any answer, an error result or a refusal included, shows it is up; a tool that ran
/// past its deadline says nothing about the server.
fn verdict<T>(result: &Result<T, ToolError>) -> Verdict {
    match result {
        Ok(_) => Verdict::Success,
        Err(e) if e.code == ErrorCode::UpstreamUnavailable => Verdict::Failure,
        Err(e) if e.code == ErrorCode::Timeout => Verdict::Neutral,
        Err(_) => Verdict::Success,
    }
}

/// Why a session could not be opened, in a few words and scrubbed: the transport's errors
/// may quote the URL (and so a token in it).
fn describe_init(e: &rmcp::service::ClientInitializeError, scrubber: &Scrubber) -> String {
    // Neither `server/discover` nor the `initialize` fallback worked: the handshake's failure
    // says more (a status, a refused connection) than the probe's.
    if let rmcp::service::ClientInitializeError::LegacyFallbackFailed { fallback, .. } = e {
        return describe_init(fallback, scrubber);
    }
    let cause: &(dyn std::error::Error + 'static) = match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => error.error.as_ref(),
        other => other,
    };
    match http_cause(cause) {
        Some(http) if http.is_connect() => {
            let mut deepest: &(dyn std::error::Error + 'static) = http;
            while let Some(s) = deepest.source() {
                deepest = s;
            }
            format!(
                "could not connect to {} ({})",
                scrubber.origin(),
                scrubber.brief(&deepest.to_string())
            )
        }
        Some(http) if http.is_timeout() => {
            format!("{} did not answer in time", scrubber.origin())
        }
        _ => format!(
            "the MCP handshake failed: {}",
            scrubber.brief(&error_chain(cause))
        ),
    }
}

/// The reqwest error behind a transport failure, if that is what it was (rmcp keeps it in
/// fields its errors do not give as their `source`).
fn http_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a reqwest::Error> {
    type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>;
    let mut current = Some(e);
    while let Some(e) = current {
        let http = match e.downcast_ref::<HttpError>() {
            Some(h) => Some(h),
            None => {
                match e.downcast_ref::<rmcp::transport::worker::WorkerQuitReason<HttpError>>() {
                    Some(rmcp::transport::worker::WorkerQuitReason::Fatal { error, .. }) => {
                        Some(error)
                    }
                    _ => None,
                }
            }
        };
        match http {
            Some(rmcp::transport::streamable_http_client::StreamableHttpError::Client(r)) => {
                return Some(r);
            }
            Some(_) => return None,
            None => {}
        }
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            return Some(r);
        }
        current = e.source();
    }
    None
}

/// An error and its sources, as one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// A pool error with its message scrubbed of the server's URL and secrets, whatever produced it.
fn scrubbed(mut error: ToolError, spec: &McpServerSpec) -> ToolError {
    error.message = Scrubber::new(&spec.transport).scrub(&error.message);
    error
}

/// Refuses URLs that are not http(s), and IP-literal hosts the outbound guard forbids (names
/// are checked by the guarded resolver when they connect).
pub fn check_url(url: &str, allow_private_networks: bool) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|_| {
        "the URL is not a valid absolute URL; write it as https://host/mcp".to_owned()
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "the URL uses `{}`; MCP servers are reached over http or https",
            parsed.scheme()
        ));
    }
    let host = parsed.host_str().unwrap_or_default();
    if host.is_empty() {
        return Err("the URL has no host; write it as https://host/mcp".to_owned());
    }
    if !allow_private_networks
        && let Ok(ip) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
        && crate::http::is_forbidden_address(ip)
    {
        return Err(format!(
            "{host} is a loopback, private or metadata address, which outbound calls may not reach"
        ));
    }
    Ok(())
}

/// What the tool returned, as the `mcp.call` action's value: the structured content when it is
/// an object (or the one text block is a JSON object), else `{"content": ...}` with the text
/// (parsed when it is JSON). An `isError`
/// result is a failure whose message is the tool's text. A value nested deeper than
/// `max_depth` is refused: it could not be kept and read back.
fn tool_result(
    label: &str,
    tool: &str,
    result: CallToolResult,
    max_depth: usize,
) -> Result<Value, ToolError> {
    let value = result_value(label, tool, result)?;
    if switchboard_core::json_bounds::check_depth(&value, max_depth).is_err() {
        return Err(ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!(
                "MCP tool `{tool}` on `{label}` answered with JSON nested deeper than {max_depth} levels (the max_json_depth limit)"
            ),
        ));
    }
    Ok(value)
}

fn result_value(label: &str, tool: &str, result: CallToolResult) -> Result<Value, ToolError> {
    let blocks: Vec<Value> = result
        .content
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if result.is_error == Some(true) {
        let text = texts.join("\n");
        let text = if text.is_empty() {
            "no details given".to_owned()
        } else {
            text.chars().take(1000).collect()
        };
        return Err(ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!("MCP tool `{tool}` on `{label}` failed: {text}"),
        ));
    }
    if let Some(Value::Object(m)) = result.structured_content {
        return Ok(Value::Object(m));
    }
    let parse = |t: &str| serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned()));
    let content = match (texts.as_slice(), blocks.len()) {
        ([], 0) => Value::Null,
        // Many servers send their object as JSON text only: it is as good as structured.
        ([one], 1) => match parse(one) {
            Value::Object(m) => return Ok(Value::Object(m)),
            other => other,
        },
        _ => Value::Array(
            blocks
                .into_iter()
                .map(|mut b| match b.get("text").and_then(Value::as_str) {
                    Some(t) => parse(t),
                    None => {
                        // Images and audio are base64: the model gets what they are, not them.
                        if let Value::Object(m) = &mut b {
                            m.remove("data");
                            m.remove("blob");
                        }
                        b
                    }
                })
                .collect(),
        ),
    };
    Ok(json!({ "content": content }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }

    #[test]
    fn results_become_values_for_the_tool() {
        let too_deep = "MCP tool `t` on `crm` answered with JSON nested deeper than 64 levels (the max_json_depth limit)".to_owned();
        let cases = [
            (
                json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}], "structuredContent": {"sum": 3}}),
                Ok(json!({"sum": 3})),
            ),
            (
                json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}]}),
                Ok(json!({"sum": 3})),
            ),
            (
                json!({"content": [{"type": "text", "text": "hello"}]}),
                Ok(json!({"content": "hello"})),
            ),
            (
                json!({"content": [{"type": "text", "text": "[1, 2]"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
                Ok(json!({"content": [[1, 2], {"type": "image", "mimeType": "image/png"}]})),
            ),
            (
                json!({"content": [{"type": "text", "text": "no such order"}], "isError": true}),
                Err("MCP tool `t` on `crm` failed: no such order".to_owned()),
            ),
            (
                json!({"content": [], "structuredContent": {"a": nested(64)}}),
                Err(too_deep.clone()),
            ),
            (
                json!({"content": [{"type": "text", "text": nested(64).to_string()}]}),
                Err(too_deep.clone()),
            ),
            (
                json!({"content": [], "structuredContent": {"a": nested(63)}}),
                Ok(json!({"a": nested(63)})),
            ),
        ];
        for (input, expected) in cases {
            let got = tool_result("crm", "t", result(input.clone()), 64).map_err(|e| e.message);
            assert_eq!(got, expected, "for {input}");
        }
    }

    #[test]
    fn urls_are_checked_like_api_calls() {
        assert!(check_url("https://mcp.example.com/mcp", false).is_ok());
        assert!(
            check_url("http://127.0.0.1:9/mcp", false)
                .unwrap_err()
                .contains("loopback")
        );
        assert!(check_url("http://127.0.0.1:9/mcp", true).is_ok());
        assert!(
            check_url("ftp://example.com/", true)
                .unwrap_err()
                .contains("`ftp`")
        );
        assert!(check_url("not a url", true).is_err());
    }
}
