//! Switchboard's persistence: tenants, API keys, versioned tools, agents, sealed secrets and
//! calls (with the runtime's call journal), on SQLite (the default) or PostgreSQL.
//!
//! # Layout
//! - [`Store`] is one type over both databases; each query is written once (both drivers take
//!   `$1` placeholders) and runs on whichever pool the store holds.
//! - [`crypto`]: the [`MasterKey`] and AES-256-GCM [`seal`]/[`open`] for values at rest.
//! - Each resource has its own module: [`tenants`], [`keys`], [`tools`], [`agents`],
//!   [`secrets`], [`mcp_servers`], [`calls`] (whose [`TenantJournal`] is the runtime's
//!   [`switchboard_runtime::CallJournal`] for one tenant's calls), [`replays`] (a tool's
//!   recorded invocations read back for replay), [`connections`] (toolkits' OAuth2 connections:
//!   connect flows bound to the browser that started them, sealed tokens, the refresh lease),
//!   [`console_sessions`] (the console's sign-ins, checked on every console request), [`memory`] (what agents remember about
//!   each caller, with ranked full-text search; its [`MemoryHandler`] performs `memory.*` effects),
//!   [`email_rate`] (the per-tenant email send rate, shared by every node on the database),
//!   [`slot_holds`] (short-lived holds on calendar slots, so no two bookings of one time reach a
//!   calendar).
//!   [`alerts`] (alert rules, their transitions and notifications, breaker signals).
//!
//! Every query is scoped by tenant: another tenant's rows are simply not found. Every change
//! of more than one row runs in one transaction.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod agents;
pub mod alerts;
pub mod call_search;
pub mod calls;
pub mod connections;
pub mod console_sessions;
pub mod crypto;
pub mod email_rate;
mod error;
mod group_commit;
mod journal;
pub mod keys;
pub mod mcp_servers;
pub mod memory;
pub mod ownership;
mod page;
pub mod replays;
pub mod secrets;
pub mod slot_holds;
pub mod tenants;
pub mod timelines;
mod tokens;
pub mod tool_latency;
pub mod tools;
mod webhooks;
mod write_tx;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Postgres, Sqlite, Transaction};

pub use agents::{Agent, AgentDef, AgentTool, AgentToolDef, AgentToolSecret, LiveSettings};
pub use alerts::{AlertEvent, AlertRule, ChannelDelivery, DeliveryEnd, DueDelivery, WindowFigures};
pub use call_search::{
    CallPage, CallSearch, CallSummary, CallsAt, MAX_SEARCH_KEY, StatusFilter, TimeBound,
};
pub use calls::{CallCursor, CallRow, CallStatus};
pub use connections::{
    Connection, ConnectionInfo, OAuthFlow, OAuthTake, OAuthTokens, PendingConnect,
};
pub use console_sessions::MAX_CONSOLE_SESSIONS_PER_KEY;
pub use crypto::{MasterKey, open, open_with, seal, seal_with};
pub use email_rate::EmailAdmission;
pub use error::StoreError;
pub use journal::TenantJournal;
pub use keys::{ApiKey, Principal};
pub use mcp_servers::{McpServer, McpServerConfig};
pub use memory::{CallerMemory, MemoryHandler, MemoryLimits, Observation, Relation};
pub use ownership::{CallOwner, Door, MAX_NODES_LISTED, NodeCalls, NodeInfo};
pub use page::{Page, Paged};
pub use replays::CallRecord;
pub use secrets::SecretInfo;
pub use slot_holds::{SlotHold, SlotHoldRequest};
pub use tenants::Tenant;
pub use timelines::{RecordPage, RecordsAt};
pub use tools::{MAX_NOTE_CHARS, Publish, ToolVersion};

/// Which database a [`Store`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A SQLite file (WAL, foreign keys on, busy timeout).
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

/// Tuning for [`Store::connect_with`]; the defaults suit one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// The most connections the pool opens.
    pub max_connections: u32,
    /// How long to wait for a free connection (and, on SQLite, for the write lock).
    pub acquire_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

