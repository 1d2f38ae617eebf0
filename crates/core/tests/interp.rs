//! The interpreter, case by case: each case is a tool, its arguments, the outcomes its effects
//! get (in order), and the part of the result it must produce.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_core::effect::HttpResponse;
use switchboard_core::transfer::ReferConfig;
use switchboard_core::{
    CallInfo, Context, EffectOutcome, ErrorCode, Limits, RunInput, Tool, ToolError, run_to_end,
};

fn call() -> CallInfo {
    CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme-corp".into(),
        agent: "meal".into(),
        from: Some("+14255551212".into()),
        to: Some("+18005551212".into()),
        started_at: "2026-11-23T10:00:00Z".into(),
    }
}

fn refer() -> Arc<ReferConfig> {
    let cfg: Value =
        serde_json::from_str(include_str!("../../../examples/acme-corp.json")).unwrap();
    Arc::new(ReferConfig::parse(&cfg["features"]["refer"]).unwrap())
}

fn http(status: u16, body: Value) -> EffectOutcome {
    EffectOutcome::Http(HttpResponse {
        status,
        headers: Default::default(),
        body,
    })
}

fn done(value: Value) -> EffectOutcome {
    EffectOutcome::Done { value }
}

/// Runs `tool` with `args` on a context whose workflow is `workflow`, answering effects with
/// `outcomes` in order; returns a summary: the model's output, the committed state, the effects.
fn run(tool: &Value, args: &str, workflow: Value, outcomes: Vec<EffectOutcome>) -> Value {
    let tool = Arc::new(
        Tool::parse(
            tool,
            &Limits {
                max_context_bytes: 2_000,
                ..Limits::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let mut ctx = Context::new(&call(), json!({"id": "u_42", "auth_token": "tok_secret"}));
    ctx.workflow = Arc::new(workflow);
    let input = RunInput {
        agents: Some(vec!["meal".into(), "billing".into()]),
        refer: Some(refer()),
        config: Arc::new(json!({"region": "eu"})),
        now: Arc::new(json!("2026-11-23T10:00:05Z")),
        ..RunInput::new("call_001")
    };
    let mut outcomes = outcomes.into_iter();
    let mut effects = Vec::new();
    let outcome = run_to_end(&tool, input, args, &ctx, |req| {
        effects.push(serde_json::to_value(req).unwrap());
        outcomes
            .next()
            .expect("an effect the case gave no outcome for")
    });
    let base = ctx.clone();
    for w in &outcome.writes {
        ctx.apply(w).unwrap();
    }
    // The run's own copy, offered to a commit onto the unchanged context, with the writes it
    // does not hold yet applied, is exactly the context its writes make.
    // Its size bound holds too.
    match outcome.applied.onto(&base) {
        Some(o) => {
            let mut next = o.context.clone();
            for w in &outcome.writes[o.holds..] {
                next.apply(w).unwrap();
            }
            assert_eq!(next, ctx, "the run's copy differs from its writes applied");
            assert!(
                ctx.approx_size() <= o.size_bound,
                "the context is {} bytes, over the run's bound of {}",
                ctx.approx_size(),
                o.size_bound
            );
        }
        None => assert!(
            outcome.writes.is_empty(),
            "a run with writes offered no copy"
        ),
    }
    json!({
        "output": outcome.output(),
        "workflow": *ctx.workflow,
        "agents": *ctx.agents,
        "flags": *ctx.flags,
        "effects": effects,
        "handoff": outcome.handoff,
        "logs": outcome.logs.iter().map(|l| &l.message).collect::<Vec<_>>(),
    })
}

/// Asserts that every field of `expected` appears in `actual` with the same value.
fn assert_subset(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let Some(av) = a.get(k) else {
                    panic!("{path}/{k} is missing in {actual:#}")
                };
                assert_subset(v, av, &format!("{path}/{k}"));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.iter().any(Value::is_object) => {
            assert_eq!(e.len(), a.len(), "at {path}: {actual:#}");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_subset(ev, av, &format!("{path}/{i}"));
            }
        }
        _ => assert_eq!(expected, actual, "at {path}"),
    }
}

fn check(tool: Value, args: &str, workflow: Value, outcomes: Vec<EffectOutcome>, expected: Value) {
    let actual = run(&tool, args, workflow, outcomes);
    assert_subset(&expected, &actual, "");
}

fn save_meal() -> Value {
    serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap()
}

#[test]
fn save_meal_logs_and_calls_the_api() {
    let meal = json!({"meal_type": "lunch", "dishes": ["soup"]});
    check(
        save_meal(),
        r#"{"meal_type":"lunch","dishes":["soup"]}"#,
        json!({}),
        vec![http(201, json!({"id": 7}))],
        json!({
            "output": {"ok": true, "message": "I've logged your lunch!", "data": {}},
            "workflow": {"logged_meals": [meal]},
            "effects": [{"kind": "http", "method": "POST", "url": "https://api.example.com/meals",
                         "body": {"user_id": "u_42", "meal": meal}, "idempotency_key": "rtc_1-call_001-2",
                         "retry_count": 3, "retry_delay_ms": 500, "timeout_ms": 30000}],
        }),
    );
}

#[test]
fn validation_failure_ends_the_tool_with_its_message_and_no_writes() {
    check(
        save_meal(),
        r#"{"meal_type":"lunch","dishes":[]}"#,
        json!({}),
        vec![],
        json!({
            "output": {"ok": false, "error": "validation_failed", "tool": "save_meal", "message": "Ask which dishes."},
            "workflow": {}, "effects": [],
        }),
    );
}

#[test]
fn failed_api_call_drops_the_writes_and_runs_on_failure() {
    check(
        save_meal(),
        r#"{"meal_type":"dinner","dishes":["rice"]}"#,
        json!({"logged_meals": ["earlier"]}),
        vec![http(503, json!("unavailable"))],
        json!({
            "output": {"ok": false, "error": "api_call_failed", "tool": "save_meal", "message": "Sorry, I couldn't log that meal."},
            "workflow": {"logged_meals": ["earlier"]},
        }),
    );
}

#[test]
fn failed_effect_keeps_its_code() {
    let e = ToolError::new(
        ErrorCode::UpstreamUnavailable,
        "api.example.com is failing; try later",
    );
    let mut tool = save_meal();
    tool["on_failure"] = json!([]);
    check(
        tool,
        r#"{"meal_type":"dinner","dishes":["rice"]}"#,
        json!({}),
        vec![EffectOutcome::Failed(e)],
        json!({"output": {"ok": false, "error": "upstream_unavailable", "message": "api.example.com is failing; try later"}}),
    );
}

#[test]
fn invalid_arguments_never_reach_the_actions() {
    check(
        save_meal(),
        r#"{"meal_type":"brunch"}"#,
        json!({}),
        vec![],
        json!({
            "output": {"ok": false, "error": "invalid_arguments", "tool": "save_meal",
                       "details": [{"parameter": "dishes", "error": "is required"},
                                   {"parameter": "meal_type", "error": "\"brunch\" is not one of \"breakfast\", \"lunch\" or \"dinner\""}]},
            "effects": [],
        }),
    );
    check(
        save_meal(),
        "{\"meal_type\": ",
        json!({}),
        vec![],
        json!({"output": {"ok": false, "error": "tool_args_parse_error"}}),
    );
}

/// Arguments that are not a JSON object are a parse error, valid JSON or not, as seed 004's
/// executor answers them (`tool_args_parse_error`): nothing runs. Empty arguments mean `{}`.
#[test]
fn arguments_that_are_not_an_object_are_a_parse_error() {
    let not_an_object = |what: &str| {
        json!({"output": {"ok": false, "error": "tool_args_parse_error", "tool": "save_meal",
            "message": format!("Tool arguments must be a JSON object; the arguments for save_meal are {what}. Send them as one JSON object of the parameters by name.")},
            "effects": [], "workflow": {}})
    };
    let cases = [
        ("[1,2]", not_an_object("an array")),
        ("\"text\"", not_an_object("a string")),
        ("3", not_an_object("a number")),
        ("null", not_an_object("null")),
        ("true", not_an_object("a boolean")),
        (" [] ", not_an_object("an array")),
        (
            "text",
            json!({"output": {"ok": false, "error": "tool_args_parse_error", "tool": "save_meal"}, "effects": []}),
        ),
        (
            "",
            json!({"output": {"ok": false, "error": "invalid_arguments"}, "effects": []}),
        ),
    ];
    for (args, expected) in cases {
        let actual = run(&save_meal(), args, json!({}), vec![]);
        assert_subset(&expected, &actual, &format!("arguments {args:?}"));
    }
}

/// Name, tool, arguments, starting workflow, effect outcomes, expected subset.
type Case = (
    &'static str,
    Value,
    &'static str,
    Value,
    Vec<EffectOutcome>,
    Value,
);

/// One action type (or behaviour) per line: tool actions, arguments, starting workflow, effect
/// outcomes, expected subset.
#[test]
fn each_action_type() {
    let t = |actions: Value| json!({"name": "t", "description": "test tool", "parameters": [{"name": "n", "type": "integer"}], "actions": actions});
    let cases: Vec<Case> = vec![
        (
            "context.set typed and text",
            t(
                json!([{"type": "context.set", "data": {"a.b": "{{params.n}}", "s": "n={{params.n}}", "agent.seen": true}}]),
            ),
            r#"{"n": 4}"#,
            json!({}),
            vec![],
            json!({"workflow": {"a": {"b": 4}, "s": "n=4"}, "agents": {"meal": {"seen": true}}}),
        ),
        (
            "context.set reads its own writes",
            t(
                json!([{"type": "context.set", "data": {"x": 1}}, {"type": "context.set", "data": {"y": "{{workflow.x + 1}}"}}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"workflow": {"x": 1, "y": 2}}),
        ),
        (
            "context.set keys read earlier keys",
            t(
                json!([{"type": "context.set", "data": {"x": 2, "y": "{{ workflow.x * 10 }}", "z": "{{ workflow.y }}"}}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"workflow": {"x": 2, "y": 20, "z": 20}}),
        ),
        (
            "a write then a type conflict on the same path",
            t(
                json!([{"type": "context.set", "data": {"s": "text"}}, {"type": "context.set", "data": {"s[+]": 1}}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"ok": false, "error": "tool_execution_failed"}, "workflow": {}}),
        ),
        (
            "flags read after being set",
            t(
                json!([{"type": "flag.set", "flags": ["seen"]}, {"type": "respond", "message": "{{ 'yes' if flags.seen else 'no' }}"}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"message": "yes"}}),
        ),
        (
            "context.set append creates the list",
            t(
                json!([{"type": "context.set", "data": {"items[+]": "a"}}, {"type": "context.set", "data": {"items[+]": "b"}}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"workflow": {"items": ["a", "b"]}}),
        ),
        (
            "context.get one path into result",
            t(
                json!([{"type": "context.get", "paths": ["workflow.order.id"], "into": "result.order_id"}]),
            ),
            "{}",
            json!({"order": {"id": "o9"}}),
            vec![],
            json!({"output": {"ok": true, "data": {"order_id": "o9"}}}),
        ),
        (
            "context.get several paths into an object",
            t(
                json!([{"type": "context.get", "paths": ["order.id", "user.id", "missing"], "into": "result.info"}]),
            ),
            "{}",
            json!({"order": {"id": "o9"}}),
            vec![],
            json!({"output": {"data": {"info": {"id": "u_42", "missing": null}}}}),
        ),
        (
            "context.get without into",
            t(json!([{"type": "context.get", "paths": ["workflow.plan", "call.from"]}])),
            "{}",
            json!({"plan": "gold"}),
            vec![],
            json!({"output": {"data": {"plan": "gold", "from": "+14255551212"}}}),
        ),
        (
            "context.delete",
            t(json!([{"type": "context.delete", "paths": ["a.b", "nope.x"]}])),
            "{}",
            json!({"a": {"b": 1, "c": 2}}),
            vec![],
            json!({"workflow": {"a": {"c": 2}}}),
        ),
        (
            "flag.set then conditional",
            t(
                json!([{"type": "flag.set", "flags": ["vip"]}, {"type": "conditional", "if": "flags.vip", "then": [{"type": "respond", "message": "vip"}], "else": [{"type": "respond", "message": "plain"}]}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"message": "vip"}, "flags": {"vip": true}}),
        ),
        (
            "flag.clear",
            t(
                json!([{"type": "flag.set", "flags": ["a", "b"]}, {"type": "flag.clear", "flags": ["a"]}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"flags": {"b": true}}),
        ),
        (
            "conditional else branch",
            t(
                json!([{"type": "conditional", "if": "{{ params.n > 5 }}", "then": [{"type": "respond", "message": "big"}], "else": [{"type": "respond", "message": "small"}]}]),
            ),
            r#"{"n": 2}"#,
            json!({}),
            vec![],
            json!({"output": {"message": "small"}}),
        ),
        (
            "nested conditionals",
            t(
                json!([{"type": "conditional", "if": "true", "then": [{"type": "conditional", "if": "params.n == 3", "then": [{"type": "respond", "message": "three"}]}]}]),
            ),
            r#"{"n": 3}"#,
            json!({}),
            vec![],
            json!({"output": {"message": "three"}}),
        ),
        (
            "transform map",
            t(
                json!([{"type": "transform", "input": "{{workflow.items}}", "op": "map", "expr": "item.price * 2", "into": "result.doubled"}]),
            ),
            "{}",
            json!({"items": [{"price": 1}, {"price": 5}]}),
            vec![],
            json!({"output": {"data": {"doubled": [2, 10]}}}),
        ),
        (
            "transform filter",
            t(
                json!([{"type": "transform", "input": "workflow.items", "op": "filter", "expr": "item.price > params.n", "into": "cheap"}]),
            ),
            r#"{"n": 2}"#,
            json!({"items": [{"price": 1}, {"price": 5}]}),
            vec![],
            json!({"workflow": {"cheap": [{"price": 5}]}}),
        ),
        (
            "transform reduce",
            t(
                json!([{"type": "transform", "input": "workflow.items", "op": "reduce", "expr": "acc + item.price", "initial": 0, "into": "result.total"}]),
            ),
            "{}",
            json!({"items": [{"price": 1}, {"price": 5}]}),
            vec![],
            json!({"output": {"data": {"total": 6}}}),
        ),
        (
            "transform map through the template engine, items read in place",
            t(
                json!([{"type": "transform", "input": "{{workflow.items}}", "op": "map", "expr": "item.name | upper", "into": "result.names"}]),
            ),
            "{}",
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
            vec![],
            json!({"output": {"data": {"names": ["A", "B"]}}}),
        ),
        (
            "transform filter through the template engine keeps whole items",
            t(
                json!([{"type": "transform", "input": "workflow.items", "op": "filter", "expr": "item.tags | length > 1", "into": "tagged"}]),
            ),
            "{}",
            json!({"items": [{"tags": ["x"]}, {"tags": ["x", "y"], "n": 2}]}),
            vec![],
            json!({"workflow": {"tagged": [{"tags": ["x", "y"], "n": 2}]}}),
        ),
        (
            "transform reduce through the template engine",
            t(
                json!([{"type": "transform", "input": "workflow.items | reverse | list", "op": "reduce", "expr": "acc ~ item.name", "initial": "", "into": "result.joined"}]),
            ),
            "{}",
            json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            vec![],
            json!({"output": {"data": {"joined": "cba"}}}),
        ),
        (
            "transform over the list it replaces",
            t(
                json!([{"type": "transform", "input": "{{workflow.items}}", "op": "map", "expr": "item + 1", "into": "workflow.items"}, {"type": "transform", "input": "{{workflow.items}}", "op": "map", "expr": "item * 10", "into": "result.items"}]),
            ),
            "{}",
            json!({"items": [1, 2]}),
            vec![],
            json!({"workflow": {"items": [2, 3]}, "output": {"data": {"items": [20, 30]}}}),
        ),
        (
            "log",
            t(json!([{"type": "log", "level": "warn", "message": "n is {{params.n}}"}])),
            r#"{"n": 1}"#,
            json!({}),
            vec![],
            json!({"logs": ["n is 1"]}),
        ),
        (
            "respond: the last one wins",
            t(
                json!([{"type": "respond", "message": "first"}, {"type": "respond", "message": "second"}]),
            ),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"message": "second"}}),
        ),
        (
            "handoff",
            t(json!([{"type": "handoff", "agent": "billing", "reason": "invoice question"}])),
            "{}",
            json!({}),
            vec![],
            json!({"handoff": {"agent": "billing", "reason": "invoice question"}}),
        ),
        (
            "handoff to an unknown agent",
            t(json!([{"type": "handoff", "agent": "sales"}])),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"ok": false, "error": "handoff_failed", "details": {"valid_agents": ["meal", "billing"]}}, "handoff": null}),
        ),
        (
            "validate passes",
            t(
                json!([{"type": "validate", "rules": [{"check": "params.n is defined and params.n > 0", "message": "n must be positive"}]}, {"type": "respond", "message": "ok"}]),
            ),
            r#"{"n": 1}"#,
            json!({}),
            vec![],
            json!({"output": {"ok": true, "message": "ok"}}),
        ),
        (
            "validate renders its message",
            t(
                json!([{"type": "validate", "rules": [{"check": "params.n > 0", "message": "{{params.n}} is not positive"}]}]),
            ),
            r#"{"n": -3}"#,
            json!({}),
            vec![],
            json!({"output": {"ok": false, "error": "validation_failed", "message": "-3 is not positive"}}),
        ),
        (
            "now is passed in",
            t(json!([{"type": "context.set", "data": {"at": "{{now}}"}}])),
            "{}",
            json!({}),
            vec![],
            json!({"workflow": {"at": "2026-11-23T10:00:05Z"}}),
        ),
        (
            "config scope",
            t(json!([{"type": "respond", "message": "region {{config.region}}"}])),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"message": "region eu"}}),
        ),
        (
            "undefined at run time fails the tool",
            t(json!([{"type": "respond", "message": "{{ workflow.nothing.deeper }}"}])),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"ok": false, "error": "tool_execution_failed"}}),
        ),
        (
            "writing into a non-object fails",
            t(json!([{"type": "context.set", "data": {"s.x": 1}}])),
            "{}",
            json!({"s": "text"}),
            vec![],
            json!({"output": {"ok": false, "error": "tool_execution_failed"}, "workflow": {"s": "text"}}),
        ),
        (
            "context over its limit fails",
            t(json!([{"type": "context.set", "data": {"big": "{{ 'x' * 5000 }}"}}])),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"ok": false, "error": "tool_execution_failed"}, "workflow": {}}),
        ),
        (
            "api_call GET with query and response_path",
            t(
                json!([{"type": "api_call", "method": "get", "url": "https://crm.example.com/orders/{{params.n}}", "query": {"expand": ["items", "notes"], "limit": 5}, "headers": {"Authorization": "Bearer {{user.auth_token}}"}, "response_path": "order"}, {"type": "respond", "message": "status {{response.status}}"}]),
            ),
            r#"{"n": 12}"#,
            json!({}),
            vec![http(200, json!({"id": 12}))],
            json!({"workflow": {"order": {"id": 12}}, "output": {"message": "status 200"},
                   "effects": [{"method": "GET", "url": "https://crm.example.com/orders/12", "query": [["expand", "items"], ["expand", "notes"], ["limit", "5"]],
                                "headers": [["Authorization", "Bearer tok_secret"]]}]}),
        ),
        (
            "api_call on_error continue",
            t(
                json!([{"type": "api_call", "url": "https://x.example.com/a", "on_error": "continue"}, {"type": "respond", "message": "went on after {{response.status}}"}]),
            ),
            "{}",
            json!({}),
            vec![http(500, json!(null))],
            json!({"output": {"ok": true, "message": "went on after 500"}}),
        ),
        (
            "transfer to a destination",
            t(json!([{"type": "transfer", "destination": "support", "reason": "broken router"}])),
            "{}",
            json!({}),
            vec![done(json!(null))],
            json!({"effects": [{"kind": "transfer", "target_uri": "tel:+14155552000", "destination_id": "support", "idempotency_key": "rtc_1-transfer-tel:+14155552000"}],
                   "output": {"ok": true, "data": {"transfer": "requested", "target_uri": "tel:+14155552000", "destination_id": "support", "reason": "broken router"}}}),
        ),
        (
            "transfer to an unknown destination",
            t(json!([{"type": "transfer", "destination": "legal"}])),
            "{}",
            json!({}),
            vec![],
            json!({"effects": [], "output": {"ok": false, "error": "call_transfer_failed", "details": {"valid_destination_ids": ["sales", "support"]}}}),
        ),
        (
            "transfer the REFER of which fails",
            t(json!([{"type": "transfer", "target_uri": "sip:agent@example.com"}])),
            "{}",
            json!({}),
            vec![EffectOutcome::Failed(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                "404 call_id_not_found",
            ))],
            json!({"output": {"ok": false, "error": "call_transfer_failed", "message": "Failed to transfer the call. Please handle the call without transfer."}}),
        ),
        (
            "end_call",
            t(json!([{"type": "end_call", "message": "Goodbye!"}])),
            "{}",
            json!({}),
            vec![done(json!(null))],
            json!({"effects": [{"kind": "end_call", "message": "Goodbye!"}], "output": {"ok": true, "data": {"call": "ending"}}}),
        ),
        (
            "mcp.call",
            t(
                json!([{"type": "mcp.call", "server": "crm", "tool": "lookup", "arguments": {"id": "{{params.n}}"}, "into": "result.customer"}]),
            ),
            r#"{"n": 8}"#,
            json!({}),
            vec![done(json!({"name": "Ada"}))],
            json!({"effects": [{"kind": "mcp", "server": "crm", "tool": "lookup", "arguments": {"id": 8}, "idempotency_key": "rtc_1-call_001-0"}],
                   "output": {"data": {"customer": {"name": "Ada"}}}}),
        ),
        (
            "mcp.call passing the arguments through whole",
            t(
                json!([{"type": "mcp.call", "server": "crm", "tool": "lookup", "arguments": "{{params}}", "into": "result"}]),
            ),
            r#"{"n": 8}"#,
            json!({}),
            vec![done(json!({"name": "Ada"}))],
            json!({"effects": [{"kind": "mcp", "server": "crm", "tool": "lookup", "arguments": {"n": 8}}],
                   "output": {"ok": true, "data": {"name": "Ada"}}}),
        ),
        (
            "mcp.call whose arguments template renders to a non-object",
            t(
                json!([{"type": "mcp.call", "server": "crm", "tool": "lookup", "arguments": "{{params.n}}"}]),
            ),
            r#"{"n": 8}"#,
            json!({}),
            vec![],
            json!({"effects": [], "output": {"ok": false, "error": "tool_execution_failed"}}),
        ),
        (
            "result written whole",
            t(json!([{"type": "context.set", "data": {"result": {"a": 1}}}])),
            "{}",
            json!({}),
            vec![],
            json!({"output": {"data": {"a": 1}}}),
        ),
    ];
    for (name, tool, args, workflow, outcomes, expected) in cases {
        let actual = run(&tool, args, workflow, outcomes);
        let result = std::panic::catch_unwind(|| assert_subset(&expected, &actual, ""));
        assert!(result.is_ok(), "case `{name}` failed; actual: {actual:#}");
    }
}

