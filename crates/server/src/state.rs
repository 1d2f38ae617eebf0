//! What every request handler shares.

use std::num::NonZeroU32;
use std::ops::Deref;
use std::sync::Arc;

use crate::prometheus::Metrics;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use switchboard_core::Limits;
use switchboard_runtime::{Effects, Executor};
use switchboard_store::Store;

use crate::calls::Registry;
pub use crate::tool_cache::ToolCache;

/// Server settings; `serve`'s flags and `SWITCHBOARD_*` variables fill them.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Requests per second per tenant (with a burst of twice that).
    pub tenant_rate_per_s: u32,
    /// Live calls per tenant: active calls in the database (every node's), checked when a
    /// call starts; a node also serves no more of a tenant's calls than this.
    pub max_calls_per_tenant: usize,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    pub limits: Limits,
    /// Where OpenAI's API is (the Realtime door's REST and WebSocket bases).
    pub openai: switchboard_realtime::Endpoints,
    /// The MCP endpoint and MCP servers as tool sources.
    pub mcp: crate::mcp::McpSettings,
    /// Estimated bytes of compiled tools kept in memory (least recently used evicted first; an
    /// evicted version is compiled again when next used). `--tool-cache-bytes`.
    pub tool_cache_bytes: u64,
    /// Bounds on what a call keeps of its invocations (in memory, in the store, in answers).
    pub records: switchboard_runtime::RecordLimits,
    /// How long a tool's commit is retried while the database fails before the tool is
    /// answered with an error (nothing of it applied).
    pub commit_retry: std::time::Duration,
    /// How long a node's lease on its calls lasts without a heartbeat (renewed every third of
    /// it): a node silent for longer is dead, and other nodes take its calls over.
    pub lease: std::time::Duration,
    /// The base URL other nodes reach this one at (`--advertise-url`); by default the listen
    /// address, when it is a specific one.
    pub advertise_url: Option<String>,
    /// The deployment's Google OAuth client and API base (`--google-client-id`, …); without
    /// it, Google Calendar cannot be connected.
    pub google: Option<GoogleSettings>,
    /// Bounds on what the `memory` toolkit keeps per caller and per tenant.
    pub memory: switchboard_store::MemoryLimits,
    /// Emails each tenant may send per minute, counted in the database across all nodes.
    pub emails_per_tenant_per_minute: u32,
    /// What this node keeps of finished runs the database did not take in time, to store once
    /// it answers (`--max-unsaved-outcomes`).
    pub outbox: switchboard_runtime::outbox::OutboxLimits,
    /// How long an HTTP-door call may go unused (no function call submitted or answered, no
    /// response cancelled) before it is ended as `DELETE` ends it, on whichever node owns it,
    /// or a dead node's call by any node; `None`: never (`crate::expiry`).
    pub call_idle_timeout: Option<std::time::Duration>,
    /// Bounds on the console's live call timelines (per session, per tenant on each node).
    pub console: crate::console::ConsoleLimits,
    /// The API listener's cap on open connections and its deadlines for slow and idle ones.
    pub connections: crate::listener::ConnectionLimits,
    /// Connections the metrics listener (`--metrics-listen`) takes at once; its deadlines are
    /// the API listener's.
    pub metrics_max_connections: usize,
    /// Open connections to the origins a call's agent's tools name when the call starts
    /// (`--no-warm-upstreams` turns it off; off in this default, for embedders and tests).
    pub warm_upstreams: bool,
    /// How often this node stores its tools' observed latencies and reads the cluster's back
    /// (see [`crate::latency`]). Default 30 s.
    pub latency_sync: std::time::Duration,
    /// The adaptive policy: fillers at once, background runs and deadlines from each tool's
    /// observed latency (`serve --no-adaptive` turns it off: tools follow their static
    /// settings). On by default.
    pub adaptive: bool,
    /// Where the spans of calls, invocations and effects go (`crate::traces`; off by default).
    pub traces: switchboard_runtime::Traces,
    /// Alert rules: how often they are evaluated, how many a tenant may have, delivery retries.
    pub alerts: crate::alerts::AlertSettings,
}

/// Where Google is and who this deployment is to it: deployment configuration, never a
/// tenant's, so a simulator can stand in for Google.
#[derive(Debug, Clone)]
pub struct GoogleSettings {
    pub provider: switchboard_toolkits::oauth::OAuthProvider,
    /// The Calendar API base, e.g. `https://www.googleapis.com/calendar/v3/`.
    pub api_base: reqwest::Url,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tenant_rate_per_s: 200,
            max_calls_per_tenant: 1_000,
            max_body_bytes: 1024 * 1024,
            limits: Limits::default(),
            openai: switchboard_realtime::Endpoints::default(),
            mcp: crate::mcp::McpSettings::default(),
            tool_cache_bytes: ToolCache::DEFAULT_MAX_BYTES,
            records: switchboard_runtime::RecordLimits::default(),
            commit_retry: std::time::Duration::from_secs(2),
            lease: std::time::Duration::from_secs(10),
            advertise_url: None,
            google: None,
            memory: switchboard_store::MemoryLimits::default(),
            emails_per_tenant_per_minute: EMAILS_PER_TENANT_PER_MINUTE,
            outbox: switchboard_runtime::outbox::OutboxLimits::default(),
            call_idle_timeout: Some(CALL_IDLE_TIMEOUT),
            console: crate::console::ConsoleLimits::default(),
            connections: crate::listener::ConnectionLimits::default(),
            metrics_max_connections: crate::listener::ConnectionLimits::METRICS_CONNECTIONS,
            warm_upstreams: false,
            latency_sync: std::time::Duration::from_secs(30),
            adaptive: true,
            traces: switchboard_runtime::Traces::off(),
            alerts: crate::alerts::AlertSettings::default(),
        }
    }
}

