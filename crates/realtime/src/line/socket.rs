//! A call's socket to OpenAI: attaching (again) with backoff, the outbox of events not yet
//! written, which survives a re-attach, and the socket's liveness: pinged while quiet, and taken
//! for dead when nothing comes back.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use secrecy::{ExposeSecret, SecretString};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::api::{Api, jitter};

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Logs one event under the name each API's lines use (`realtime_socket_…` for Realtime's call
/// WebSocket, `live_sideband_…` for GPT-Live's sideband): dashboards read those names.
macro_rules! log_by_api {
    ($api:expr, $level:ident, $realtime:literal, $live:literal $(, $($field:tt)*)?) => {
        match $api {
            $crate::api::Api::Realtime => tracing::$level!(name: $realtime, $($($field)*,)? $realtime),
            $crate::api::Api::Live => tracing::$level!(name: $live, $($($field)*,)? $live),
        }
    };
}
pub(crate) use log_by_api;

/// Events are a few KiB at most: the library's 128 KiB default buffers, per call, would make a
/// thousand calls cost a quarter of a gigabyte. Larger frames still arrive (buffers grow).
pub(crate) fn socket_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
}

/// Connects (again) to `url`, with backoff while failures look transient. `None` when the call
/// is gone (OpenAI refuses the socket) or could not be reached for `reattach_for`.
pub(crate) async fn attach(
    api: Api,
    url: &str,
    key: &SecretString,
    reattach_for: Duration,
) -> Option<Socket> {
    let until = Instant::now() + reattach_for;
    let mut delay = Duration::from_millis(100);
    loop {
        let mut req = match url.into_client_request() {
            Ok(r) => r,
            Err(e) => {
                log_by_api!(api, error, "realtime_socket_url_invalid", "live_sideband_url_invalid", error = %e);
                return None;
            }
        };
        if let Ok(v) = format!("Bearer {}", key.expose_secret()).parse() {
            req.headers_mut().insert("authorization", v);
        }
        // Events are small frames: Nagle's algorithm would hold many of them back.
        match tokio_tungstenite::connect_async_with_config(req, Some(socket_config()), true).await {
            Ok((socket, _)) => {
                log_by_api!(
                    api,
                    info,
                    "realtime_socket_attached",
                    "live_sideband_attached"
                );
                return Some(socket);
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                if resp.status().is_client_error() && resp.status().as_u16() != 429 =>
            {
                log_by_api!(
                    api,
                    info,
                    "realtime_call_gone",
                    "live_session_gone",
                    status = resp.status().as_u16()
                );
                return None;
            }
            Err(e) => {
                if Instant::now() >= until {
                    log_by_api!(api, error, "realtime_socket_lost", "live_sideband_lost", error = %e);
                    return None;
                }
                log_by_api!(api, warn, "realtime_socket_retry", "live_sideband_retry", error = %e);
                tokio::time::sleep(jitter(delay)).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Events not yet written to the socket, in order; what a failed write left is kept for the
/// next socket.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queue: VecDeque<String>,
}

impl Outbox {
    pub(crate) fn push(&mut self, text: String) {
        self.queue.push_back(text);
    }

    /// Writes every queued event; `Err` when the socket failed (the unwritten ones stay).
    pub(crate) async fn flush(&mut self, socket: &mut Socket) -> Result<(), ()> {
        if self.queue.is_empty() {
            return Ok(());
        }
        while let Some(text) = self.queue.front() {
            if socket.feed(Message::text(text.clone())).await.is_err() {
                return Err(());
            }
            self.queue.pop_front();
        }
        socket.flush().await.map_err(|_| ())
    }
}

/// Whether OpenAI is still at the other end. A quiet caller makes a quiet socket, and a peer
/// that vanished without closing it (a network partition, a dead host) looks the same; so the
/// socket is pinged every [`DriverOptions::ping_every`], a WebSocket peer answers a ping with a
/// pong (RFC 6455, 5.5.2), and a socket from which nothing at all has come for
/// [`DriverOptions::silent_for`] is taken for dead.
///
/// [`DriverOptions::ping_every`]: super::DriverOptions::ping_every
/// [`DriverOptions::silent_for`]: super::DriverOptions::silent_for
#[derive(Debug)]
pub(crate) struct Liveness {
    heard: Instant,
    silent_for: Duration,
    pings: tokio::time::Interval,
}

/// What the socket's liveness asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Beat {
    /// Send a ping.
    Ping,
    /// Nothing came for too long: the socket is dead.
    Silent,
}

impl Liveness {
    pub(crate) fn new(ping_every: Duration, silent_for: Duration) -> Self {
        let every = ping_every.max(Duration::from_millis(10));
        let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Liveness {
            heard: Instant::now(),
            silent_for,
            pings,
        }
    }

    /// A frame came from OpenAI (or a new socket was attached).
    pub(crate) fn heard(&mut self) {
        self.heard = Instant::now();
    }

    /// Waits for the next ping time.
    pub(crate) async fn beat(&mut self) -> Beat {
        self.pings.tick().await;
        if self.heard.elapsed() >= self.silent_for {
            Beat::Silent
        } else {
            Beat::Ping
        }
    }
}

/// Pings the socket; `false` when it cannot be written.
pub(crate) async fn ping(socket: &mut Socket) -> bool {
    socket.send(Message::Ping(Default::default())).await.is_ok()
}
