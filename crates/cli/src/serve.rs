//! `switchboard serve`, `switchboard migrate`, and tenant and key administration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use secrecy::ExposeSecret;
use switchboard_runtime::Effects;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_server::listener::ConnectionLimits;
use switchboard_server::mcp::McpSettings;
use switchboard_server::{AppState, ServerConfig};
use switchboard_store::{MasterKey, Store};

/// Where the database is and how secrets are sealed: what every database command needs.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// `sqlite://FILE` (created if missing) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://switchboard.db")]
    pub database: String,
    /// The master key file, used when `SWITCHBOARD_MASTER_KEY` is not set; created on first use.
    #[arg(
        long,
        env = "SWITCHBOARD_KEY_FILE",
        default_value = ".switchboard/master.key"
    )]
    pub key_file: PathBuf,
    /// Database connections in the pool.
    #[arg(long, env = "SWITCHBOARD_DB_CONNECTIONS", default_value_t = 10)]
    pub db_connections: u32,
}

impl DbArgs {
    /// Opens the store and applies migrations.
    async fn open(&self) -> Result<Store, String> {
        let env_key = std::env::var("SWITCHBOARD_MASTER_KEY").ok();
        let (key, created) = MasterKey::load_or_create(env_key.as_deref(), &self.key_file)
            .map_err(|e| e.to_string())?;
        if let Some(path) = created {
            eprintln!(
                "created a master key at {} (readable only by you): keep it, secrets cannot be read without it",
                path.display()
            );
        }
        let options = switchboard_store::StoreOptions {
            max_connections: self.db_connections,
            ..switchboard_store::StoreOptions::default()
        };
        let store = Store::connect_with(&self.database, key, options)
            .await
            .map_err(|e| e.to_string())?;
        store.migrate().await.map_err(|e| e.to_string())?;
        Ok(store)
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Address to listen on.
    #[arg(long, env = "SWITCHBOARD_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Also serve `/metrics` without a key on this address (for Prometheus on a private
    /// interface); on `--listen`, `/metrics` needs the admin key.
    #[arg(long, env = "SWITCHBOARD_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Connections `--listen` keeps open at once. Past it the connection idle the longest is
    /// closed to make room; when every one has a request in flight, a new one is answered `503`.
    /// Default: a quarter of the open-files limit (16 to 10,000), leaving the rest to the
    /// database, upstreams and phone calls.
    #[arg(long, env = "SWITCHBOARD_MAX_CONNECTIONS",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: Option<u64>,
    /// Connections `--metrics-listen` keeps open at once.
    #[arg(long, env = "SWITCHBOARD_METRICS_MAX_CONNECTIONS",
          default_value_t = ConnectionLimits::METRICS_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    metrics_max_connections: u64,
    /// Milliseconds a client has to send a request's line and headers, from the connection's
    /// accept or from the first byte of a later request; a slower one is closed.
    #[arg(long, env = "SWITCHBOARD_HEADER_READ_TIMEOUT_MS",
          default_value_t = millis(ConnectionLimits::default().header_read_timeout),
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    header_read_timeout_ms: u64,
    /// Milliseconds a keep-alive connection with no request in flight stays open. Behind a load
    /// balancer, keep it above the balancer's own idle timeout.
    #[arg(long, env = "SWITCHBOARD_IDLE_TIMEOUT_MS",
          default_value_t = millis(ConnectionLimits::default().idle_timeout),
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    idle_timeout_ms: u64,
    /// Milliseconds a request's body may take to arrive after its headers; a slower one is
    /// answered `408`.
    #[arg(long, env = "SWITCHBOARD_BODY_READ_TIMEOUT_MS",
          default_value_t = millis(ConnectionLimits::default().body_read_timeout),
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    body_read_timeout_ms: u64,
    /// Milliseconds a response may wait for a client that takes none of it; then the
    /// connection is closed.
    #[arg(long, env = "SWITCHBOARD_SEND_TIMEOUT_MS",
          default_value_t = millis(ConnectionLimits::default().send_timeout),
          value_parser = clap::value_parser!(u64).range(50..=3_600_000))]
    send_timeout_ms: u64,
    /// Create the `acme-corp` demo tenant (if missing) and print a key and curl commands.
    #[arg(long)]
    demo: bool,
    /// Let `api_call` reach loopback and private addresses (refused by default).
    #[arg(long, env = "SWITCHBOARD_ALLOW_PRIVATE_NETWORK")]
    allow_private_network: bool,
    /// Do not open connections ahead, at a call's start, to the origins its agent's tools name
    /// (by default a `HEAD /` to each, at most 8, so the first tool call pays no handshake).
    #[arg(long, env = "SWITCHBOARD_NO_WARM_UPSTREAMS")]
    no_warm_upstreams: bool,
    /// Turn the adaptive policy off: no filler at once for a tool known to be slow, no
    /// `"async": "when_slow"` background runs, no deadline from a tool's observed latency
    /// (each tool follows its own settings).
    #[arg(long, env = "SWITCHBOARD_NO_ADAPTIVE")]
    no_adaptive: bool,
    /// A `Host` the MCP endpoint (`/v1/agents/{name}/mcp`) accepts, as `name` or `name:port`
    /// (repeat, or separate with commas); default: localhost, 127.0.0.1 and ::1.
    #[arg(
        long = "mcp-allowed-host",
        env = "SWITCHBOARD_MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    mcp_allowed_hosts: Vec<String>,
    /// Serve MCP without sessions, so several nodes can serve it (each request is its own call
    /// unless it names one with `X-Switchboard-Call-Id`).
    #[arg(long, env = "SWITCHBOARD_MCP_STATELESS")]
    mcp_stateless: bool,
    /// Let tenants register stdio MCP servers (programs started on this machine).
    #[arg(long, env = "SWITCHBOARD_ALLOW_MCP_STDIO")]
    allow_mcp_stdio: bool,
    /// Most MCP sessions one tenant may have open on this node; a new one beyond it gets 429.
    #[arg(long, env = "SWITCHBOARD_MCP_MAX_SESSIONS", default_value_t = McpSettings::default().max_sessions_per_tenant)]
    mcp_max_sessions: usize,
    /// Milliseconds an MCP session lives without a message from its client; then it closes,
    /// with its streams and the call it started.
    #[arg(long, env = "SWITCHBOARD_MCP_SESSION_IDLE_MS",
          default_value_t = millis(McpSettings::default().session_idle),
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    mcp_session_idle_ms: u64,
    /// Milliseconds one of the MCP door's event streams stays open before it ends (a client
    /// opens another); keep it above the longest tool timeout (300 s at most).
    #[arg(long, env = "SWITCHBOARD_MCP_MAX_STREAM_MS",
          default_value_t = millis(McpSettings::default().max_stream),
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    mcp_max_stream_ms: u64,
    /// Milliseconds a session to a tenant's MCP server stays open with no request through it.
    #[arg(long, env = "SWITCHBOARD_MCP_CLIENT_IDLE_MS",
          default_value_t = millis(McpSettings::default().pool_session_idle),
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    mcp_client_idle_ms: u64,
    /// Milliseconds after which a session to a tenant's MCP server is retired (the next
    /// request opens another).
    #[arg(long, env = "SWITCHBOARD_MCP_CLIENT_MAX_AGE_MS",
          default_value_t = millis(McpSettings::default().pool_session_max_age),
          value_parser = clap::value_parser!(u64).range(1_000..=604_800_000))]
    mcp_client_max_age_ms: u64,
    /// Export traces over OTLP/HTTP (protobuf) to this collector base URL (`/v1/traces` is
    /// appended), e.g. http://127.0.0.1:4318. Overrides OTEL_EXPORTER_OTLP_ENDPOINT and
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; without either, traces are off.
    #[arg(long)]
    otlp_endpoint: Option<String>,
    /// Log format: `json` (one event per line) or `text`.
    #[arg(long, env = "SWITCHBOARD_LOG_FORMAT", default_value = "json")]
    log_format: String,
    /// OpenAI's API base for the Realtime door (accept, refer, hangup; the WebSocket base
    /// follows: https → wss). Point it at a simulator to run without OpenAI.
    #[arg(
        long,
        env = "SWITCHBOARD_OPENAI_API_BASE",
        default_value = "https://api.openai.com/v1"
    )]
    openai_api_base: String,
    /// Estimated bytes of compiled tools kept in memory; the least recently used are evicted
    /// past it and compiled again when next used.
    #[arg(long, env = "SWITCHBOARD_TOOL_CACHE_BYTES", default_value_t = switchboard_server::state::ToolCache::DEFAULT_MAX_BYTES)]
    tool_cache_bytes: u64,
    /// Invocation records a live call holds in memory and `GET /v1/calls/{id}` shows (the
    /// newest); the database keeps every record, so old function call ids are still answered once.
    #[arg(long, env = "SWITCHBOARD_MAX_RECORDS_PER_CALL", default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(1..))]
    max_records_per_call: u64,
    /// Bytes of an invocation record's arguments, of its output, and of its log messages;
    /// longer ones are kept as `{"truncated": true, "bytes": N, "preview": …}`.
    #[arg(long, env = "SWITCHBOARD_MAX_RECORD_FIELD_BYTES", default_value_t = 16 * 1024,
        value_parser = clap::value_parser!(u64).range(256..))]
    max_record_field_bytes: u64,
    /// How long a tool's commit is retried while the database fails, in milliseconds, before
    /// the tool is answered with an error and nothing of it is applied.
    #[arg(long, env = "SWITCHBOARD_COMMIT_RETRY_MS", default_value_t = 2000)]
    commit_retry_ms: u64,
    /// Finished runs this node keeps while the database does not take their commits (a
    /// failover), to store in each call's order once it answers; their callers are answered
    /// at once. Past it a run is still answered, and its record is lost.
    #[arg(
        long,
        env = "SWITCHBOARD_MAX_UNSAVED_OUTCOMES",
        default_value_t = 10_000
    )]
    max_unsaved_outcomes: usize,
    /// A JSON file of per-tool limits to change from their defaults, e.g.
    /// `{"max_json_depth": 32, "max_transform_output": 262144}` (docs/security.md lists them).
    #[arg(long, env = "SWITCHBOARD_LIMITS")]
    limits: Option<std::path::PathBuf>,
    /// How long this node's lease on its calls lasts without a heartbeat, in milliseconds
    /// (renewed every third of it). A node silent for longer is taken for dead: other nodes
    /// take its calls over (a Realtime call within about a quarter of this more).
    #[arg(long, env = "SWITCHBOARD_LEASE_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(300..=600_000))]
    lease_ms: u64,
    /// Requests per second one tenant's keys may make to the REST API (the HTTP door's
    /// invocations included); beyond, `429 rate_limited` with the seconds to wait.
    #[arg(long, env = "SWITCHBOARD_TENANT_REQUESTS_PER_SECOND", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    tenant_requests_per_second: u32,
    /// Live calls one tenant may have at once, counted across every node; beyond, a new call
    /// is refused (`429`, SIP `486` at the phone doors).
    #[arg(long, env = "SWITCHBOARD_MAX_CALLS_PER_TENANT", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_calls_per_tenant: u64,
    /// Seconds an HTTP-door call may go without a function call (or a cancel) before it is
    /// ended as `DELETE /v1/calls/{id}` ends it — also a dead node's call — giving its place
    /// among the tenant's live calls back; 0: never.
    #[arg(long, env = "SWITCHBOARD_CALL_IDLE_TIMEOUT_S",
          default_value_t = switchboard_server::state::CALL_IDLE_TIMEOUT.as_secs())]
    call_idle_timeout_s: u64,
    /// Emails one tenant's calls may send per minute, counted across every node.
    #[arg(long, env = "SWITCHBOARD_EMAILS_PER_TENANT_PER_MINUTE",
          default_value_t = switchboard_server::EMAILS_PER_TENANT_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    emails_per_tenant_per_minute: u32,
    /// The base URL other nodes of the deployment reach this one at, to pass on requests for
    /// the calls it owns (e.g. `http://10.0.0.7:8080`). By default the listen address, unless
    /// that is a wildcard (0.0.0.0, ::).
    #[arg(long, env = "SWITCHBOARD_ADVERTISE_URL")]
    advertise_url: Option<String>,
    #[command(flatten)]
    google: crate::google::GoogleArgs,
    /// Observations the `memory` toolkit keeps about one caller (max_observations_per_caller);
    /// past it, `remember` answers that memory is full until the caller's memory is deleted.
    #[arg(long, env = "SWITCHBOARD_MEMORY_MAX_OBSERVATIONS_PER_CALLER", default_value_t = 1_000,
          value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    memory_max_observations_per_caller: i64,
    /// Observations the `memory` toolkit keeps across all of a tenant's callers
    /// (max_observations_per_tenant).
    #[arg(long, env = "SWITCHBOARD_MEMORY_MAX_OBSERVATIONS_PER_TENANT", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(i64).range(1..=1_000_000_000))]
    memory_max_observations_per_tenant: i64,
}

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if format == "text" {
        builder.try_init()
    } else {
        builder.json().flatten_event(true).try_init()
    };
}