/// How long an HTTP-door call may go unused before it ends (`--call-idle-timeout-s`): longer
/// than any conversation goes without a tool call, short enough that calls a client forgot to
/// end give their places back within the hour.
pub const CALL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Emails each tenant may send per minute, across every node sharing the database.
pub const EMAILS_PER_TENANT_PER_MINUTE: u32 = 30;

/// Per-tenant request rate (in-process: each node limits its own share).
#[derive(Debug)]
pub struct TenantLimits {
    limiter: DefaultKeyedRateLimiter<String>,
}

impl TenantLimits {
    pub fn new(per_second: u32) -> Self {
        let rate = NonZeroU32::new(per_second.max(1)).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(per_second.max(1).saturating_mul(2)).unwrap_or(NonZeroU32::MIN);
        TenantLimits {
            limiter: RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)),
        }
    }

    /// `Err(seconds to wait)` when the tenant is over its rate.
    pub fn check_rate(&self, tenant_id: &str) -> Result<(), u64> {
        self.limiter
            .check_key(&tenant_id.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
            })
    }
}

/// The shared state behind every handler.
#[derive(Debug)]
pub struct Inner {
    pub store: Store,
    pub executor: Executor,
    pub effects: Arc<Effects>,
    /// The Realtime door, and the executor of its calls (which REFERs and hangs up through it).
    pub realtime: Arc<switchboard_realtime::RealtimeDoor>,
    pub realtime_executor: Executor,
    pub calls: Registry,
    pub limits: TenantLimits,
    pub tools: ToolCache,
    /// Every built-in toolkit action, compiled once.
    pub toolkit_tools: crate::toolset::ToolkitTools,
    /// Access tokens of Google connections (and the connect flow's code exchange), when the
    /// deployment configured a Google OAuth client.
    pub google_tokens: Option<switchboard_toolkits::oauth::Tokens>,
    pub config: ServerConfig,
    pub metrics: Option<Metrics>,
    /// MCP client pool (also the `mcp.call` handler) and the MCP endpoint's shutdown signal.
    pub mcp: crate::mcp::McpState,
    /// This node of the deployment: its id and lease (see [`crate::ownership`]).
    pub node: crate::ownership::Node,
    /// The client that passes a call's requests on to the node that owns it.
    pub forwarder: reqwest::Client,
    /// Places for phone calls being set up at once (their reads, the call's record, the
    /// session's start). A call beyond them waits for a place, so under a burst the set-ups
    /// run at the pace the database allows and the webhooks, whose own work is small, are
    /// still answered at once instead of queueing behind every set-up.
    pub call_setups: Arc<tokio::sync::Semaphore>,
    /// Finished runs the database did not take in time, kept to be stored in each call's
    /// order once it answers (see [`switchboard_runtime::outbox`]).
    pub outbox: Arc<switchboard_runtime::outbox::Outbox>,
    /// Tools' timeouts by tenant, call and function name, for requests passed on to a call's
    /// owner (see [`crate::deadlines::forward_budget`]).
    pub forward_budgets: moka::sync::Cache<(String, String, String), std::time::Duration>,
    /// The console's open timeline streams on this node, per session and per tenant.
    pub console_streams: crate::console::StreamSlots,
    /// Every tool's observed latency on this node and across the cluster, shared by all calls
    /// (see [`switchboard_runtime::adaptive`] and [`crate::latency`]).
    pub latency: Arc<switchboard_runtime::adaptive::LatencyBook>,
}

/// Phone calls set up at once (see [`Inner::call_setups`]).
pub const CALL_SETUPS_AT_ONCE: usize = 32;

