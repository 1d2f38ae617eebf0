//! Alerts when tools break: a tenant's rules, evaluated by every node from what the database
//! holds, each change of state recorded once per cluster (a compare-and-set on the rule), and
//! notified as a signed webhook by whichever node leases it first.
//!
//! - `rules.rs`: a rule's definition, read once at save with each problem at its JSON Pointer.
//! - `evaluate.rs`: one pass over every rule: the figures it compares, and the transition.
//! - `deliver.rs`: the notifications: Standard Webhooks signed, retried with backoff under a
//!   lease, one `webhook-id` per transition across retries and nodes.
//!
//! Circuit breakers live in each node's memory, so a node notes each opening in the store
//! (`alert_signals`) for every node's evaluator to see.

use std::sync::Arc;
use std::time::Duration;

use crate::state::AppState;

pub mod deliver;
pub mod evaluate;
pub mod rules;

/// Alerts' settings (`ServerConfig::alerts`).
#[derive(Debug, Clone, Copy)]
pub struct AlertSettings {
    /// How often each node evaluates every rule (default 10 s).
    pub interval: Duration,
    /// Rules a tenant may have (default 50).
    pub max_rules_per_tenant: i64,
    /// The first retry's delay; each next one doubles, up to 5 minutes.
    pub retry_base: Duration,
    /// Attempts per notification before it is given up as `failed` (default 8).
    pub max_attempts: i64,
    /// How long one attempt may take (and a node holds its lease on a notification for twice that).
    pub timeout: Duration,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            interval: Duration::from_secs(10),
            max_rules_per_tenant: 50,
            retry_base: Duration::from_secs(5),
            max_attempts: 8,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Rules one evaluation pass reads at most (every tenant's).
pub const MAX_RULES_PER_PASS: i64 = 10_000;
/// Breaker openings waiting to be noted in the store; past it an opening is dropped (the
/// breaker's next opening is noted).
const SIGNALS_QUEUED: usize = 256;

/// The alert tasks of this node.
#[derive(Debug)]
pub struct AlertTasks {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl AlertTasks {
    pub fn abort(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the evaluator, the delivery loop and the breaker signals of this node.
pub fn start(state: &AppState) -> AlertTasks {
    let wake = Arc::new(tokio::sync::Notify::new());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(String, String)>(SIGNALS_QUEUED);
    let watch: switchboard_runtime::breaker::BreakerWatch = Arc::new(move |tenant, upstream| {
        let _ = tx.try_send((tenant.to_owned(), upstream.to_owned()));
    });
    state.effects.http.watch_breakers(Arc::clone(&watch));
    state.mcp.clients.watch_breakers(watch);
    let signals = tokio::spawn({
        let state = state.clone();
        async move {
            while let Some((tenant, upstream)) = rx.recv().await {
                if let Err(e) = state
                    .store
                    .note_breaker_open(&tenant, &upstream, &state.node.id)
                    .await
                {
                    tracing::warn!(name: "alert_signal_failed", error = %e, "alert_signal_failed");
                }
            }
        }
    });
    let evaluator = tokio::spawn({
        let state = state.clone();
        let wake = Arc::clone(&wake);
        async move {
            let every = state.config.alerts.interval;
            loop {
                tokio::time::sleep(every).await;
                if !state.node.holds_lease() {
                    continue;
                }
                match tokio::time::timeout(
                    every.max(Duration::from_secs(5)),
                    evaluate::pass(&state),
                )
                .await
                {
                    Ok(Ok(n)) if n > 0 => wake.notify_one(),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(name: "alert_evaluation_failed", error = %e, "alert_evaluation_failed");
                    }
                    Err(_) => {
                        tracing::warn!(name: "alert_evaluation_failed", error = "timed out", "alert_evaluation_failed");
                    }
                }
            }
        }
    });
    let deliveries = tokio::spawn({
        let state = state.clone();
        async move {
            let client = match deliver::client(&state) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(name: "alert_delivery_disabled", error = %e, "alert_delivery_disabled");
                    return;
                }
            };
            let every = state.config.alerts.interval.min(Duration::from_secs(1));
            loop {
                let _ = tokio::time::timeout(every, wake.notified()).await;
                if !state.node.holds_lease() {
                    continue;
                }
                deliver::round(&state, &client).await;
            }
        }
    });
    AlertTasks {
        tasks: vec![signals, evaluator, deliveries],
    }
}