pub fn serve(args: &ServeArgs) -> Result<ExitCode, String> {
    init_logs(&args.log_format);
    if let Some(warning) = crate::open_files::raise() {
        tracing::warn!(name: "open_files_limit_low", advice = %warning, "open_files_limit_low");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let metrics = match switchboard_server::prometheus::install(
            switchboard_server::prometheus::UPKEEP_EVERY,
        ) {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!(name: "metrics_recorder_not_installed", error = %e, "metrics_recorder_not_installed");
                None
            }
        };
        let trace_settings = switchboard_server::traces::TraceSettings::read(
            |name| std::env::var(name).ok(),
            args.otlp_endpoint.as_deref(),
        )
        .map_err(|e| format!("traces: {e}"))?;
        let (trace_export, traces) = match &trace_settings {
            Some(settings) => {
                let (export, traces) = switchboard_server::traces::TraceExport::start(settings)
                    .map_err(|e| e.to_string())?;
                eprintln!(
                    "traces exported to {} as service {}",
                    settings.origin(),
                    settings.service_name
                );
                (Some(export), traces)
            }
            None => (None, switchboard_runtime::Traces::off()),
        };
        let store = args.db.open().await?;
        let http = HttpEffects::new(HttpConfig {
            allow_private_networks: args.allow_private_network,
            ..HttpConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let mut config = server_config(args)?;
        config.traces = traces;
        let state = AppState::new(
            store,
            Arc::new(Effects::http_only(Arc::new(http))),
            config,
            metrics,
        );
        if state
            .store
            .list_api_keys(None)
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .all(|k| k.revoked_at.is_some())
        {
            let (_, key) = state
                .store
                .create_api_key(None, "first admin key")
                .await
                .map_err(|e| e.to_string())?;
            eprintln!(
                "created the admin key (shown once; it manages tenants): {}",
                key.expose_secret()
            );
        }
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        if args.demo {
            let key = switchboard_server::demo::seed(&state)
                .await
                .map_err(|e| e.to_string())?;
            eprintln!(
                "{}",
                switchboard_server::demo::instructions(&format!("http://{addr}"), &key)
            );
        }
        let metrics_server = match args.metrics_listen {
            Some(at) => {
                let listener = tokio::net::TcpListener::bind(at)
                    .await
                    .map_err(|e| format!("cannot listen on {at} (--metrics-listen): {e}"))?;
                let addr = listener.local_addr().map_err(|e| e.to_string())?;
                eprintln!("metrics on http://{addr}/metrics (no key: keep this address private)");
                Some(tokio::spawn(switchboard_server::serve_metrics(
                    listener,
                    state.clone(),
                    std::future::pending(),
                )))
            }
            None => None,
        };
        eprintln!(
            "switchboard listening on http://{addr} (database {})",
            redact_url(&args.db.database)
        );
        let limits = state.config.connections;
        tracing::info!(name: "listener_limits", max_connections = limits.max_connections,
            header_read_timeout_ms = millis(limits.header_read_timeout),
            idle_timeout_ms = millis(limits.idle_timeout), "listener_limits");
        let served = switchboard_server::serve(listener, state, shutdown_signal()).await;
        if let Some(m) = metrics_server {
            m.abort();
        }
        if let Some(export) = trace_export {
            // Sends the last spans (bounded by the exporter's timeout), off the async threads.
            let _ = tokio::task::spawn_blocking(move || export.shutdown()).await;
        }
        served.map_err(|e| e.to_string())?;
        eprintln!("switchboard stopped");
        Ok(ExitCode::SUCCESS)
    })
}

