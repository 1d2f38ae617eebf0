//! The limits on what a run accepts and makes, case by case: each case is a tool, its
//! arguments, its starting workflow and effect outcomes, and the error it must end with (or
//! `None` when it must succeed). A failed case writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_core::effect::HttpResponse;
use switchboard_core::{
    CallInfo, Context, EffectOutcome, ErrorCode, Limits, Outcome, RunInput, Tool, ToolError,
    run_to_end,
};

fn call() -> CallInfo {
    CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme-corp".into(),
        agent: "meal".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    }
}

/// A tool named `t` with one `array` parameter `v` (any items) and these actions.
fn tool(actions: Value) -> Value {
    json!({
        "name": "t",
        "description": "a test tool",
        "parameters": [{"name": "v", "type": "array"}],
        "actions": actions,
    })
}

/// `[[[…1…]]]`, `depth` levels deep.
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

fn run(tool: &Value, args: &str, workflow: Value, outcomes: Vec<EffectOutcome>) -> Outcome {
    let tool = Arc::new(Tool::parse(tool, &Limits::default()).unwrap_or_else(|e| panic!("{e}")));
    let mut ctx = Context::new(&call(), json!({}));
    ctx.workflow = Arc::new(workflow);
    let mut outcomes = outcomes.into_iter();
    run_to_end(&tool, RunInput::new("call_1"), args, &ctx, |_| {
        outcomes.next().unwrap_or_else(|| {
            EffectOutcome::Failed(ToolError::new(
                ErrorCode::Cancelled,
                "an effect the case gave no outcome for",
            ))
        })
    })
}

/// Name, tool, arguments, starting workflow, effect outcomes, and the expected error code and
/// the parts its message must hold (`None`: the run succeeds).
type Case = (
    &'static str,
    Value,
    String,
    Value,
    Vec<EffectOutcome>,
    Option<(ErrorCode, &'static [&'static str])>,
);

fn http(body: Value) -> EffectOutcome {
    EffectOutcome::Http(HttpResponse {
        status: 200,
        headers: Default::default(),
        body,
    })
}

