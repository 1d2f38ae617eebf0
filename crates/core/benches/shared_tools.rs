//! The three tools of the side-by-side set (`benches/data/`), each timed as the Python design
//! was: from the arguments' JSON text to the JSON string the model receives, on a fresh call
//! context (`user` = `{"id": "u-1", "auth_token": "tok"}`, empty `workflow`) every time.
//!
//! One iteration is what a call session does for a tool without I/O, less its task and channel
//! hops: the depth check and argument validation, the run (templates, `validate`, `transform`,
//! the run's own copy of the context), the in-memory commit of its writes to the call's context
//! (all on a copy, then the `max_context_bytes` check, as the session's commit does), and the
//! output envelope rendered to its JSON string.
//!
//! `cargo bench -p switchboard-core --bench shared_tools`; figures go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use switchboard_core::{
    CallInfo, Context, Limits, Outcome, RunInput, Step, Tool, ToolResult, start,
};

/// The allocator the `switchboard` binary runs with, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// (name, definition, arguments, the output the model must receive).
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "log_meal",
        include_str!("data/log_meal.json"),
        r#"{"meal_type":"lunch","dishes":["soup","salad"]}"#,
        r#"{"ok":true,"message":"I've logged your lunch!","data":{}}"#,
    ),
    (
        "book_slot",
        include_str!("data/book_slot.json"),
        r#"{"title":"Checkup","start_time":"2026-12-01T09:00:00Z"}"#,
        r#"{"ok":true,"message":"Booked Checkup for 30 minutes.","data":{"total_minutes":30}}"#,
    ),
    (
        "save_meal",
        include_str!("data/save_meal.json"),
        r#"{"meal_type":"lunch","dishes":["soup","salad"]}"#,
        r#"{"ok":true,"message":"I've logged your lunch!","data":{}}"#,
    ),
];

fn fresh_context() -> Context {
    let call = CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme".into(),
        agent: "meal".into(),
        from: None,
        to: None,
        started_at: "2026-11-24T10:00:00Z".into(),
    };
    Context::new(&call, json!({"id": "u-1", "auth_token": "tok"}))
}

/// One invocation: arguments text in, the model's output text out; the committed context is
/// returned too so that nothing of the commit is optimised away.
fn invoke(tool: &Arc<Tool>, fresh: &Context, arguments: &str) -> (String, Context) {
    let ctx = fresh.clone();
    let mut outcome = match start(tool, RunInput::new("call_1"), arguments, &ctx) {
        Step::Done(o) => o,
        Step::Effect(..) => panic!("the shared tools perform no effects"),
    };
    let output = ToolResult::from_outcome("call_1", &outcome).output;
    let committed = commit(&ctx, &mut outcome, tool.limits().max_context_bytes);
    (output, committed)
}

/// The call session's in-memory commit (the runtime's `apply_outcome`), after the answer is
/// rendered: from the run's own copy of the context when the call's is still the one the run
/// read (applying the writes it does not hold yet), else every write on a copy of the context,
/// the writes' values moved rather than copied; then its size against the limit, unless the
/// run bounded it within; all or nothing.
fn commit(ctx: &Context, outcome: &mut Outcome, limit: usize) -> Context {
    let writes = std::mem::take(&mut outcome.writes);
    let (mut next, holds, bound) = match outcome.applied.onto(ctx) {
        Some(o) => (o.context.clone(), o.holds, Some(o.size_bound)),
        None => (ctx.clone(), 0, None),
    };
    let measure = !writes.is_empty() && bound.is_none_or(|b| b > limit);
    for w in writes.into_iter().skip(holds) {
        next.apply_owned(w).unwrap();
    }
    if measure {
        let size = next.approx_size();
        assert!(size <= limit || size <= ctx.approx_size());
    }
    next
}

fn bench_shared_tools(c: &mut Criterion) {
    let fresh = fresh_context();
    for (name, def, arguments, want) in CASES {
        let def: Value = serde_json::from_str(def).unwrap();
        let tool = Arc::new(Tool::parse(&def, &Limits::default()).unwrap());
        let (output, committed) = invoke(&tool, &fresh, arguments);
        assert_eq!(&output, want, "{name}");
        assert_ne!(
            committed.workflow, fresh.workflow,
            "{name} writes the context"
        );
        c.bench_function(&format!("shared_tools/{name}"), |b| {
            b.iter(|| invoke(&tool, &fresh, black_box(arguments)))
        });
    }
}

criterion_group!(benches, bench_shared_tools);
criterion_main!(benches);
