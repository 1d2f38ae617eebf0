//! What one connection is doing, and so which of its deadlines holds.
//!
//! A connection is in one of these states, each with its own bound:
//! - reading a request head (its first from the accept on, a later one from its first byte):
//!   the head must be whole within the header timeout;
//! - quiet (a response finished, nothing of the next request yet): closed after the idle
//!   timeout;
//! - busy (a request in flight, its response streaming included): no bound of the connection's
//!   own, as handlers bound their work and streams their length; its body is bounded by
//!   `body`'s deadline.
//!
//! In any state, a write that the client has not taken for the send timeout closes it.
//! HTTP/2 connections carry frames of their own between requests (pings, settings), so once one
//! has served a request only the idle timeout holds between requests.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::http::Version;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::ConnectionLimits;

/// Why a connection's watch closed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// A request head did not arrive whole within the header timeout.
    HeaderTimeout,
    /// No request came within the idle timeout.
    Idle,
    /// The client took nothing of a response within the send timeout.
    SendStalled,
}

impl Expiry {
    /// The metric label and log field.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Expiry::HeaderTimeout => "header_timeout",
            Expiry::Idle => "idle",
            Expiry::SendStalled => "send_stalled",
        }
    }
}

/// One connection's state, shared by its IO (bytes read, writes blocked), its service
/// (requests begun and ended), its watch and the roster (which picks the quiet longest).
/// Times are milliseconds since the roster's `base`; a stored `0` means "not now", so the
/// instants that may be absent are kept plus one.
#[derive(Debug)]
pub(crate) struct Activity {
    base: Instant,
    in_flight: AtomicUsize,
    /// The accept, or the end of the last response.
    quiet_since: AtomicU64,
    /// Plus one: the accept, or the first byte of a request after a quiet spell.
    heading_since: AtomicU64,
    /// Plus one: when a write found the client's window full and nothing has been taken since.
    stalled_since: AtomicU64,
    /// HTTP/2: bytes between requests are the protocol's own frames, not a request's head.
    multiplexed: AtomicBool,
    /// Told of each change of state, so the watch takes up the deadline that now holds.
    pub(crate) changed: Notify,
}

