//! The OpenAI SIP door: a phone call reaches OpenAI, OpenAI posts the `realtime.call.incoming`
//! (Realtime) or `live.transport.incoming` (GPT-Live) webhook, and Switchboard accepts the call
//! with the agent's instructions and tools, attaches to the call's WebSocket (Realtime) or
//! sideband (GPT-Live), and runs the model's function calls through the call session.
//!
//! # Layout
//! - [`webhook`]: Standard Webhooks verification and the incoming call event.
//! - [`api`]: the call control REST endpoints (accept, reject, refer, hang up).
//! - [`events`]: the WebSocket events read and written.
//! - `line`: what a call's loop is for either API: the socket attached and re-attached with
//!   backoff, the outbox, the session's and executor's messages (answers, transfer, goodbye
//!   then hang-up, release), and the loop itself over a per-API driver.
//! - `driver`: one Realtime call's events (function calls, outputs, responses, barge-in,
//!   handoff, filler speech, goodbye), with its open responses (`driver/responses`).
//! - [`live_events`]: GPT-Live's sideband events and accept body (Responses delegation).
//! - `live_driver`: one GPT-Live call's sideband events (the backend's function calls, outputs
//!   within the input budget, one `response.create` per backend turn, commentary), with its
//!   backend turns (`live_driver/turns`) and input budget (`live_driver/budget`).
//! - `recent`: the function call ids a driver remembers, the newest only.
//! - [`door`]: the calls a node serves (either API), their output sinks, and [`CallControl`]
//!   for the executor.
//!
//! Protocol facts follow the GA API (`session.type = "realtime"`).
//!
//! [`CallControl`]: switchboard_runtime::CallControl

#![forbid(unsafe_code)]

pub mod api;
pub mod door;
mod driver;
pub mod events;
mod line;
mod live_driver;
pub mod live_events;
mod recent;
pub mod webhook;

pub use api::{Api, ApiError, CallsApi, Endpoints, REFER_TIMEOUT};
pub use door::{CallPlan, Opened, RealtimeDoor};
pub use events::AgentProfile;
pub use line::{CallEnd, DriverOptions};
pub use live_driver::CUT_MARKER;
pub use live_events::LiveStart;
pub use webhook::{IncomingCall, VerifyError, verify};
