//! Tool definitions: every problem of a broken file reported in one pass, each with its place and
//! a fix; good definitions parse, with side effects inferred.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::{Value, json};
use switchboard_core::{Limits, SideEffect, Tool};

fn problems(def: &Value) -> Vec<(String, String)> {
    match Tool::parse(def, &Limits::default()) {
        Ok(_) => Vec::new(),
        Err(d) => {
            d.0.into_iter()
                .map(|d| {
                    (
                        d.pointer,
                        format!("{} | {}", d.message, d.fix.unwrap_or_default()),
                    )
                })
                .collect()
        }
    }
}

/// Asserts that each (pointer, fragment) pair is among the problems, and nothing else is.
fn check(def: Value, expected: &[(&str, &str)]) {
    let got = problems(&def);
    for (ptr, needle) in expected {
        assert!(
            got.iter().any(|(p, m)| p == ptr && m.contains(needle)),
            "expected {ptr} ~ {needle:?} in {got:#?}"
        );
    }
    assert_eq!(got.len(), expected.len(), "unexpected problems: {got:#?}");
}

#[test]
fn the_broken_example_names_every_mistake() {
    let def: Value =
        serde_json::from_str(include_str!("../../../examples/broken_tool.json")).unwrap();
    check(
        def,
        &[
            ("/name", "must be 1-64 letters"),
            ("/parameters/0/type", "did you mean `string`?"),
            ("/parameters/1/min_value", "greater than max_value"),
            ("/parameters/2/name", "defined twice"),
            ("/actions/0/type", "did you mean `context.set`?"),
            ("/actions/1/data/user.id", "`user` is read-only"),
            (
                "/actions/1/data/user.id",
                "did you mean `params.meal_type`?",
            ),
            ("/actions/2", "has no `message`"),
            ("/actions/2/mesage", "did you mean `message`?"),
            ("/actions/3/timout", "did you mean `timeout`?"),
            ("/actions/3/body/note", "never closed"),
            ("/actions/4/if", "did you mean `flags`?"),
            ("/timeout", "outside"),
        ],
    );
}

#[test]
fn one_problem_per_line() {
    let base = |actions: Value| json!({"name": "t", "description": "d", "actions": actions});
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"description": "d"}), "", "has no `name`"),
        (
            json!({"name": "t", "description": " "}),
            "/description",
            "empty",
        ),
        (
            json!({"name": "t", "description": "d", "colour": 1}),
            "/colour",
            "unknown field",
        ),
        (
            json!({"name": "t", "description": "d", "side_effect": "maybe"}),
            "/side_effect",
            "`read`, `write` or `terminal`",
        ),
        (base(json!({})), "/actions", "must be a list"),
        (base(json!([{"data": {}}])), "/actions/0", "has no `type`"),
        (base(json!(["respond"])), "/actions/0", "must be an object"),
        (
            base(json!([{"type": "respond", "message": "{{ nope.x }}"}])),
            "/actions/0/message",
            "not a scope",
        ),
        (
            base(json!([{"type": "respond", "message": "{{ logged_meals }}"}])),
            "/actions/0/message",
            "workflow.logged_meals",
        ),
        (
            base(json!([{"type": "respond", "message": "{% if x %}a{% endif %}"}])),
            "/actions/0/message",
            "not supported",
        ),
        (
            base(json!([{"type": "context.set", "data": {"call.agent": "x"}}])),
            "/actions/0/data/call.agent",
            "read-only",
        ),
        (
            base(json!([{"type": "context.set", "data": {"flags.vip": true}}])),
            "/actions/0/data/flags.vip",
            "flag.set",
        ),
        (
            base(json!([{"type": "api_call", "url": "ftp://x"}])),
            "/actions/0/url",
            "not an http(s) URL",
        ),
        (
            base(json!([{"type": "api_call", "url": "https://x", "method": "FETCH"}])),
            "/actions/0/method",
            "unknown HTTP method",
        ),
        (
            base(json!([{"type": "api_call", "url": "https://x", "retry_count": 50}])),
            "/actions/0/retry_count",
            "outside",
        ),
        (
            base(json!([{"type": "api_call", "url": "https://x", "on_error": "ignore"}])),
            "/actions/0/on_error",
            "`fail` or `continue`",
        ),
        (
            base(
                json!([{"type": "transform", "input": "workflow.x", "op": "sum", "expr": "item", "into": "y"}]),
            ),
            "/actions/0/op",
            "unknown transform op",
        ),
        (
            base(
                json!([{"type": "transform", "input": "workflow.x", "op": "reduce", "expr": "acc + item", "into": "y"}]),
            ),
            "/actions/0",
            "no `initial`",
        ),
        (
            base(
                json!([{"type": "transform", "input": "workflow.x", "op": "map", "expr": "acc", "into": "y"}]),
            ),
            "/actions/0/expr",
            "not a scope",
        ),
        (
            base(json!([{"type": "transfer"}])),
            "/actions/0",
            "neither `destination` nor `target_uri`",
        ),
        (
            base(json!([{"type": "flag.set", "flags": ["a b"]}])),
            "/actions/0/flags/0",
            "not allowed",
        ),
        (
            base(json!([{"type": "validate", "rules": [{"check": "params.x >", "message": "m"}]}])),
            "/actions/0/rules/0/check",
            "does not compile",
        ),
        (
            base(json!([{"type": "context.get", "paths": []}])),
            "/actions/0/paths",
            "empty",
        ),
        (
            base(json!([{"type": "log", "level": "loud", "message": "m"}])),
            "/actions/0/level",
            "unknown log level",
        ),
        (
            base(json!([{"type": "sms.send"}])),
            "/actions/0/type",
            "unknown action type",
        ),
        (
            base(json!([{"type": "email.snd"}])),
            "/actions/0/type",
            "did you mean `email.send`?",
        ),
        (
            base(json!([{"type": "email.send", "to": "a@b.c", "subject": "s"}])),
            "/actions/0",
            "has no `body`",
        ),
        (
            base(
                json!([{"type": "calendar.create_event", "title": "t", "start_time": "x", "duraton_minutes": 5}]),
            ),
            "/actions/0/duraton_minutes",
            "did you mean `duration_minutes`?",
        ),
        (
            base(json!([{"type": "api_call", "url": "https://x",
                "body": (0..1001).map(|i| (format!("f{i}"), json!(format!("{{{{ params.x{i} | upper }}}}")))).collect::<serde_json::Map<_, _>>()}])),
            "",
            "tool `t` has 1001 template holes and expressions, over the limit of 1000 (max_template_holes) | build values in fewer expressions",
        ),
    ];
    for (def, ptr, needle) in cases {
        let got = problems(&def);
        assert!(
            got.iter().any(|(p, m)| p == ptr && m.contains(needle)),
            "{def}: expected {ptr} ~ {needle:?}, got {got:#?}"
        );
    }
}

