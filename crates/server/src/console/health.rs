//! The health page: per tool, the outcome mix, latency percentiles and, per minute, the
//! invocations and the p95 latency over the tenant's newest invocations, drawn as
//! server-rendered SVG; circuit breakers open now; the tenant's live calls per node.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};

use super::pages::{error_page, nav};
use super::{Operator, render};
use crate::state::AppState;

/// How many of the tenant's newest invocations the page reads.
const HEALTH_RECORDS: usize = 2_000;
/// How many minutes a chart shows (the newest).
const MINUTES: usize = 60;
/// A chart's drawing height, in SVG units.
const HEIGHT: f64 = 40.0;
/// The width of one minute in a chart, in SVG units.
const STEP: usize = 6;

#[derive(Default)]
struct Stats {
    latencies: Vec<f64>,
    errors: BTreeMap<String, u64>,
    /// Per minute (`YYYY-MM-DDTHH:MM`), the latencies of its invocations.
    per_minute: BTreeMap<String, Vec<f64>>,
    hosts: BTreeSet<String>,
}

/// The `p` quantile (nearest rank) of sorted values.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

pub async fn health(State(state): State<AppState>, op: Operator) -> Response {
    let records = match state
        .store
        .recent_invocations_of_tenant(&op.tenant, HEALTH_RECORDS)
        .await
    {
        Ok(r) => r,
        Err(e) => return error_page(&e.into()),
    };
    let nodes = match state.store.live_calls_by_node(&op.tenant).await {
        Ok(n) => n,
        Err(e) => return error_page(&e.into()),
    };
    let mut by_tool: BTreeMap<String, Stats> = BTreeMap::new();
    for r in &records {
        let s = by_tool.entry(r.record.tool.clone()).or_default();
        s.latencies.push(r.record.latency_ms);
        let outcome = r.record.error.map_or("ok", |e| e.as_str());
        *s.errors.entry(outcome.to_owned()).or_default() += 1;
        let minute: String = r.record.started_at.chars().take(16).collect();
        s.per_minute
            .entry(minute)
            .or_default()
            .push(r.record.latency_ms);
        if let Some(t) = &r.record.trace {
            for e in &t.effects {
                if let switchboard_core::EffectRequest::Http(h) = &e.request
                    && let Some(host) = host_port(&h.url)
                {
                    s.hosts.insert(host);
                }
            }
        }
    }
    let tools: Vec<Value> = by_tool
        .into_iter()
        .map(|(name, s)| tool_view(&state, &op.tenant, name, s))
        .collect();
    let busiest = nodes.iter().map(|n| n.calls).max().unwrap_or(1).max(1);
    let node_rows: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let width = (n.calls as f64 / busiest as f64 * 200.0).round().max(1.0);
            json!({"node": n.node, "here": n.node.as_deref() == Some(state.node.id.as_str()),
                   "alive": n.alive, "calls": n.calls, "y": i * 14, "width": width})
        })
        .collect();
    render(
        "health.html",
        json!({"nav": nav(&op, "health"), "tools": tools, "records": records.len(),
               "live_here": state.calls.count(&op.tenant), "node_total": state.calls.total(),
               "nodes": node_rows, "nodes_height": (node_rows.len() * 14).max(14)}),
    )
}

/// One tool's figures and charts.
fn tool_view(state: &AppState, tenant: &str, name: String, mut s: Stats) -> Value {
    s.latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| format!("{:.1}", quantile(&s.latencies, p));
    let total: u64 = s.errors.values().sum();
    let newest: Vec<(String, Vec<f64>)> = {
        let mut minutes: Vec<(String, Vec<f64>)> = s.per_minute.into_iter().collect();
        let skip = minutes.len().saturating_sub(MINUTES);
        minutes.drain(..skip);
        minutes
            .into_iter()
            .map(|(m, mut l)| {
                l.sort_by(f64::total_cmp);
                (m, l)
            })
            .collect()
    };
    let most = newest
        .iter()
        .map(|(_, l)| l.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let bars: Vec<Value> = newest
        .iter()
        .enumerate()
        .map(|(i, (minute, l))| {
            let h = (l.len() as f64 / most as f64 * HEIGHT).round().max(1.0);
            json!({"x": i * STEP, "y": HEIGHT - h, "h": h, "label": format!("{minute}: {}", l.len())})
        })
        .collect();
    let slowest = newest
        .iter()
        .map(|(_, l)| quantile(l, 0.95))
        .fold(0.0_f64, f64::max);
    let scale = if slowest > 0.0 { slowest } else { 1.0 };
    let p95_points: Vec<Value> = newest
        .iter()
        .enumerate()
        .map(|(i, (minute, l))| {
            let p95 = quantile(l, 0.95);
            let y = HEIGHT - (p95 / scale * (HEIGHT - 2.0)).max(0.0) - 1.0;
            json!({"x": i * STEP + STEP / 2, "y": format!("{y:.1}"), "label": format!("{minute}: p95 {p95:.1} ms")})
        })
        .collect();
    let line = p95_points
        .iter()
        .map(|p| format!("{},{}", p["x"], p["y"].as_str().unwrap_or("0")))
        .collect::<Vec<_>>()
        .join(" ");
    let open: Vec<String> = s
        .hosts
        .iter()
        .filter(|h| {
            !matches!(
                state.effects.http.breaker_state(tenant, h),
                switchboard_runtime::http::BreakerState::Closed
            )
        })
        .cloned()
        .collect();
    json!({"name": name, "total": total, "p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99),
           "errors": s.errors.iter().map(|(k, v)| json!({"code": k, "count": v})).collect::<Vec<_>>(),
           "bars": bars, "p95_line": line, "p95_points": p95_points,
           "p95_max": format!("{slowest:.1}"), "open_breakers": open})
}

/// `host:port` of a URL, as the breakers key hosts.
fn host_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        Some(authority.to_ascii_lowercase())
    } else {
        let port = if scheme == "http" { 80 } else { 443 };
        Some(format!("{}:{port}", authority.to_ascii_lowercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::{host_port, quantile};

    #[test]
    fn nearest_rank_quantiles() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert_eq!(quantile(&v, 0.95), 10.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(
            host_port("https://a.example/x").as_deref(),
            Some("a.example:443")
        );
    }
}
