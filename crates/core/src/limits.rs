//! Bounds on what one tool may define and do; each is enforced with an error naming it.

use serde::{Deserialize, Serialize};

/// Limits applied when a tool is parsed and while it runs. Operators may tune them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Actions in one tool, counting `on_success`, `on_failure` and nested branches.
    pub max_actions: usize,
    /// How deep `conditional` branches may nest.
    pub max_depth: usize,
    /// Parameters of one tool.
    pub max_parameters: usize,
    /// `{{ }}` holes and expressions (conditions, checks, transforms) in one tool. Each is
    /// compiled and kept with the tool; one the template engine compiles holds about 10 KB
    /// whatever its length, so this bounds what a tool version costs in memory (and what
    /// parsing one costs: holes past the limit are counted, not compiled).
    pub max_template_holes: usize,
    /// Bytes one template result may take (default 256 KiB, the size of a whole context:
    /// nothing bigger could be kept), whether it renders to text or is one `{{ expr }}` that
    /// yields a JSON value; measured as JSON.
    pub max_template_output: usize,
    /// Bytes the call's context may hold after a tool commits.
    pub max_context_bytes: usize,
    /// Bytes of an HTTP response body an `api_call` accepts.
    pub max_response_body: usize,
    /// Items a `transform` may walk.
    pub max_transform_items: usize,
    /// Bytes a `transform` may produce over all its items (default 1 MiB, as
    /// `max_response_body`): each item's result counts as it is made (for `reduce`, every
    /// intermediate accumulator), so a transform that would make gigabytes stops after a
    /// megabyte, not after the memory is spent.
    pub max_transform_output: usize,
    /// How deep any JSON value may nest (default 64; at most [`JSON_DEPTH_CEILING`], see
    /// [`Limits::json_depth`]): the model's arguments, `api_call` response bodies, MCP tool
    /// results, REST request bodies (which may add [`BODY_ENVELOPE_DEPTH`] levels around such a
    /// value), every value a run makes and every value it writes. Whatever is accepted must be
    /// readable back: stored state wraps values in a few more levels, and serde_json reads at
    /// most 128.
    pub max_json_depth: usize,
    /// Longest `timeout` a tool may declare, in seconds.
    pub max_timeout_s: f64,
    /// Handoffs in one call before a loop is assumed.
    pub max_handoffs: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_actions: 64,
            max_depth: 8,
            max_parameters: 64,
            max_template_holes: 1_000,
            max_template_output: 256 * 1024,
            max_context_bytes: 256 * 1024,
            max_response_body: 1024 * 1024,
            max_transform_items: 1_000,
            max_transform_output: 1024 * 1024,
            max_json_depth: 64,
            max_timeout_s: 300.0,
            max_handoffs: 10,
        }
    }
}

/// The most `max_json_depth` may be. The deepest place a value is stored — a checkpoint's run
/// state, its context, an agent's state, [`MAX_PATH_KEYS`] keys down, appended to a list — puts
/// 22 levels above the value, and serde_json reads back at most 128.
pub const JSON_DEPTH_CEILING: usize = 96;

/// Levels a REST request body may add around a value that is itself held to `max_json_depth`
/// (the body object, and the field holding the value, e.g. an invocation's `arguments`).
pub const BODY_ENVELOPE_DEPTH: usize = 2;

/// Keys a write path may name below its scope (`workflow.a.b` names two).
pub const MAX_PATH_KEYS: usize = 16;

impl Limits {
    /// `max_json_depth`, held to [`JSON_DEPTH_CEILING`] so what is accepted can be read back.
    pub fn json_depth(&self) -> usize {
        self.max_json_depth.min(JSON_DEPTH_CEILING)
    }
}