#[test]
fn limits_are_enforced_when_parsing() {
    let limits = Limits {
        max_actions: 3,
        max_depth: 1,
        ..Limits::default()
    };
    let many = json!({"name": "t", "description": "d", "actions": [{"type": "log", "message": "1"}, {"type": "log", "message": "2"}, {"type": "log", "message": "3"}, {"type": "log", "message": "4"}]});
    let err = Tool::parse(&many, &limits).unwrap_err();
    assert!(
        err.0
            .iter()
            .any(|d| d.message.contains("over the limit of 3")),
        "{err}"
    );
    // Holes past the limit are counted, not compiled: the broken fifth is not even read.
    let holes = Limits {
        max_template_holes: 3,
        ..Limits::default()
    };
    let many = json!({"name": "t", "description": "d", "actions": [
        {"type": "validate", "rules": [{"check": "true", "message": "{{ 1 }} {{ 2 }}"}]},
        {"type": "respond", "message": "{{ 3 }} and {{ 4 }} and {{ oops | }}"}]});
    let err = Tool::parse(&many, &holes).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(
        err.0[0]
            .message
            .contains("tool `t` has 6 template holes and expressions, over the limit of 3"),
        "{err}"
    );
    assert!(
        err.0[0].fix.as_deref().unwrap().contains("serve --limits"),
        "{err}"
    );
    let deep = json!({"name": "t", "description": "d", "actions": [{"type": "conditional", "if": "true", "then": [{"type": "conditional", "if": "true", "then": []}]}]});
    let err = Tool::parse(&deep, &limits).unwrap_err();
    assert!(
        err.0.iter().any(|d| d.message.contains("nest 2 deep")),
        "{err}"
    );
}

#[test]
fn side_effects_are_inferred_or_declared() {
    let t = |actions: Value, extra: Value| {
        let mut def = json!({"name": "t", "description": "d", "actions": actions});
        def.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Tool::parse(&def, &Limits::default()).unwrap().side_effect()
    };
    assert_eq!(
        t(
            json!([{"type": "context.set", "data": {"a": 1}}]),
            json!({})
        ),
        SideEffect::Read
    );
    assert_eq!(
        t(
            json!([{"type": "api_call", "method": "GET", "url": "https://x"}]),
            json!({})
        ),
        SideEffect::Read
    );
    assert_eq!(
        t(json!([{"type": "api_call", "url": "https://x"}]), json!({})),
        SideEffect::Write
    );
    assert_eq!(
        t(
            json!([{"type": "mcp.call", "server": "s", "tool": "t"}]),
            json!({})
        ),
        SideEffect::Write
    );
    assert_eq!(
        t(
            json!([{"type": "conditional", "if": "true", "then": [{"type": "end_call"}]}]),
            json!({})
        ),
        SideEffect::Terminal
    );
    assert_eq!(
        t(
            json!([{"type": "transfer", "target_uri": "tel:+1"}]),
            json!({})
        ),
        SideEffect::Terminal
    );
    assert_eq!(
        t(json!([]), json!({"side_effect": "write"})),
        SideEffect::Write
    );
}

