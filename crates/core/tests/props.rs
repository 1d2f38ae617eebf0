//! Properties of the core: no input panics it, and a run checkpointed at any effect, serialised,
//! and resumed (here, as in another process) ends exactly as an uninterrupted run does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use switchboard_core::context::{Keys, Scope, Write};
use switchboard_core::effect::HttpResponse;
use switchboard_core::{
    CallInfo, Context, EffectOutcome, ErrorCode, Limits, RunInput, Step, Suspended, Tool,
    ToolError, start,
};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|n| json!(n)),
        "[a-z_.{}\\[\\]+ |%-]{0,24}".prop_map(Value::String),
        prop::sample::select(vec![
            "{{params}}",
            "{{ params.x | length }}",
            "{{",
            "}}",
            "{% if %}",
            "a{{b}}c",
            "{{ user.id ~ 1 }}"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        let keys = prop::sample::select(vec![
            "name",
            "description",
            "parameters",
            "actions",
            "on_success",
            "on_failure",
            "type",
            "data",
            "url",
            "method",
            "body",
            "rules",
            "check",
            "message",
            "if",
            "then",
            "else",
            "paths",
            "into",
            "flags",
            "input",
            "op",
            "expr",
            "initial",
            "enum",
            "required",
            "default",
            "min_value",
            "max_value",
            "items",
            "timeout",
            "side_effect",
            "messages",
            "agent",
            "destination",
            "target_uri",
            "server",
            "tool",
            "arguments",
            "response_path",
            "headers",
            "query",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..8).prop_map(|kv| Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>()
            )),
        ]
    })
}

/// A plausible tool: the right top-level keys with arbitrary values inside.
fn arb_tool_shaped() -> impl Strategy<Value = Value> {
    let types = prop::sample::select(switchboard_core::ACTION_TYPES.to_vec());
    let action = (types, arb_json()).prop_map(|(t, v)| {
        let mut m = match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        m.insert("type".into(), json!(t));
        Value::Object(m)
    });
    (prop::collection::vec(action, 0..6), arb_json()).prop_map(|(actions, params)| {
        json!({"name": "t", "description": "d", "parameters": params, "actions": actions, "on_failure": [{"type": "respond", "message": "x"}]})
    })
}

fn ctx() -> Context {
    let call = CallInfo {
        id: "c1".into(),
        tenant_id: "t".into(),
        agent: "a".into(),
        from: None,
        to: None,
        started_at: "2026-01-01T00:00:00Z".into(),
    };
    Context::new(&call, json!({"id": "u1"}))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics_the_parser(def in arb_json()) {
        let _ = Tool::parse(&def, &Limits::default());
    }

    #[test]
    fn tool_shaped_json_never_panics_parser_or_interpreter(def in arb_tool_shaped(), args in arb_json()) {
        if let Ok(tool) = Tool::parse(&def, &Limits::default()) {
            let tool = Arc::new(tool);
            let outcome = switchboard_core::run_to_end(&tool, RunInput::new("f"), &args.to_string(), &ctx(), |_| EffectOutcome::Done { value: Value::Null });
            // Whatever happened, the model gets one well-formed answer.
            prop_assert!(outcome.output().get("ok").is_some());
        }
    }

    #[test]
    fn arbitrary_arguments_never_panic(args in ".{0,64}") {
        let def: Value = serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap();
        let tool = Arc::new(Tool::parse(&def, &Limits::default()).unwrap());
        let out = switchboard_core::run_to_end(&tool, RunInput::new("f"), &args, &ctx(), |_| EffectOutcome::Done { value: Value::Null });
        prop_assert!(out.ok() || out.code().is_some());
    }
}