fn server_config(args: &ServeArgs) -> Result<ServerConfig, String> {
    if let Some(url) = &args.advertise_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(format!(
            "--advertise-url `{url}`: give the base URL other nodes reach this one at, e.g. http://10.0.0.7:8080"
        ));
    }
    let defaults = McpSettings::default();
    let allowed_hosts: Vec<String> = args
        .mcp_allowed_hosts
        .iter()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .collect();
    let limits = match &args.limits {
        Some(path) => crate::limits::read(path)?,
        None => switchboard_core::Limits::default(),
    };
    Ok(ServerConfig {
        limits,
        mcp: McpSettings {
            allowed_hosts: if allowed_hosts.is_empty() {
                defaults.allowed_hosts
            } else {
                allowed_hosts
            },
            stateless: args.mcp_stateless,
            allow_stdio: args.allow_mcp_stdio,
            max_sessions_per_tenant: args.mcp_max_sessions,
            session_idle: std::time::Duration::from_millis(args.mcp_session_idle_ms),
            max_stream: std::time::Duration::from_millis(args.mcp_max_stream_ms),
            pool_session_idle: std::time::Duration::from_millis(args.mcp_client_idle_ms),
            pool_session_max_age: std::time::Duration::from_millis(args.mcp_client_max_age_ms),
        },
        openai: switchboard_realtime::Endpoints::from_api_base(&args.openai_api_base),
        tool_cache_bytes: args.tool_cache_bytes,
        records: switchboard_runtime::RecordLimits {
            max_records_per_call: usize::try_from(args.max_records_per_call).unwrap_or(usize::MAX),
            max_record_field_bytes: usize::try_from(args.max_record_field_bytes)
                .unwrap_or(usize::MAX),
        },
        commit_retry: std::time::Duration::from_millis(args.commit_retry_ms),
        outbox: switchboard_runtime::outbox::OutboxLimits {
            max_entries: args.max_unsaved_outcomes,
            ..switchboard_runtime::outbox::OutboxLimits::default()
        },
        lease: std::time::Duration::from_millis(args.lease_ms),
        tenant_rate_per_s: args.tenant_requests_per_second,
        max_calls_per_tenant: usize::try_from(args.max_calls_per_tenant).unwrap_or(usize::MAX),
        emails_per_tenant_per_minute: args.emails_per_tenant_per_minute,
        warm_upstreams: !args.no_warm_upstreams,
        adaptive: !args.no_adaptive,
        call_idle_timeout: (args.call_idle_timeout_s > 0)
            .then(|| std::time::Duration::from_secs(args.call_idle_timeout_s)),
        advertise_url: args.advertise_url.clone(),
        connections: connection_limits(args),
        metrics_max_connections: usize::try_from(args.metrics_max_connections)
            .unwrap_or(usize::MAX),
        google: args.google.settings(args.listen)?,
        memory: switchboard_store::MemoryLimits {
            max_observations_per_caller: args.memory_max_observations_per_caller,
            max_observations_per_tenant: args.memory_max_observations_per_tenant,
            ..switchboard_store::MemoryLimits::default()
        },
        ..ServerConfig::default()
    })
}

