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
    /// Bytes one rendered template may produce.
    pub max_template_output: usize,
    /// Bytes the call's context may hold after a tool commits.
    pub max_context_bytes: usize,
    /// Bytes of an HTTP response body an `api_call` accepts.
    pub max_response_body: usize,
    /// Items a `transform` may walk.
    pub max_transform_items: usize,
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
            max_template_output: 64 * 1024,
            max_context_bytes: 256 * 1024,
            max_response_body: 1024 * 1024,
            max_transform_items: 1_000,
            max_timeout_s: 300.0,
            max_handoffs: 10,
        }
    }
}