#[test]
fn limits_hold() {
    let thousand: Vec<u32> = (0..1000).collect();
    let cases: Vec<Case> = vec![
        (
            "a map over 1000 items of 64 KB each stops at the transform budget",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "map",
                         "expr": "'x' * 64000 ~ item", "into": "result.big"}]),
            ),
            "{}".into(),
            json!({"items": thousand}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &[
                    "t failed at",
                    "(transform)",
                    "of 1000",
                    "max_transform_output",
                ],
            )),
        ),
        (
            "a filter whose predicate makes large values counts them too",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "filter",
                         "expr": "'x' * 64000", "into": "kept"}]),
            ),
            "{}".into(),
            json!({"items": thousand}),
            vec![],
            Some((ErrorCode::ToolExecutionFailed, &["max_transform_output"])),
        ),
        (
            "a reduce counts every accumulator it makes",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "reduce",
                         "expr": "acc ~ ('y' * 4000)", "initial": "", "into": "result.s"}]),
            ),
            "{}".into(),
            json!({"items": thousand}),
            vec![],
            Some((ErrorCode::ToolExecutionFailed, &["max_transform_output"])),
        ),
        (
            "one item's result is a template result",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "map",
                         "expr": "'x' * 300000", "into": "result.big"}]),
            ),
            "{}".into(),
            json!({"items": [1]}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["item 1", "max_template_output"],
            )),
        ),
        (
            "a reduce that nests deeper each item stops at the depth limit",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "reduce",
                         "expr": "[acc]", "initial": 0, "into": "result.deep"}]),
            ),
            "{}".into(),
            json!({"items": thousand}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["item 65", "max_json_depth"],
            )),
        ),
        (
            "a transform within its budget is unchanged",
            tool(
                json!([{"type": "transform", "input": "workflow.items", "op": "map",
                         "expr": "{'n': item, 'label': 'item ' ~ item}", "into": "result.items"}]),
            ),
            "{}".into(),
            json!({"items": thousand}),
            vec![],
            None,
        ),
        (
            "a whole-value template that builds a huge string",
            tool(json!([{"type": "context.set", "data": {"big": "{{ 'x' * 300000 }}"}}])),
            "{}".into(),
            json!({}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &[
                    "t failed at /actions/0 (context.set)",
                    "max_template_output",
                ],
            )),
        ),
        (
            "a whole-value template that builds a huge list",
            tool(json!([{"type": "context.set", "data": {"big": "{{ [workflow.s] * 5000 }}"}}])),
            "{}".into(),
            json!({"s": "s".repeat(100)}),
            vec![],
            Some((ErrorCode::ToolExecutionFailed, &["max_template_output"])),
        ),
        (
            "the templates of one value share the limit",
            tool(
                json!([{"type": "api_call", "method": "POST", "url": "https://api.example.com/x",
                         "body": {"a": "{{workflow.s}}", "b": "{{workflow.s}}", "c": "{{workflow.s}}"}}]),
            ),
            "{}".into(),
            json!({"s": "s".repeat(100_000)}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["(api_call)", "max_template_output"],
            )),
        ),
        (
            "a text template is bounded as before",
            tool(json!([{"type": "respond", "message": "{{ 'x' * 300000 }}!"}])),
            "{}".into(),
            json!({}),
            vec![],
            Some((ErrorCode::ToolExecutionFailed, &["max_template_output"])),
        ),
        (
            "arguments at the depth limit are accepted and written",
            tool(
                json!([{"type": "context.set", "data": {"v": "{{params.v}}", "args": "{{params}}"}}]),
            ),
            json!({"v": nested(63)}).to_string(),
            json!({}),
            vec![],
            None,
        ),
        (
            "arguments past the depth limit are refused before they are parsed",
            tool(json!([{"type": "context.set", "data": {"v": "{{params.v}}"}}])),
            json!({"v": nested(199)}).to_string(),
            json!({}),
            vec![],
            Some((
                ErrorCode::InvalidArguments,
                &["The arguments for t nest 200 levels deep, over the limit of 64"],
            )),
        ),
        (
            "an api_call response body past the depth limit",
            tool(
                json!([{"type": "api_call", "url": "https://api.example.com/x", "response_path": "r"}]),
            ),
            "{}".into(),
            json!({}),
            vec![http(nested(65))],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["the response body from api.example.com", "max_json_depth"],
            )),
        ),
        (
            "an MCP result past the depth limit",
            tool(json!([{"type": "mcp.call", "server": "s", "tool": "x", "into": "r"}])),
            "{}".into(),
            json!({}),
            vec![EffectOutcome::Done {
                value: json!({"content": nested(70)}),
            }],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["what the effect returned", "max_json_depth"],
            )),
        ),
        (
            "a value a template builds past the depth limit is not written",
            tool(json!([{"type": "context.set", "data": {"v": "{{ [[[[params.v]]]] }}"}}])),
            json!({"v": nested(62)}).to_string(),
            json!({}),
            vec![],
            Some((
                ErrorCode::ToolExecutionFailed,
                &["the value for `workflow.v`", "max_json_depth"],
            )),
        ),
    ];
    let mut failures = Vec::new();
    for (name, tool, args, workflow, outcomes, expected) in cases {
        let outcome = run(&tool, &args, workflow, outcomes);
        let problem = match (expected, &outcome.error) {
            (None, None) => None,
            (None, Some(e)) => Some(format!("failed: {e}")),
            (Some(_), None) => Some("succeeded".to_owned()),
            (Some((code, parts)), Some(e)) => {
                if e.code != code || !parts.iter().all(|p| e.message.contains(p)) {
                    Some(format!("ended with {:?}: {}", e.code, e.message))
                } else if !outcome.writes.is_empty() {
                    Some(format!("wrote {:?}", outcome.writes))
                } else {
                    None
                }
            }
        };
        if let Some(p) = problem {
            failures.push(format!(
                "{name}: {}",
                p.chars().take(300).collect::<String>()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn write_paths_name_at_most_sixteen_keys() {
    let path = |n: usize| {
        (0..n)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(".")
    };
    let ok = tool(json!([{"type": "context.set", "data": {(path(16)): 1}}]));
    assert!(Tool::parse(&ok, &Limits::default()).is_ok());
    let deep = tool(json!([{"type": "context.set", "data": {(path(17)): 1}}]));
    let err = Tool::parse(&deep, &Limits::default()).unwrap_err();
    assert!(
        err.to_string().contains("names 17 keys below its scope"),
        "{err}"
    );
}

#[test]
fn the_depth_limit_has_a_ceiling() {
    let limits = Limits {
        max_json_depth: 1_000,
        ..Limits::default()
    };
    assert_eq!(
        limits.json_depth(),
        switchboard_core::limits::JSON_DEPTH_CEILING
    );
    assert_eq!(Limits::default().json_depth(), 64);
}
