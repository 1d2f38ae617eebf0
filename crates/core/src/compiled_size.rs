//! What a compiled [`Tool`](crate::Tool) holds on the heap, estimated from what it was compiled
//! from, so a cache can bound compiled tools by bytes.
//!
//! Each constant is a measurement with a heap profiler (dhat: the live bytes a parsed tool
//! holds, `tests/compiled_size.rs`, which checks the estimate against the measurement for each
//! shape of tool), rounded up for the allocator's size classes: the estimate errs towards more.

use serde_json::Value;

/// Every tool: the compiled `Tool`, its argument validator and function definitions, however
/// small (a tool of one `respond` measures 4.4 KB besides its one expression).
const TOOL_BYTES: u64 = 8 * 1024;

/// Bytes per byte of the definition's text (strings and keys). A tool keeps its definition,
/// its description and two function definitions, and the literal parts of its templates: a
/// text-heavy definition (a 250 KB description) measures 4.2 bytes per byte.
const TEXT_FACTOR: u64 = 6;

/// Bytes per JSON value of the definition. Each value is held in several copies (the
/// definition, the parameters, two JSON Schemas, the compiled argument validator, literal
/// action fields): a structure-heavy definition (64 parameters of 30 `enum` values) measures
/// about 450 bytes per value, literal values in an action's body about 190.
const NODE_BYTES: u64 = 500;

/// Each expression the template engine compiled. minijinja 3.1 gives every compiled expression
/// room for 256 instructions and 128 line entries, whatever its length: 9.4 KB measured.
/// (Its `debug` feature, off here, would add a span per instruction: 12.0 KB.)
pub const ENGINE_EXPR_BYTES: u64 = 10 * 1024;

/// Each template hole or expression, on top of its text: the compiled pieces and the path or
/// comparison the direct evaluator reads (measured at 600 to 1,400 bytes with its literal).
const HOLE_BYTES: u64 = 1024;

/// The estimate for a tool compiled from `definition`, with `holes` template holes and
/// expressions of which `engine_exprs` the engine compiled.
pub(crate) fn estimate(definition: &Value, holes: usize, engine_exprs: usize) -> u64 {
    let (mut text, mut nodes) = (0u64, 0u64);
    let mut stack = vec![definition];
    while let Some(v) = stack.pop() {
        nodes += 1;
        match v {
            Value::String(s) => text += s.len() as u64,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, item) in map {
                    text += k.len() as u64;
                    stack.push(item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    TOOL_BYTES
        .saturating_add(text.saturating_mul(TEXT_FACTOR))
        .saturating_add(nodes.saturating_mul(NODE_BYTES))
        .saturating_add((holes as u64).saturating_mul(HOLE_BYTES))
        .saturating_add((engine_exprs as u64).saturating_mul(ENGINE_EXPR_BYTES))
}
