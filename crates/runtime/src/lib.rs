//! Switchboard's runtime: the imperative shell around the pure core.
//!
//! # Layout
//! - [`session`]: a [`CallSession`] is one task per call that owns its context: it deduplicates
//!   function calls, runs tools concurrently, applies the interruption policy, commits writes,
//!   and sends exactly one answer per function call to an [`OutputSink`].
//! - [`executor`]: runs one invocation of one tool to its end: resolves the tool, drives the
//!   core's step machine, performs effects, enforces the deadline. It never fails outward.
//! - [`effects`]: where effect requests go: [`http`] for `api_call`, and the traits later doors
//!   fill in (call control for REFER and hangup, MCP calls).
//! - [`mcp`]: MCP servers as tool sources: a per-tenant pool of client sessions that lists
//!   their tools and performs `mcp.call` ([`mcp::McpClients`]).
//! - [`commit`]: a tool's changes land on the context all together or not at all.
//! - [`journal`]: what a call records so it survives a restart ([`CallJournal`]);
//!   [`outbox`]: finished runs the database did not take in time, kept on the node and stored
//!   in each call's order once it answers.
//! - [`invocation`]: the function call, its delivery, and its record; [`records`]: how much a
//!   call keeps of its records.
//! - [`adaptive`]: each tool's observed latency and the policy built on it (fillers at once for
//!   slow tools, background runs, deadlines from what a tool needs).
//! - [`read_cache`]: a call's kept outcomes of `read` tools' effects (`cache_ttl_s`).
//! - [`redact`]: keeps secrets and tokens out of outputs, records and logs.
//! - [`traces`]: OpenTelemetry spans of calls, invocations and effects, and the W3C trace
//!   context read from doors and sent upstream (made only when a tracer is given).
//! - [`replay`]: a recorded invocation run again against a draft of its tool, with the recorded
//!   effect outcomes, performing nothing.
//!
//! This crate knows no HTTP server and no database: doors and stores plug in through traits.
#![forbid(unsafe_code)]

pub mod adaptive;
pub(crate) mod bookkeeping;
pub mod breaker;
pub mod commit;
pub mod effects;
pub mod executor;
pub mod http;
pub mod invocation;
pub mod journal;
pub mod mcp;
pub mod outbox;
pub mod read_cache;
pub mod records;
pub mod redact;
pub mod replay;
pub mod session;
pub mod traces;

pub use effects::{CallControl, Effects, McpCalls};
pub use executor::{CallConfig, Executor, ToolEntry};
pub use invocation::{Delivery, Invocation, InvocationRecord, OutputSink};
pub use journal::{CallJournal, MemoryJournal};
pub use records::RecordLimits;
pub use session::{
    CallSession, Lookup, SessionDeps, SessionOptions, SessionSizes, SessionSnapshot,
};
pub use traces::{TraceParent, Traces};

/// A boxed future, for traits whose implementations are chosen at run time.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The current time as RFC 3339 with milliseconds, e.g. `2026-11-23T10:00:05.123Z`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
