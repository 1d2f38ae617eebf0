//! A protocol-faithful simulator of OpenAI's Realtime-over-SIP API and of GPT-Live over SIP
//! ([`LiveSim`], served on the same address), for integration tests and the load generator.
//!
//! It plays OpenAI's side of a call: it sends signed `realtime.call.incoming` webhooks, serves
//! the call control REST endpoints (`accept`, `reject`, `refer`, `hangup`) and the call's
//! WebSocket, and lets a test script the model (`ModelHandle`) while it checks every client
//! request and event against the shapes in `openai-realtime-sip.md`, recording what does not
//! conform as a [`Violation`].
//!
//! # Layout
//!
//! - `simulator`: [`Simulator`], the public entry point (start, inspect, inject failures).
//! - `state`: what the simulated API remembers per call, and the response bookkeeping shared by
//!   the model handle and the WebSocket task.
//! - `rest`: the call control endpoints.
//! - `ws`: the WebSocket upgrade and the per-connection task.
//! - `client_events`: one small function per client event type, checking and applying it.
//! - `validate`: pure shape checks for session configurations, tools and responses.
//! - `model`: [`ModelHandle`], the test's side of one WebSocket attachment.
//! - `webhook`: the incoming call event, its Standard Webhooks signature and its delivery.
//! - [`google`]: a separate simulator of Google's OAuth 2.0 endpoints and Calendar API v3
//!   ([`google::GoogleSim`]), for the Google Calendar toolkit's tests.
//! - `live`: GPT-Live — its webhooks, session endpoints and sideband, and [`LiveBackend`],
//!   the test's side of a sideband (it plays the backend model).
//!
//! # Invariants
//!
//! - Nothing here panics on client input: malformed traffic becomes a `Violation` and an OpenAI
//!   shaped error, never a crash, so one bad client cannot take down a load test.
//! - The state lock is a `std::sync::Mutex` held only for synchronous bookkeeping, never across
//!   an `.await`; each WebSocket has its own task fed by unbounded channels.

#![forbid(unsafe_code)]

/// The read buffer of each simulated WebSocket. Events are a few KiB; the library's default of
/// 128 KiB is zeroed again before every read, which made that zeroing the load generator's
/// largest cost at thousands of calls. Larger frames still arrive (the buffer grows).
const SOCKET_READ_BUFFER: usize = 8 * 1024;

mod client_events;
pub mod google;
mod live;
mod model;
mod rest;
mod simulator;
mod state;
mod validate;
mod webhook;
mod ws;

pub use live::{LiveBackend, LiveSim};
pub use model::ModelHandle;
pub use simulator::Simulator;

/// One call control REST request as the simulator received and answered it.
#[derive(Debug, Clone)]
pub struct RestRequest {
    /// The last path segment: `accept`, `reject`, `refer`, `hangup` (or whatever the client sent).
    pub action: String,
    /// The `{call_id}` path segment.
    pub call_id: String,
    /// The parsed JSON body; `Null` when empty, a JSON string holding the raw text when unparseable.
    pub body: serde_json::Value,
    /// The `Authorization` header as sent, to check the client authenticates every request.
    pub authorization: Option<String>,
    /// The HTTP status the simulator answered.
    pub status: u16,
}

/// A place where the client's traffic broke the protocol contract.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The call the offending request or event belonged to.
    pub call_id: String,
    /// What was wrong, naming the field or rule.
    pub message: String,
    /// The offending REST body or client event.
    pub event: serde_json::Value,
}