/// The database behind Switchboard: cheap to clone (the pool and key are shared).
#[derive(Clone)]
pub struct Store {
    pub(crate) db: Db,
    pub(crate) key: Arc<MasterKey>,
    /// Queues this process's SQLite writers (see `write_tx`).
    pub(crate) gate: Arc<write_tx::WriteGate>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to whichever pool the store holds. The body is written once
/// and compiled once per backend, so every query in it must be portable SQL.
macro_rules! with_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.db {
            $crate::Db::Sqlite($pool) => $body,
            $crate::Db::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// Opens write transactions the way each backend needs them.
pub(crate) trait WritePool {
    /// The database of the pool.
    type Db: sqlx::Database;
    /// Begins a transaction that will write; call [`Store::begin_write`] instead, which queues
    /// this process's SQLite writers first. SQLite takes the write lock at once
    /// (`BEGIN IMMEDIATE`): a deferred transaction that reads and then writes can fail with
    /// `SQLITE_BUSY` without waiting when another connection committed in between.
    fn begin_write_raw(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;
    /// Begins a read-only transaction that sees one snapshot across its statements.
    fn begin_read(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;
    /// Which backend the pool is, for the few statements that differ (row locks).
    fn kind(&self) -> Backend;
}

impl WritePool for SqlitePool {
    type Db = Sqlite;
    fn begin_write_raw(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Sqlite>, sqlx::Error>> + Send {
        self.begin_with("BEGIN IMMEDIATE")
    }
    fn begin_read(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Sqlite>, sqlx::Error>> + Send {
        // In WAL mode a deferred transaction reads one snapshot and never blocks writers.
        self.begin()
    }
    fn kind(&self) -> Backend {
        Backend::Sqlite
    }
}

impl WritePool for PgPool {
    type Db = Postgres;
    fn begin_write_raw(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Postgres>, sqlx::Error>> + Send {
        let pool = self.clone();
        begin_to_the_end(async move { pool.begin().await })
    }
    fn begin_read(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Postgres>, sqlx::Error>> + Send {
        // READ COMMITTED would give each statement its own snapshot.
        let pool = self.clone();
        begin_to_the_end(async move {
            pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await
        })
    }
    fn kind(&self) -> Backend {
        Backend::Postgres
    }
}

/// Runs a PostgreSQL `BEGIN` to its end on a task of its own, so that a caller dropped
/// meanwhile (a request whose client went away) cannot strand it. sqlx counts a transaction only
/// once the server has answered its `BEGIN`; a `begin` future dropped between the two left the
/// server inside a transaction that sqlx did not know of, and the pooled connection, back in the
/// pool, then failed every statement of every later user (`current transaction is aborted`).
/// Finished here, the transaction is dropped whole when nobody waits for it: rolled back.
async fn begin_to_the_end(
    begin: impl Future<Output = Result<Transaction<'static, Postgres>, sqlx::Error>> + Send + 'static,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    tokio::spawn(begin)
        .await
        .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))?
}

impl Store {
    /// Connects to `url`: PostgreSQL when it starts with `postgres://` or `postgresql://`,
    /// otherwise SQLite (a `sqlite:` URL or a plain file path; the file is created if missing).
    pub async fn connect(url: &str, key: MasterKey) -> Result<Store, StoreError> {
        Store::connect_with(url, key, StoreOptions::default()).await
    }

    /// [`Store::connect`] with explicit pool options.
    pub async fn connect_with(
        url: &str,
        key: MasterKey,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        if options.max_connections == 0 {
            return Err(StoreError::Invalid(
                "max_connections must be at least 1".to_owned(),
            ));
        }
        let db = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let opts = PgConnectOptions::from_str(url).map_err(|e| {
                StoreError::Invalid(format!(
                    "the PostgreSQL URL is not valid ({}); write it as postgres://user:password@host:5432/database",
                    redact_url_error(&e)
                ))
            })?;
            let pool = PgPoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.acquire_timeout)
                .connect_with(opts.clone())
                .await
                .map_err(StoreError::Database)?;
            (Db::Postgres(pool), write_tx::Writer::Postgres(opts))
        } else {
            let opts = if url.starts_with("sqlite:") {
                SqliteConnectOptions::from_str(url).map_err(|e| {
                    StoreError::Invalid(format!(
                        "the SQLite URL is not valid ({e}); write it as sqlite://path/to/switchboard.db or give a file path"
                    ))
                })?
            } else {
                SqliteConnectOptions::new().filename(url)
            };
            let opts = opts
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // NORMAL in WAL mode: a commit survives a crashed or killed process (the WAL is
                // written before the commit returns); only an OS crash or power loss can drop the
                // last commits. FULL adds an fsync per commit, which held every tool answer of a
                // busy node behind the disk. Deployments that need more use PostgreSQL.
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(options.acquire_timeout);
            let in_memory = opts.get_filename() == std::path::Path::new(":memory:");
            let pool = SqlitePoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.acquire_timeout)
                .connect_with(opts.clone())
                .await
                .map_err(StoreError::Database)?;
            let writer = if in_memory {
                write_tx::Writer::None
            } else {
                write_tx::Writer::SqliteFile(opts)
            };
            (Db::Sqlite(pool), writer)
        };
        let (db, writer) = db;
        let gate = write_tx::WriteGate::new(options.acquire_timeout, writer).map_err(|e| {
            StoreError::Invalid(format!("cannot start the journal's writer thread: {e}"))
        })?;
        Ok(Store {
            db,
            key: Arc::new(key),
            gate: Arc::new(gate),
        })
    }

    /// Applies the embedded migrations that have not run yet; running it again is a no-op.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.db {
            Db::Sqlite(pool) => sqlx::migrate!("migrations/sqlite").run(pool).await,
            Db::Postgres(pool) => sqlx::migrate!("migrations/postgres").run(pool).await,
        }
        .map_err(StoreError::Migrate)?;
        // Contexts stored before they were sealed: sealing needs the master key, not SQL.
        let sealed = self.seal_call_contexts().await?;
        if sealed > 0 {
            tracing::info!(name: "call_contexts_sealed", calls = sealed, "call_contexts_sealed");
        }
        // Calls stored before they kept their user id (migration 0020): it is in the context.
        let indexed = self.index_call_users().await?;
        if indexed > 0 {
            tracing::info!(name: "call_users_indexed", calls = indexed, "call_users_indexed");
        }
        Ok(())
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        with_pool!(self, |pool| {
            sqlx::query("SELECT 1").execute(pool).await?;
        });
        Ok(())
    }

    /// Which database this store runs on.
    pub fn backend(&self) -> Backend {
        match &self.db {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// Closes every pooled connection, waiting for those in use to be returned.
    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite(pool) => pool.close().await,
            Db::Postgres(pool) => pool.close().await,
        }
    }

    pub(crate) fn master_key(&self) -> &MasterKey {
        &self.key
    }
}

/// URL parse errors may echo the URL, and with it a password: keep only the error's kind.
fn redact_url_error(e: &sqlx::Error) -> &'static str {
    match e {
        sqlx::Error::Configuration(_) => "bad configuration",
        _ => "unreadable",
    }
}

/// The current time as RFC 3339 UTC with milliseconds: fixed width, so it sorts as text.
pub(crate) fn now() -> String {
    switchboard_runtime::now_rfc3339()
}

/// Names of tools, agents and handoff targets, as models accept them.
pub(crate) fn check_name(kind: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(StoreError::Invalid(format!(
            "{kind} name `{}` must be 1-64 letters, digits, `_` or `-`",
            truncate(name, 80)
        )));
    }
    Ok(())
}

/// Cuts user input echoed in an error message to a readable length.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// Parses JSON read back from a column; a failure means the row was altered outside Switchboard.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    what: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Serialises a value for a TEXT column.
pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Invalid(format!("cannot serialise as JSON: {e}")))
}
