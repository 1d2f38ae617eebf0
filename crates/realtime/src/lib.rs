//! The OpenAI Realtime SIP door: a phone call reaches OpenAI, OpenAI posts the
//! `realtime.call.incoming` webhook, and Switchboard accepts the call with the agent's
//! instructions and tools, attaches to the call's WebSocket, and runs the model's function calls
//! through the call session.
//!
//! # Layout
//! - [`webhook`]: Standard Webhooks verification and the incoming call event.
//! - [`api`]: the call control REST endpoints (accept, reject, refer, hang up).
//! - [`events`]: the WebSocket events read and written.
//! - `driver`: one call's WebSocket loop (function calls, outputs, responses, barge-in,
//!   handoff, filler speech, goodbye, re-attach).
//! - [`door`]: the calls a node serves, their output sinks, and [`CallControl`] for the executor.
//!
//! Protocol facts follow the GA API (`session.type = "realtime"`).
//!
//! [`CallControl`]: switchboard_runtime::CallControl

#![forbid(unsafe_code)]

pub mod api;
pub mod door;
mod driver;
pub mod events;
pub mod webhook;

pub use api::{ApiError, CallsApi, Endpoints};
pub use door::{CallPlan, Opened, RealtimeDoor};
pub use driver::{CallEnd, DriverOptions};
pub use events::AgentProfile;
pub use webhook::{IncomingCall, VerifyError, verify};