/// A tool with several effects, branches on their results, and writes between them.
fn effectful_tool() -> Arc<Tool> {
    let def = json!({
        "name": "multi", "description": "several effects",
        "parameters": [{"name": "n", "type": "integer", "default": 1}],
        "actions": [
            {"type": "context.set", "data": {"trail[+]": "start {{params.n}}"}},
            {"type": "api_call", "url": "https://a.example.com/x", "on_error": "continue", "response_path": "first"},
            {"type": "conditional", "if": "response.status == 200",
             "then": [{"type": "context.set", "data": {"trail[+]": "ok"}}, {"type": "mcp.call", "server": "s", "tool": "t", "into": "mcp"}],
             "else": [{"type": "flag.set", "flags": ["degraded"]}]},
            {"type": "api_call", "method": "GET", "url": "https://b.example.com/y?n={{params.n}}", "response_path": "second"},
            {"type": "respond", "message": "done with {{ workflow.trail | length }} steps"}
        ],
        "on_failure": [{"type": "context.set", "data": {"failures[+]": "{{ response.status }}"}}]
    });
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap())
}

fn arb_outcome() -> impl Strategy<Value = EffectOutcome> {
    prop_oneof![
        (
            prop::sample::select(vec![200u16, 201, 404, 500, 503]),
            arb_json()
        )
            .prop_map(|(status, body)| EffectOutcome::Http(HttpResponse {
                status,
                headers: Map::new(),
                body
            })),
        arb_json().prop_map(|value| EffectOutcome::Done { value }),
        Just(EffectOutcome::Failed(ToolError::new(
            ErrorCode::Timeout,
            "timed out"
        ))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn checkpointed_runs_end_as_uninterrupted_ones(n in 0i64..100, outcomes in prop::collection::vec(arb_outcome(), 4)) {
        let tool = effectful_tool();
        let args = json!({"n": n}).to_string();
        let input = RunInput::new("fc");

        let mut it = outcomes.clone().into_iter();
        let straight = switchboard_core::run_to_end(&tool, input.clone(), &args, &ctx(), |_| it.next().unwrap());

        // The same run, but every suspension goes through JSON, as a checkpoint would.
        let mut it = outcomes.into_iter();
        let mut step = start(&tool, input, &args, &ctx());
        let resumed = loop {
            match step {
                Step::Done(o) => break o,
                Step::Effect(_, suspended) => {
                    let saved = serde_json::to_string(&suspended).unwrap();
                    drop(suspended);
                    let restored: Suspended = serde_json::from_str(&saved).unwrap();
                    step = restored.resume(it.next().unwrap());
                }
            }
        };
        prop_assert_eq!(&straight, &resumed);

        // Replaying the recorded outcomes is deterministic.
        prop_assert_eq!(straight.output(), resumed.output());
    }
}

fn arb_write() -> impl Strategy<Value = Write> {
    let keys = prop::collection::vec(
        prop::sample::select(vec!["a", "b", "list", "profile", "x"]).prop_map(str::to_owned),
        0..4,
    )
    .prop_map(Keys::from);
    let scope = prop_oneof![
        Just(Scope::Workflow),
        prop::sample::select(vec!["a", "meal", "billing"]).prop_map(|a| Scope::Agent(a.into())),
    ];
    let flag = prop::sample::select(vec!["vip", "done"]).prop_map(|f| -> Arc<str> { f.into() });
    prop_oneof![
        (scope.clone(), keys.clone(), arb_json()).prop_map(|(scope, keys, value)| Write::Set {
            scope,
            keys,
            value
        }),
        (scope.clone(), keys.clone(), arb_json()).prop_map(|(scope, keys, value)| Write::Append {
            scope,
            keys,
            value
        }),
        (scope, keys).prop_map(|(scope, keys)| Write::Delete { scope, keys }),
        flag.clone().prop_map(|name| Write::SetFlag { name }),
        flag.prop_map(|name| Write::ClearFlag { name }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A write never grows a context by more than its bound, whatever the context holds (the
    /// commit of a run's copy skips measuring a context the run bounded within its limit).
    #[test]
    fn a_write_grows_a_context_by_at_most_its_bound(writes in prop::collection::vec(arb_write(), 1..12)) {
        let mut c = ctx();
        for w in writes {
            let before = c.approx_size();
            if c.apply(&w).is_ok() {
                let after = c.approx_size();
                prop_assert!(
                    after <= before + w.size().bound,
                    "{w:?} grew the context from {before} to {after} bytes, over its bound of {}",
                    w.size().bound
                );
            }
        }
    }
}
