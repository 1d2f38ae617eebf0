//! One evaluation pass: every rule's figures from the database, compared, and a change of
//! state recorded with a compare-and-set, so a change seen by several nodes is recorded once.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_store::{StoreError, WindowFigures};

use super::MAX_RULES_PER_PASS;
use super::rules::{Condition, Rule};
use crate::state::AppState;

/// How long breaker openings are kept for the rules to see (the longest `window_s`).
const SIGNALS_KEPT: Duration = Duration::from_secs(86_400);

/// Evaluates every rule once; answers how many transitions this node recorded.
pub async fn pass(state: &AppState) -> Result<usize, StoreError> {
    let rules = state.store.all_alert_rules(MAX_RULES_PER_PASS).await?;
    let now = state.store.db_now().await?;
    let mut recorded = 0;
    for (tenant, row) in rules {
        let Some(rule) = Rule::stored(&row.id, &row.definition) else {
            tracing::warn!(name: "alert_rule_unreadable", tenant_id = %tenant, rule = %row.id, "alert_rule_unreadable");
            continue;
        };
        let (firing, detail) = match check(state, &tenant, &rule.condition, &now).await {
            Ok(seen) => seen,
            Err(e) => {
                tracing::warn!(name: "alert_rule_failed", tenant_id = %tenant, rule = %row.id, error = %e, "alert_rule_failed");
                continue;
            }
        };
        if firing == (row.state == "firing") {
            continue;
        }
        if let Some(event) = state
            .store
            .transition_alert(&tenant, &row, firing, &detail, &rule.channels())
            .await?
        {
            recorded += 1;
            tracing::warn!(name: "alert_transition", tenant_id = %tenant, rule = %row.id, state = %event.state, seq = event.seq, "alert_transition");
        }
    }
    let _ = state.store.prune_alert_signals(&now, SIGNALS_KEPT).await;
    Ok(recorded)
}

/// Whether the condition holds now, and the figures it compared.
async fn check(
    state: &AppState,
    tenant: &str,
    condition: &Condition,
    now: &str,
) -> Result<(bool, Value), StoreError> {
    let store = &state.store;
    Ok(match condition {
        Condition::FailureRate {
            tool,
            above_percent,
            min_calls,
            window_s,
        } => {
            let f = store
                .tool_window(tenant, tool, now, secs(*window_s))
                .await?;
            let percent = failure_percent(&f);
            let firing = f.calls >= u64::from(*min_calls) && percent > f64::from(*above_percent);
            (
                firing,
                json!({"tool": tool, "calls": f.calls, "failures": f.failures,
                       "failure_percent": round1(percent), "window_s": window_s}),
            )
        }
        Condition::LatencyP95 {
            tool,
            above_ms,
            min_calls,
            window_s,
        } => {
            let f = store
                .tool_window(tenant, tool, now, secs(*window_s))
                .await?;
            let p95 = quantile(&f.latencies_ms, 0.95);
            let firing = f.calls >= u64::from(*min_calls) && p95 > f64::from(*above_ms);
            (
                firing,
                json!({"tool": tool, "calls": f.calls, "p95_ms": round1(p95), "window_s": window_s}),
            )
        }
        Condition::BreakerOpen { upstream, window_s } => {
            let open = store
                .breakers_opened_since(tenant, upstream.as_deref(), now, secs(*window_s))
                .await?;
            (
                !open.is_empty(),
                json!({"upstreams": open, "window_s": window_s}),
            )
        }
        Condition::ConnectionBroken { agent } => {
            let broken = store.broken_connections(tenant, agent.as_deref()).await?;
            (!broken.is_empty(), json!({"agents": broken}))
        }
        Condition::LiveCallCap { at_percent } => {
            let live = store.tenant_live_calls(tenant).await?;
            let cap = i64::try_from(state.config.max_calls_per_tenant).unwrap_or(i64::MAX);
            let firing = live.saturating_mul(100) >= cap.saturating_mul(i64::from(*at_percent));
            (
                firing,
                json!({"live_calls": live, "max_calls_per_tenant": cap}),
            )
        }
    })
}

fn secs(s: u32) -> Duration {
    Duration::from_secs(u64::from(s))
}

fn failure_percent(f: &WindowFigures) -> f64 {
    if f.calls == 0 {
        0.0
    } else {
        f.failures as f64 * 100.0 / f.calls as f64
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The `p` quantile (nearest rank) of sorted values; 0 for none.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn p95_is_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.95), 95.0);
        assert_eq!(quantile(&[7.0], 0.95), 7.0);
        assert_eq!(quantile(&[], 0.95), 0.0);
    }
}
