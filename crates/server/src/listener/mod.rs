//! The API's and the metrics' listeners: connections accepted within a cap, each served by
//! hyper (HTTP/1.1, or HTTP/2 with prior knowledge) and closed when it stops doing anything
//! useful, so slow or idle clients cannot hold a node's descriptors.
//!
//! # Layout
//! - [`ConnectionLimits`]: the bounds (`serve`'s `--max-connections`, `--header-read-timeout-ms`,
//!   `--idle-timeout-ms`, `--body-read-timeout-ms`, `--send-timeout-ms`).
//! - `roster`: the open connections; at the cap the one quiet the longest (no request in
//!   flight) is closed to make room, and only when every connection is busy is a new one refused.
//! - `activity`: what one connection is doing, and so which deadline holds for it: its first
//!   request head within the header timeout, its next one within the idle timeout (then the
//!   head within the header timeout), its responses taken by the client within the send timeout.
//! - `connection`: one connection's task: hyper's connection and that watch, side by side.
//! - `body`: a request body that must arrive within the body timeout (else `408`).
//! - `refusal`: the `503` a connection gets when every place is busy.
//!
//! Shutdown is graceful: [`serve`] stops accepting, connections with no request in flight close
//! at once, the others finish their request first, and it returns when the last one is closed.

mod activity;
mod body;
mod connection;
mod refusal;
mod roster;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use body::BodyReadTimedOut;

/// How long connections may take and how many may be open at once on one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once. Past it the connection quiet the longest is closed to make
    /// room; when none is quiet, a new connection is answered `503` and closed.
    pub max_connections: usize,
    /// From a connection's accept, or from the first byte of a later request, to the end of the
    /// request's head (request line and headers).
    pub header_read_timeout: Duration,
    /// How long a connection with no request in flight is kept open after its last response.
    pub idle_timeout: Duration,
    /// From a request's head to the end of its body: a body trickled slower is answered `408`.
    pub body_read_timeout: Duration,
    /// How long a response may wait for the client to take any of it (a client that stops
    /// reading); a stream that is sending is never cut by it.
    pub send_timeout: Duration,
}

impl ConnectionLimits {
    /// The fewest connections [`ConnectionLimits::for_open_files`] allows.
    pub const MIN_CONNECTIONS: usize = 16;
    /// The most connections [`ConnectionLimits::for_open_files`] allows.
    pub const MAX_CONNECTIONS: usize = 10_000;
    /// Connections the metrics listener takes at once (a few Prometheus servers scrape it).
    pub const METRICS_CONNECTIONS: usize = 16;

    /// The default cap under an open-files limit of `limit`: a quarter of it, so open
    /// connections leave the other three quarters to the database pool, upstream requests and
    /// the phone calls' WebSockets; between 16 and 10,000.
    pub fn for_open_files(limit: u64) -> usize {
        usize::try_from(limit / 4)
            .unwrap_or(usize::MAX)
            .clamp(Self::MIN_CONNECTIONS, Self::MAX_CONNECTIONS)
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1_024,
            header_read_timeout: Duration::from_secs(10),
            // Above the idle timeouts of common load balancers (AWS's 60 s), so the balancer,
            // not the node, closes a quiet connection and never sends on one being closed.
            idle_timeout: Duration::from_secs(75),
            body_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes; then stops
/// accepting, lets the requests in flight finish, and returns once every connection is closed.
/// `name` labels the listener's metrics (`api`, `metrics`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    name: &'static str,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let roster = roster::Roster::new(limits.max_connections, name);
    let http = Arc::new(http());
    let stopping = CancellationToken::new();
    let connections = TaskTracker::new();
    let refusals = refusal::Refusals::new(limits.max_connections, name);
    let mut failures = AcceptFailures::default();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    failures.after(&e, name).await;
                    continue;
                }
            },
        };
        match roster.admit() {
            Some(seat) => {
                let task = connection::Connection {
                    seat,
                    router: router.clone(),
                    limits,
                    http: Arc::clone(&http),
                    stopping: stopping.clone(),
                };
                connections.spawn(task.run(stream));
            }
            None => refusals.refuse(stream),
        }
    }
    drop(listener);
    stopping.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// hyper's settings: its own header timeout is left off, as it starts when a connection goes
/// idle (hyper 1.x) and would cut keep-alive connections at the header timeout; the
/// connection's watch bounds both (see `activity`).
fn http() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder.http2().timer(TokioTimer::new());
    builder
}

/// What to do when `accept` fails. A connection reset before it was accepted is nothing; any
/// other failure (out of descriptors: `EMFILE`) is waited out briefly and logged at most once a
/// minute, so a node at its descriptor limit neither spins nor floods its log.
#[derive(Debug, Default)]
struct AcceptFailures {
    last_logged: Option<tokio::time::Instant>,
}

impl AcceptFailures {
    async fn after(&mut self, e: &std::io::Error, name: &'static str) {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
        if matches!(
            e.kind(),
            ConnectionAborted | ConnectionRefused | ConnectionReset
        ) {
            return;
        }
        let now = tokio::time::Instant::now();
        if self
            .last_logged
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60))
        {
            self.last_logged = Some(now);
            tracing::warn!(name: "listener_accept_failed", listener = name, error = %e, "listener_accept_failed");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