/// Cheap to clone; handlers take it as axum state.
#[derive(Debug, Clone)]
pub struct AppState(pub Arc<Inner>);

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    pub fn new(
        store: Store,
        effects: Arc<Effects>,
        config: ServerConfig,
        metrics: Option<Metrics>,
    ) -> Self {
        // `mcp.call` goes to the tenants' registered servers, unless the caller brought its own
        // handler; MCP servers are held to the same outbound guard as `api_call`.
        let mcp = crate::mcp::McpState::new(
            store.clone(),
            &config.mcp,
            effects.http.allows_private_networks(),
        );
        let effects = if effects.mcp.is_some() {
            effects
        } else {
            let mut with_mcp = (*effects).clone();
            with_mcp.mcp = Some(Arc::clone(&mcp.clients) as Arc<dyn switchboard_runtime::McpCalls>);
            Arc::new(with_mcp)
        };
        // Calendars (CalDAV, and Google when configured) likewise, held to the same outbound
        // guard.
        let allow_private = effects.http.allows_private_networks();
        let google = config
            .google
            .as_ref()
            .and_then(|g| google(&store, g, allow_private));
        let google_tokens = google.as_ref().map(|(tokens, _)| tokens.clone());
        let effects = if effects.calendar.is_some() {
            effects
        } else {
            let mut with_calendar = (*effects).clone();
            let mut calendars = switchboard_toolkits::Calendars::new(store.clone(), allow_private);
            if let Some((_, g)) = google {
                calendars = calendars.with_google(g);
            }
            with_calendar.calendar =
                Some(Arc::new(calendars) as Arc<dyn switchboard_runtime::effects::Calendar>);
            Arc::new(with_calendar)
        };
        let effects = if effects.email.is_some() {
            effects
        } else {
            let mut with_email = (*effects).clone();
            with_email.email = Some(Arc::new(switchboard_toolkits::smtp::Smtp::new(
                store.clone(),
                effects.http.allows_private_networks(),
                config.emails_per_tenant_per_minute,
            ))
                as Arc<dyn switchboard_runtime::effects::EmailSender>);
            Arc::new(with_email)
        };
        // Caller memory is data: the store performs `memory.*` itself.
        let effects = if effects.memory.is_some() {
            effects
        } else {
            let mut with_memory = (*effects).clone();
            with_memory.memory = Some(Arc::new(switchboard_store::MemoryHandler::new(
                store.clone(),
                config.memory,
            ))
                as Arc<dyn switchboard_runtime::effects::Memory>);
            Arc::new(with_memory)
        };
        let realtime = crate::realtime::door(&config);
        let mut realtime_effects = (*effects).clone();
        realtime_effects.call_control =
            Some(Arc::clone(&realtime) as Arc<dyn switchboard_runtime::CallControl>);
        AppState(Arc::new(Inner {
            store,
            executor: Executor::new(Arc::clone(&effects)).with_traces(config.traces.clone()),
            effects,
            realtime,
            realtime_executor: Executor::new(Arc::new(realtime_effects))
                .with_traces(config.traces.clone()),
            calls: Registry::default(),
            limits: TenantLimits::new(config.tenant_rate_per_s),
            tools: ToolCache::new(config.tool_cache_bytes),
            node: crate::ownership::Node::new(config.lease),
            forwarder: forwarder(&config),
            call_setups: Arc::new(tokio::sync::Semaphore::new(CALL_SETUPS_AT_ONCE)),
            outbox: switchboard_runtime::outbox::Outbox::new(config.outbox),
            forward_budgets: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(std::time::Duration::from_secs(600))
                .build(),
            console_streams: crate::console::StreamSlots::new(config.console),
            latency: Arc::new(if config.adaptive {
                switchboard_runtime::adaptive::LatencyBook::default()
            } else {
                switchboard_runtime::adaptive::LatencyBook::off()
            }),
            toolkit_tools: crate::toolset::ToolkitTools::new(&config.limits),
            google_tokens,
            config,
            metrics,
            mcp,
        }))
    }
}

impl Inner {
    /// The journal a session of a tenant's call writes as the call's owner under fencing token
    /// `fence`, with the node's outbox in front of it.
    pub fn call_journal(
        &self,
        tenant: &str,
        fence: i64,
    ) -> Arc<dyn switchboard_runtime::CallJournal> {
        let fenced = Arc::new(self.store.journal(tenant).fenced(fence));
        Arc::new(self.outbox.journal(tenant, fenced))
    }
}

/// The Google token source and calendar handler of a configured deployment.
fn google(
    store: &Store,
    g: &GoogleSettings,
    allow_private: bool,
) -> Option<(
    switchboard_toolkits::oauth::Tokens,
    switchboard_toolkits::google::GoogleCalendar,
)> {
    use switchboard_toolkits::{google, oauth};
    let http = google::client(allow_private)
        .inspect_err(|e| tracing::error!(name: "google_http_client_failed", error = %e, "google_http_client_failed"))
        .ok()?;
    let client = Arc::new(oauth::OAuthClient::new(g.provider.clone(), http.clone()));
    let tokens = oauth::Tokens::new(store.clone(), client);
    let calendar = google::GoogleCalendar::new(http, g.api_base.clone(), tokens.clone());
    Some((tokens, calendar))
}

/// The client for requests passed on to other nodes: the deployment's own addresses, no proxy,
/// no redirects, bounded by the longest a tool may run.
fn forwarder(config: &ServerConfig) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(2))
        .timeout(std::time::Duration::from_secs_f64(
            config.limits.max_timeout_s + 20.0,
        ))
        .build()
        .unwrap_or_default()
}