#[test]
fn effects_are_found_in_every_block_whatever_is_declared() {
    let requests = |actions: Value, extra: Value| {
        let mut def = json!({"name": "t", "description": "d", "actions": actions});
        def.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Tool::parse(&def, &Limits::default())
            .unwrap()
            .requests_effects()
    };
    // Only the call's own state and the answer: no effect, even when declared a write.
    let local = json!([
        {"type": "validate", "rules": [{"check": "true", "message": "m"}]},
        {"type": "context.set", "data": {"a": 1}},
        {"type": "context.get", "paths": ["a"], "into": "a"},
        {"type": "context.delete", "paths": ["a"]},
        {"type": "flag.set", "flags": ["f"]},
        {"type": "flag.clear", "flags": ["f"]},
        {"type": "transform", "input": "{{ params }}", "op": "map", "expr": "{{ item }}", "into": "x"},
        {"type": "log", "message": "m"},
        {"type": "conditional", "if": "true", "then": [{"type": "handoff", "agent": "billing"}]},
        {"type": "respond", "message": "done"}
    ]);
    assert!(!requests(local.clone(), json!({})));
    assert!(!requests(local, json!({"side_effect": "write"})));
    // Any action that suspends the run for an effect, however deep and whatever is declared.
    for effect in [
        json!({"type": "api_call", "method": "GET", "url": "https://x"}),
        json!({"type": "mcp.call", "server": "s", "tool": "t"}),
        json!({"type": "memory.search", "query": "q"}),
        json!({"type": "calendar.check_availability", "date": "2026-11-25"}),
        json!({"type": "transfer", "target_uri": "tel:+1"}),
        json!({"type": "end_call"}),
    ] {
        let nested = json!([{"type": "conditional", "if": "false", "then": [], "else": [effect]}]);
        assert!(requests(nested, json!({"side_effect": "read"})), "{effect}");
    }
}

#[test]
fn tool_options_parse() {
    let def = json!({"name": "lookup", "description": "d", "timeout": 2.5, "dedupe_window_s": 0, "async": true,
                     "messages": {"start": "Let me check.", "delayed": "Still checking.", "delayed_after_ms": 800}});
    let t = Tool::parse(&def, &Limits::default()).unwrap();
    assert_eq!(
        (t.timeout_ms(), t.dedupe_window_s(), t.is_async()),
        (2500, 0, true)
    );
    assert_eq!(t.messages().delayed_after_ms, 800);
    assert_eq!(t.messages().start.as_deref(), Some("Let me check."));
    let defaults = Tool::parse(
        &json!({"name": "x", "description": "d"}),
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(
        (
            defaults.timeout_ms(),
            defaults.dedupe_window_s(),
            defaults.is_async(),
            defaults.messages().delayed_after_ms
        ),
        (20_000, 30, false, 1500)
    );
}

#[test]
fn raw_json_schema_parameters_are_accepted_and_validated() {
    let def = json!({"name": "request_transfer", "description": "d", "parameters": {
        "type": "object", "properties": {"destination_id": {"type": "string", "enum": ["sales"]}}, "required": ["destination_id"], "additionalProperties": false}});
    let t = Tool::parse(&def, &Limits::default()).unwrap();
    assert_eq!(t.function_def(false).parameters, def["parameters"]);
    let bad = json!({"name": "t", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "strang"}}}});
    assert!(
        problems(&bad)
            .iter()
            .any(|(p, m)| p.starts_with("/parameters") && m.contains("not a valid JSON Schema")),
        "{:#?}",
        problems(&bad)
    );
    let unknown_param = json!({"name": "t", "description": "d", "parameters": def["parameters"], "actions": [{"type": "respond", "message": "{{params.destination}}"}]});
    assert!(
        problems(&unknown_param)
            .iter()
            .any(|(_, m)| m.contains("did you mean `params.destination_id`?"))
    );
}

#[test]
fn json_syntax_errors_name_line_and_column() {
    let err = Tool::parse_str("{\n  \"name\": \"x\",\n  oops\n}", &Limits::default()).unwrap_err();
    assert!(err.0[0].fix.as_deref().unwrap().contains("line 3"), "{err}");
}

#[test]
fn function_definitions_for_models() {
    let def: Value =
        serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap();
    let t = Tool::parse(&def, &Limits::default()).unwrap();
    insta::assert_json_snapshot!("save_meal_function", t.function_def(false));
    insta::assert_json_snapshot!("save_meal_function_strict", t.function_def(true));
}
