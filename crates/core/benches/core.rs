//! Core benchmarks: parsing, interpreting, templates, toolsets. Figures go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use switchboard_core::builder::{Format, Toolset};
use switchboard_core::template::{StrTemplate, VarRef, Vars};
use switchboard_core::{CallInfo, Context, EffectOutcome, Limits, RunInput, Step, Tool, start};

fn save_meal() -> Value {
    serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap()
}

/// save_meal without its api_call: validate, two context writes, a flag, a conditional, respond.
fn save_meal_local() -> Value {
    json!({
        "name": "save_meal",
        "description": "Log a meal the user consumed",
        "parameters": [
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true}
        ],
        "actions": [
            {"type": "validate", "rules": [{"check": "params.dishes | length > 0", "message": "Ask which dishes."}]},
            {"type": "context.set", "data": {"logged_meals[+]": "{{params}}", "last_meal": "{{params.meal_type}}"}},
            {"type": "flag.set", "flags": ["meal_logged"]},
            {"type": "conditional", "if": "params.meal_type == 'dinner'", "then": [{"type": "context.set", "data": {"day_done": true}}]}
        ],
        "on_success": [{"type": "respond", "message": "I've logged your {{params.meal_type}}!"}]
    })
}

fn context() -> Context {
    let call = CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme".into(),
        agent: "meal".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    };
    let mut ctx = Context::new(&call, json!({"id": "u1", "auth_token": "t"}));
    ctx.workflow = Arc::new(
        json!({"logged_meals": [{"meal_type": "breakfast", "dishes": ["eggs"]}], "profile": {"name": "Ada", "diet": "none"}}),
    );
    ctx
}

fn bench_parse(c: &mut Criterion) {
    let def = save_meal();
    c.bench_function("parse_compile/save_meal", |b| {
        b.iter(|| Tool::parse(black_box(&def), &Limits::default()).unwrap())
    });
}

fn bench_interpret(c: &mut Criterion) {
    let tool = Arc::new(Tool::parse(&save_meal_local(), &Limits::default()).unwrap());
    let ctx = context();
    let args = r#"{"meal_type":"dinner","dishes":["soup","bread"]}"#;
    c.bench_function("interpret/save_meal_local", |b| {
        b.iter(
            || match start(&tool, RunInput::new("call_1"), black_box(args), &ctx) {
                Step::Done(o) => black_box(o),
                Step::Effect(..) => unreachable!(),
            },
        )
    });
    let with_api = Arc::new(Tool::parse(&save_meal(), &Limits::default()).unwrap());
    c.bench_function("interpret/save_meal_with_stubbed_api_call", |b| {
        b.iter(|| {
            switchboard_core::run_to_end(
                &with_api,
                RunInput::new("call_1"),
                black_box(args),
                &ctx,
                |_| EffectOutcome::Done { value: Value::Null },
            )
        })
    });
}

/// A `transform` over 100 items: the per-item cost of the transform's budget shows here.
fn bench_transform(c: &mut Criterion) {
    let tool = Arc::new(
        Tool::parse(
            &json!({"name": "double", "description": "Double the prices",
                    "actions": [{"type": "transform", "input": "workflow.items", "op": "map",
                                 "expr": "{'name': item.name, 'price': item.price * 2}",
                                 "into": "result.doubled"}]}),
            &Limits::default(),
        )
        .unwrap(),
    );
    let mut ctx = context();
    let items: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("dish {i}"), "price": i}))
        .collect();
    ctx.workflow = Arc::new(json!({ "items": items }));
    c.bench_function("interpret/transform_map_100", |b| {
        b.iter(
            || match start(&tool, RunInput::new("call_1"), black_box("{}"), &ctx) {
                Step::Done(o) => black_box(o),
                Step::Effect(..) => unreachable!(),
            },
        )
    });
}

fn bench_templates(c: &mut Criterion) {
    let params = Arc::new(json!({"meal_type": "lunch", "dishes": ["soup", "bread"], "count": 3}));
    let workflow = Arc::new(json!({"profile": {"name": "Ada"}}));
    let entries = [
        ("params", VarRef::whole(&params)),
        ("workflow", VarRef::whole(&workflow)),
    ];
    let vars = Vars::new(&entries);
    let cases = [
        ("path", "{{params.meal_type}}"),
        ("whole_object", "{{params}}"),
        (
            "text_two_paths",
            "Hi {{workflow.profile.name}}, I logged your {{params.meal_type}}!",
        ),
        (
            "expression",
            "{{ params.dishes | length > 1 and params.count * 2 > 4 }}",
        ),
        ("filter_text", "You had {{ params.dishes | join(', ') }}."),
    ];
    for (name, src) in cases {
        let t = StrTemplate::compile(src).unwrap();
        c.bench_function(&format!("template/{name}"), |b| {
            b.iter(|| t.eval(black_box(&vars), 65_536).unwrap())
        });
    }
}

fn bench_toolset(c: &mut Criterion) {
    let tools: Vec<Arc<Tool>> = (0..50)
        .map(|i| {
            let mut def = save_meal();
            def["name"] = json!(format!("tool_{i}"));
            Arc::new(Tool::parse(&def, &Limits::default()).unwrap())
        })
        .collect();
    // From 50 compiled (cached) tools to the JSON a session.update carries.
    c.bench_function("toolset/50_tools_build_and_render_json", |b| {
        b.iter(|| {
            let set = Toolset::build(tools.iter().map(|t| t.function_def(false)), None).unwrap();
            black_box(set.render_json(Format::OpenAiRealtime))
        })
    });
    let set = Toolset::build(tools.iter().map(|t| t.function_def(false)), None).unwrap();
    c.bench_function("toolset/50_tools_render_json", |b| {
        b.iter(|| set.render_json(black_box(Format::OpenAiRealtime)))
    });
}

criterion_group!(
    benches,
    bench_parse,
    bench_interpret,
    bench_transform,
    bench_templates,
    bench_toolset
);
criterion_main!(benches);