#[test]
fn on_failure_writes_commit_but_the_failed_actions_do_not() {
    check(
        json!({
            "name": "order", "description": "Place an order",
            "actions": [
                {"type": "context.set", "data": {"draft": true}},
                {"type": "api_call", "url": "https://shop.example.com/orders"}
            ],
            "on_failure": [
                {"type": "context.set", "data": {"failed_orders[+]": "{{response.status}}"}},
                {"type": "flag.set", "flags": ["order_failed"]},
                {"type": "handoff", "agent": "billing"}
            ]
        }),
        "{}",
        json!({}),
        vec![http(502, json!(null))],
        json!({"workflow": {"failed_orders": [502]}, "flags": {"order_failed": true}, "handoff": {"agent": "billing"}}),
    );
}

#[test]
fn a_failing_on_success_turns_into_a_failure() {
    check(
        json!({
            "name": "t", "description": "d",
            "actions": [{"type": "context.set", "data": {"x": 1}}],
            "on_success": [{"type": "respond", "message": "{{ workflow.missing.key }}"}],
            "on_failure": [{"type": "respond", "message": "Something went wrong."}]
        }),
        "{}",
        json!({}),
        vec![],
        json!({"workflow": {}, "output": {"ok": false, "error": "tool_execution_failed", "message": "Something went wrong."}}),
    );
}

#[test]
fn secrets_are_readable_by_templates() {
    // The secrets scope feeds headers; the runtime redacts its values from anything it records.
    let tool = json!({"name": "t", "description": "d", "actions": [
        {"type": "api_call", "method": "GET", "url": "https://x.example.com", "headers": {"X-Key": "{{secrets.api_key}}"}}]});
    let tool = Arc::new(Tool::parse(&tool, &Limits::default()).unwrap());
    let ctx = Context::new(&call(), json!({}));
    let input = RunInput {
        secrets: Arc::new(json!({"api_key": "k-123"})),
        ..RunInput::new("c")
    };
    let mut seen = None;
    run_to_end(&tool, input, "{}", &ctx, |req| {
        seen = Some(serde_json::to_value(req).unwrap());
        http(200, json!({}))
    });
    assert_eq!(seen.unwrap()["headers"], json!([["X-Key", "k-123"]]));
}
