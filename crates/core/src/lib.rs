//! Switchboard's pure core: tools as data.
//!
//! # Layout
//! - [`tool`]: a tool definition parsed once into a validated, compiled [`Tool`]; every problem
//!   reported at once with its JSON Pointer and a fix ([`diag`]); [`compiled_size`]: what a
//!   compiled tool holds, estimated for caches bounded by bytes.
//! - [`params`]: typed parameters, the JSON Schema a model sees, argument validation.
//! - [`template`]: `{{ expr }}` templates and expressions, compiled once per tool version.
//! - [`context`]: per-call state and the writes tools make to it.
//! - [`json_bounds`]: iterative measures of JSON depth and size, for the [`limits`].
//! - `actions`: one file per action type: its fields, parser and step.
//! - [`interp`]: the step machine (`start` → `Step::{Done, Effect}` → `Suspended::resume`).
//! - [`effect`]: what the core asks the world to do, and what came back.
//! - [`result`]: the outcome of a run and the JSON string the model receives.
//! - [`transfer`], [`builder`]: the transfer toolkit and the ToolBuilder (provider formats).
//! - [`guards`]: an agent's runaway guards (identical calls, calls a minute) and their defaults.
//! - [`toolkits`]: the built-in toolkits' catalogue (calendar, email) and each action as a tool;
//!   `toolkits::calendar`: the calendars' booking rules, parsed with every problem at its pointer.
//!
//! Nothing here performs I/O, reads a clock or draws randomness: time and ids are passed in,
//! and every input error is a value.
#![forbid(unsafe_code)]

mod actions;
pub mod builder;
pub mod compiled_size;
pub mod context;
pub mod diag;
pub mod effect;
pub mod error;
pub mod field;
pub mod function;
pub mod guards;
pub mod interp;
pub mod json_bounds;
pub mod limits;
pub mod params;
pub(crate) mod reader;
pub mod result;
pub mod template;
pub mod tool;
pub mod toolkits;
pub mod transfer;

pub use actions::ACTION_TYPES;
pub use context::{CallInfo, Context};
pub use diag::{Diagnostic, Diagnostics};
pub use effect::{EffectOutcome, EffectRequest};
pub use error::{ErrorCode, ToolError};
pub use function::FunctionDef;
pub use interp::{RunInput, Step, Suspended, run_to_end, start};
pub use limits::Limits;
pub use result::{Outcome, ToolResult};
pub use tool::{SideEffect, Tool};