/// The listener's bounds: the flags, and a cap on connections made from the open-files limit
/// unless one is given (`serve` has raised the limit by then).
fn connection_limits(args: &ServeArgs) -> ConnectionLimits {
    let max_connections = match args.max_connections {
        Some(max) => usize::try_from(max).unwrap_or(usize::MAX),
        None => crate::open_files::current().map_or(
            ConnectionLimits::default().max_connections,
            ConnectionLimits::for_open_files,
        ),
    };
    let ms = std::time::Duration::from_millis;
    ConnectionLimits {
        max_connections,
        header_read_timeout: ms(args.header_read_timeout_ms),
        idle_timeout: ms(args.idle_timeout_ms),
        body_read_timeout: ms(args.body_read_timeout_ms),
        send_timeout: ms(args.send_timeout_ms),
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The database URL without its password.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    eprintln!("shutting down: no new requests; ending live calls");
}

pub fn migrate(db: &DbArgs) -> Result<ExitCode, String> {
    block_on(async {
        db.open().await?;
        eprintln!("database {} is migrated", redact_url(&db.database));
        Ok(ExitCode::SUCCESS)
    })
}

/// Tenant administration.
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant and print its first API key.
    Create {
        id: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// API key administration.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key for a tenant, or an admin key; print it (once).
    Create {
        #[arg(long, conflicts_with = "admin", required_unless_present = "admin")]
        tenant: Option<String>,
        #[arg(long)]
        admin: bool,
        #[arg(long, default_value = "cli")]
        label: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

pub fn tenant(cmd: &TenantCommand) -> Result<ExitCode, String> {
    let TenantCommand::Create { id, name, db } = cmd;
    block_on(async {
        let store = db.open().await?;
        let t = store
            .create_tenant(id, name.as_deref().unwrap_or(id), &serde_json::json!({}))
            .await
            .map_err(|e| e.to_string())?;
        let (_, key) = store
            .create_api_key(Some(&t.id), "first key")
            .await
            .map_err(|e| e.to_string())?;
        crate::say!(
            "tenant {} created; its API key (shown once): {}",
            t.id,
            key.expose_secret()
        );
        Ok(ExitCode::SUCCESS)
    })
}

pub fn key(cmd: &KeyCommand) -> Result<ExitCode, String> {
    let KeyCommand::Create {
        tenant,
        admin: _,
        label,
        db,
    } = cmd;
    block_on(async {
        let store = db.open().await?;
        let (_, key) = store
            .create_api_key(tenant.as_deref(), label)
            .await
            .map_err(|e| e.to_string())?;
        crate::say!("{}", key.expose_secret());
        Ok(ExitCode::SUCCESS)
    })
}

fn block_on<F: std::future::Future<Output = Result<ExitCode, String>>>(
    f: F,
) -> Result<ExitCode, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?
        .block_on(f)
}