impl Activity {
    /// A connection accepted now: its first request head is due within the header timeout.
    pub(crate) fn new(base: Instant) -> Self {
        let now = since(base);
        Activity {
            base,
            in_flight: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(now),
            heading_since: AtomicU64::new(now + 1),
            stalled_since: AtomicU64::new(0),
            multiplexed: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    /// Whether no request is in flight and nothing of a response is left to send: closing the
    /// connection now loses nothing.
    pub(crate) fn is_quiet(&self) -> bool {
        self.idle_between_requests() && self.stalled_since.load(Ordering::Acquire) == 0
    }

    fn idle_between_requests(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Since when (milliseconds since the roster's base) it has had no request in flight.
    pub(crate) fn quiet_since(&self) -> u64 {
        self.quiet_since.load(Ordering::Acquire)
    }

    /// The next deadline and what passing it means; `None` while a request is in flight and
    /// the client takes what is sent.
    pub(crate) fn due(&self, limits: &ConnectionLimits) -> Option<(Instant, Expiry)> {
        let stalled = self.stalled_since.load(Ordering::Acquire);
        let send = (stalled != 0).then(|| {
            (
                self.at(stalled - 1) + limits.send_timeout,
                Expiry::SendStalled,
            )
        });
        let quiet = self.idle_between_requests().then(|| {
            let heading = self.heading_since.load(Ordering::Acquire);
            if heading != 0 && !self.multiplexed.load(Ordering::Acquire) {
                (
                    self.at(heading - 1) + limits.header_read_timeout,
                    Expiry::HeaderTimeout,
                )
            } else {
                (
                    self.at(self.quiet_since()) + limits.idle_timeout,
                    Expiry::Idle,
                )
            }
        });
        match (send, quiet) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// What has expired by `now`, if anything.
    pub(crate) fn expired(&self, limits: &ConnectionLimits, now: Instant) -> Option<Expiry> {
        self.due(limits)
            .filter(|(at, _)| *at <= now)
            .map(|(_, why)| why)
    }

    fn at(&self, millis: u64) -> Instant {
        self.base + std::time::Duration::from_millis(millis)
    }

    fn now(&self) -> u64 {
        since(self.base)
    }

    fn request_began(&self, version: Version) {
        if version == Version::HTTP_2 {
            self.multiplexed.store(true, Ordering::Release);
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.heading_since.store(0, Ordering::Release);
        self.changed.notify_one();
    }

    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.quiet_since.store(self.now(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    /// Bytes arrived: on a quiet connection, the head of a request has begun.
    fn read_some(&self) {
        if self.idle_between_requests()
            && self.heading_since.load(Ordering::Acquire) == 0
            && self
                .heading_since
                .compare_exchange(0, self.now() + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.changed.notify_one();
        }
    }

    /// A write found the client's window full (`blocked`), or went through.
    fn wrote(&self, blocked: bool) {
        let stalled = self.stalled_since.load(Ordering::Acquire);
        if blocked && stalled == 0 {
            self.stalled_since.store(self.now() + 1, Ordering::Release);
            self.changed.notify_one();
        } else if !blocked && stalled != 0 {
            self.stalled_since.store(0, Ordering::Release);
        }
    }
}

fn since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
}

/// A request in flight on a connection, from its head to the end (or drop) of its response.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(crate) fn begin(activity: &Arc<Activity>, version: Version) -> Self {
        activity.request_began(version);
        InFlight(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// The connection's socket, telling its [`Activity`] of bytes read and of writes the client
/// does not take.
#[derive(Debug)]
pub(crate) struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    pub(crate) fn new(stream: TcpStream, activity: Arc<Activity>) -> Self {
        Watched { stream, activity }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        self.activity.wrote(polled.is_pending());
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, data);
        self.activity.wrote(polled.is_pending());
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 4,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            body_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_state_has_its_deadline() {
        let base = Instant::now();
        let a = Arc::new(Activity::new(base));
        // Accepted: the first head is due within the header timeout, whatever arrives.
        assert_eq!(
            a.due(&limits()),
            Some((base + Duration::from_secs(10), Expiry::HeaderTimeout))
        );
        a.read_some();
        assert_eq!(a.due(&limits()).unwrap().1, Expiry::HeaderTimeout);
        // A request in flight: no deadline of the connection's own.
        let request = InFlight::begin(&a, Version::HTTP_11);
        assert_eq!(a.due(&limits()), None);
        // ... unless the client stops taking the response.
        tokio::time::advance(Duration::from_secs(1)).await;
        a.wrote(true);
        let stalled = base + Duration::from_secs(31);
        assert_eq!(a.due(&limits()), Some((stalled, Expiry::SendStalled)));
        a.wrote(false);
        assert_eq!(a.due(&limits()), None);
        // Quiet after its response: the idle timeout, until the next head begins.
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(request);
        assert!(a.is_quiet());
        let quiet = base + Duration::from_secs(2);
        assert_eq!(
            a.due(&limits()),
            Some((quiet + Duration::from_secs(75), Expiry::Idle))
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        a.read_some();
        assert_eq!(
            a.due(&limits()),
            Some((base + Duration::from_secs(7 + 10), Expiry::HeaderTimeout))
        );
        assert_eq!(
            a.expired(&limits(), base + Duration::from_secs(17)),
            Some(Expiry::HeaderTimeout)
        );
        assert_eq!(a.expired(&limits(), base + Duration::from_secs(16)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_http2_connection_between_requests_is_only_idle() {
        let base = Instant::now();
        let a = Arc::new(Activity::new(base));
        drop(InFlight::begin(&a, Version::HTTP_2));
        a.read_some();
        assert_eq!(
            a.due(&limits()),
            Some((base + Duration::from_secs(75), Expiry::Idle))
        );
    }
}
