//! The redactor on the hot path: built once per call, run on every answer, its arguments and
//! its log messages. Figures go to docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use switchboard_runtime::redact::Redactor;

/// An agent tool's sensitive config and a user context with a token: three secrets.
fn redactor() -> Redactor {
    Redactor::new(
        [&json!({"api_key": "sk-live-4f9a8b7c6d5e", "password": "hunter2-but+longer/=!"})],
        &json!({"id": "u_42", "auth_token": "tok_8c1d2e3f4a5b6c7d"}),
    )
}

/// An answer carrying an upstream's body of about 4 KB: URLs with query strings, HTML-ish text.
fn upstream_answer(secret: Option<&str>) -> String {
    let items: Vec<Value> = (0..24)
        .map(|i| {
            json!({
                "id": format!("ord_{i:04}"),
                "status": if i % 3 == 0 { "shipped" } else { "pending" },
                "href": format!("https://api.example.com/v2/orders/ord_{i:04}?expand=items&locale=en%2DUS"),
                "note": "Customer asked for delivery after 5pm & before 8pm; ring twice.",
                "total": 1234 + i,
            })
        })
        .collect();
    let mut data = json!({"orders": items, "page": 1});
    if let Some(s) = secret {
        data["debug"] = json!(format!("request was GET /v2/orders?key={s}&page=1"));
    }
    json!({"ok": true, "message": "You have 24 orders.", "data": data}).to_string()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("redact");
    g.bench_function("build_for_call", |b| b.iter(|| black_box(redactor())));
    let r = redactor();
    let small = r#"{"ok":true,"message":"I've logged your lunch!","data":{}}"#;
    g.bench_function("answer_small", |b| {
        b.iter(|| black_box(r.redact_json(small)))
    });
    let args = r#"{"meal_type":"lunch","dishes":["soup","bread"]}"#;
    g.bench_function("arguments_small", |b| {
        b.iter(|| black_box(r.redact_json(args)))
    });
    let clean = upstream_answer(None);
    g.bench_function("answer_4k_upstream_body", |b| {
        b.iter(|| black_box(r.redact_json(&clean)))
    });
    let leaky = upstream_answer(Some("sk-live-4f9a8b7c6d5e"));
    g.bench_function("answer_4k_with_a_secret", |b| {
        b.iter(|| black_box(r.redact_json(&leaky)))
    });
    let log = "lookup failed for u_42: upstream answered 401 (see https://api.example.com/v2/orders?page=1)";
    g.bench_function("log_line", |b| b.iter(|| black_box(r.redact(log))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
