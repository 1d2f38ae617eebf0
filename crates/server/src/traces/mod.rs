//! Traces: where spans are exported (`settings`, `export`), and the caller's span read from a
//! door's request, so an invocation's span continues the voice framework's trace.

mod export;
mod settings;

use axum::http::HeaderMap;
use switchboard_runtime::TraceParent;

pub use export::{TraceExport, TraceSetupError};
pub use settings::{TraceConfigError, TraceSettings};

/// The caller's span from a request's W3C `traceparent` and `tracestate` headers. `None` when
/// there is none, when there are several (the recommendation calls that invalid) or when it
/// is malformed: such a header is ignored, never an error.
pub fn parent_of(headers: &HeaderMap) -> Option<TraceParent> {
    let mut parents = headers.get_all("traceparent").iter();
    let parent = parents.next()?.to_str().ok()?;
    if parents.next().is_some() {
        return None;
    }
    // Several `tracestate` fields are one list, in order.
    let states: Vec<&str> = headers
        .get_all("tracestate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let state = (!states.is_empty()).then(|| states.join(","));
    TraceParent::parse(parent, state.as_deref())
}

/// The caller's span from an MCP request's `_meta` (`traceparent`, `tracestate`, as the MCP
/// SDKs send them), when its HTTP headers carried none.
pub fn parent_of_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Option<TraceParent> {
    let parent = meta.get("traceparent")?.as_str()?;
    let state = meta.get("tracestate").and_then(serde_json::Value::as_str);
    TraceParent::parse(parent, state)
}
