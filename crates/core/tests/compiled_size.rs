//! A compiled tool's estimated size against what it really holds, measured with a heap
//! profiler: the compiled-tool cache is bounded by the estimate, so an estimate below the real
//! size would let the cache hold more than its bound.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::{Map, Value, json};
use switchboard_core::{Limits, Tool};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// A tool whose one `api_call` has `fields` in its body.
fn with_body(fields: impl Iterator<Item = (String, Value)>) -> Value {
    json!({"name": "big", "description": "A large tool.",
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "url": "https://example.com/x", "body": fields.collect::<Map<_, _>>()}]})
}

/// The shapes a tool's size comes from, each taken far.
fn shapes() -> Vec<(&'static str, Value)> {
    let n = 900;
    let text_heavy = json!({"name": "prose", "description": "d".repeat(200_000),
        "parameters": [{"name": "text", "type": "string", "description": "t".repeat(50_000)}]});
    let params: Vec<Value> = (0..64)
        .map(|i| {
            json!({"name": format!("p{i}"), "type": "string",
            "enum": (0..30).map(|j| format!("v{j}")).collect::<Vec<_>>()})
        })
        .collect();
    let structure_heavy = json!({"name": "forms", "description": "d", "parameters": params});
    let literal_body = with_body((0..5_000).map(|i| (format!("k{i}"), json!([i, true, null]))));
    let checks: Vec<Value> = (0..n)
        .map(|i| json!({"check": format!("params.text != 'x{i}'"), "message": "m"}))
        .collect();
    vec![
        (
            "a small tool",
            json!({"name": "t", "description": "d",
            "actions": [{"type": "respond", "message": "{{ params | length }}"}]}),
        ),
        ("a 250 KB description", text_heavy),
        ("64 parameters of 30 enum values", structure_heavy),
        ("5,000 literal values", literal_body),
        (
            "900 path holes in text",
            with_body((0..n).map(|i| {
                (
                    format!("f{i}"),
                    json!(format!("v{i} {{{{ params.text }}}}")),
                )
            })),
        ),
        (
            "900 whole-value path holes",
            with_body((0..n).map(|i| (format!("f{i}"), json!("{{ params.text }}")))),
        ),
        (
            "900 engine holes",
            with_body((0..n).map(|i| {
                (
                    format!("f{i}"),
                    json!(format!("{{{{ params.text | replace('a', 'b{i}') }}}}")),
                )
            })),
        ),
        (
            "900 comparisons",
            with_body((0..n).map(|i| {
                (
                    format!("f{i}"),
                    json!(format!("{{{{ params.text == 'a{i}' }}}}")),
                )
            })),
        ),
        (
            "900 validate checks",
            json!({"name": "checks", "description": "d",
            "parameters": [{"name": "text", "type": "string", "required": true}],
            "actions": [{"type": "validate", "rules": checks}]}),
        ),
    ]
}

/// The live heap bytes a tool compiled from `def` holds.
fn measured(def: &Value) -> (u64, Tool) {
    // Once first, so the statics a first use fills (the engine, the validator's) are not
    // counted.
    drop(Tool::parse(def, &Limits::default()).unwrap());
    let before = dhat::HeapStats::get().curr_bytes;
    let tool = Tool::parse(def, &Limits::default()).unwrap();
    let after = dhat::HeapStats::get().curr_bytes;
    ((after.saturating_sub(before)) as u64, tool)
}

#[test]
fn the_estimate_covers_what_a_compiled_tool_holds() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut measures = Vec::new();
    for (shape, def) in shapes() {
        let (bytes, tool) = measured(&def);
        measures.push((shape, bytes, tool.heap_bytes()));
    }
    // The table first, so a failure shows every shape.
    for (shape, bytes, estimate) in &measures {
        println!("{shape}: holds {bytes} B, estimated {estimate} B");
    }
    for (shape, bytes, estimate) in measures {
        assert!(
            estimate >= bytes,
            "{shape}: the estimate ({estimate} B) is below what the tool holds ({bytes} B)"
        );
        assert!(
            estimate <= bytes.saturating_mul(4),
            "{shape}: the estimate ({estimate} B) is over four times what the tool holds ({bytes} B)"
        );
    }
}
