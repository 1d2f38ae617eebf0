//! A compiled tool's parameters against arbitrary arguments, as a model sends them: the first
//! byte picks one of the example tools, the rest is `arguments_json`. Validation answers with a
//! value or a `ToolError`, never a panic.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use switchboard_core::{Limits, Tool};

/// Tools whose parameters cover every parameter type, enums, nesting and required fields.
const DEFINITIONS: [&str; 3] = [
    include_str!("../../examples/save_meal.json"),
    r#"{
        "name": "book_table",
        "description": "Book a table",
        "parameters": [
            {"name": "party", "type": "integer", "min_value": 1, "max_value": 20, "required": true},
            {"name": "when", "type": "datetime", "required": true},
            {"name": "price", "type": "number", "default": 10.5},
            {"name": "vip", "type": "boolean"},
            {"name": "guest", "type": "object"},
            {"name": "tags", "type": "array", "items": {"type": "array", "items": {"type": "string", "enum": ["window", "quiet"]}}}
        ],
        "actions": [{"type": "respond", "message": "Booked for {{params.party}}."}]
    }"#,
    r#"{
        "name": "update_contact",
        "description": "Update a contact",
        "parameters": {
            "type": "object",
            "properties": {
                "phone": {"type": "string", "pattern": "^\\+[0-9]{6,15}$"},
                "emails": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3},
                "address": {"type": "object", "properties": {"zip": {"type": "string", "minLength": 3}}, "required": ["zip"]}
            },
            "required": ["phone"]
        },
        "actions": [{"type": "respond", "message": "Updated."}]
    }"#,
];

/// The compiled tools; a definition that stopped compiling is a broken harness, said at once.
static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    DEFINITIONS
        .iter()
        .map(|d| match Tool::parse_str(d, &Limits::default()) {
            Ok(tool) => tool,
            Err(diagnostics) => panic!("a fuzz tool does not compile: {diagnostics:?}"),
        })
        .collect()
});

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(arguments) = std::str::from_utf8(rest) else {
        return;
    };
    let Some(tool) = TOOLS.get(usize::from(pick) % TOOLS.len().max(1)) else {
        return;
    };
    let _ = tool.arguments().validate(tool.name(), arguments);
});
