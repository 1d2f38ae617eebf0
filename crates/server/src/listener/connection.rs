//! One connection's task: hyper serves it while a watch closes it when the deadline its
//! [`Activity`] names passes, when another connection takes its place, or when the listener
//! stops.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::ConnectionLimits;
use super::activity::{Activity, InFlight, Watched};
use super::body::{ReadDeadline, Tracked};
use super::roster::Seat;

/// What one connection's task needs.
pub(crate) struct Connection {
    pub(crate) seat: Seat,
    pub(crate) router: Router,
    pub(crate) limits: ConnectionLimits,
    pub(crate) http: Arc<auto::Builder<TokioExecutor>>,
    /// Cancelled when the listener stops accepting.
    pub(crate) stopping: CancellationToken,
}

impl Connection {
    /// Serves `stream` until the client closes it, a deadline passes, it is evicted, or the
    /// listener stops (then a request in flight is finished first).
    pub(crate) async fn run(self, stream: TcpStream) {
        let Connection {
            seat,
            router,
            limits,
            http,
            stopping,
        } = self;
        let activity = Arc::clone(&seat.activity);
        let io = TokioIo::new(Watched::new(stream, Arc::clone(&activity)));
        let service = Service {
            router,
            activity: Arc::clone(&activity),
            body_read_timeout: limits.body_read_timeout,
        };
        let conn = http.serve_connection(io, service);
        tokio::pin!(conn);
        let mut draining = false;
        let closed = loop {
            let due = activity.due(&limits).map(|(at, _)| at);
            tokio::select! {
                _ = conn.as_mut() => break None,
                () = activity.changed.notified() => {}
                () = sleep_until(due) => {
                    if let Some(why) = activity.expired(&limits, tokio::time::Instant::now()) {
                        break Some(why.label());
                    }
                }
                () = seat.evicted.cancelled(), if !draining => {
                    if activity.is_quiet() {
                        break Some("evicted");
                    }
                    // A request began since it was picked: finish it, then close.
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = stopping.cancelled(), if !draining => {
                    if activity.is_quiet() {
                        break None;
                    }
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        };
        if let Some(reason) = closed {
            tracing::debug!(name: "connection_closed", listener = seat.listener(), reason, "connection_closed");
            metrics::counter!("switchboard_connections_closed_total", "listener" => seat.listener(), "reason" => reason)
                .increment(1);
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The router as hyper's service on one connection: each request is in flight (for the
/// connection's watch) from its head to the end of its response, and its body has until the
/// body timeout to arrive.
#[derive(Clone)]
struct Service {
    router: Router,
    activity: Arc<Activity>,
    body_read_timeout: Duration,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        let in_flight = InFlight::begin(&self.activity, request.version());
        let timeout = self.body_read_timeout;
        let request = request.map(|body| Body::new(ReadDeadline::new(body, timeout)));
        let router = self.router.clone();
        Box::pin(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok(response.map(|body| Tracked::new(body, in_flight)))
        })
    }
}
