//! Calls of the HTTP door that nobody uses any more end by themselves.
//!
//! A client that never sends `DELETE /v1/calls/{id}` would otherwise leave its call live for
//! good, holding one of the tenant's `max_calls_per_tenant` places (and, on its node, a session)
//! until the tenant can start no call at all. A call on which nothing happened for
//! `ServerConfig::call_idle_timeout` — no function call submitted or answered, over the HTTP
//! or the MCP door, no response cancelled — is ended as `DELETE` ends it: what still runs is
//! answered `cancelled`, the journal's end is written, the place is freed.
//!
//! Each node ends the idle calls it owns, by their activity in memory ([`Activity`]). The calls
//! of a node that died have no owner to do it, so every node also asks the database for such
//! orphans idle as long (no invocation recorded since, by the records' times), takes each over
//! as a request would, and ends it. Phone calls end with their line and are left alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchboard_store::Door;

use crate::calls::LiveCall;
use crate::calls::{Serving, locate};
use crate::state::AppState;

/// Orphans asked for at a time.
const BATCH: u32 = 32;

/// When a call was last used, in milliseconds since the process's first [`Activity`]: read
/// and touched without a lock by every request acting on the call.
#[derive(Debug)]
pub struct Activity {
    last_ms: AtomicU64,
}

/// The process's time origin for [`Activity`].
fn origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(origin().elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Default for Activity {
    /// Used now (the call has just started, or been taken over).
    fn default() -> Self {
        Activity {
            last_ms: AtomicU64::new(now_ms()),
        }
    }
}

impl Activity {
    /// The call is being used now.
    pub fn touch(&self) {
        self.last_ms.fetch_max(now_ms(), Ordering::Relaxed);
    }

    /// How long the call has not been used.
    pub fn idle_for(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// Starts the node's expiry of idle HTTP-door calls: a pass every quarter of the timeout (at
/// least every minute, at most every 100 ms). `None` when calls never expire (no timeout).
pub fn start(state: &AppState) -> Option<tokio::task::JoinHandle<()>> {
    let timeout = state.config.call_idle_timeout?;
    let every = (timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let state = state.clone();
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            end_idle_here(&state, timeout).await;
            end_idle_orphans(&state, timeout).await;
        }
    }))
}

/// Ends the HTTP-door calls this node owns that have been idle for `timeout`.
async fn end_idle_here(state: &AppState, timeout: Duration) {
    let idle: Vec<Arc<LiveCall>> = state
        .calls
        .all()
        .into_iter()
        .filter(|c| !c.realtime && c.activity.idle_for() >= timeout)
        .collect();
    for call in idle {
        end(state, &call, "owned").await;
    }
}

/// Takes over and ends the HTTP-door calls of dead nodes on which nothing was recorded for
/// `timeout`.
async fn end_idle_orphans(state: &AppState, timeout: Duration) {
    let found = match state
        .store
        .idle_orphaned_calls(Door::Http, timeout, BATCH)
        .await
    {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(name: "call_expiry_failed", error = %e, "call_expiry_failed");
            return;
        }
    };
    for (tenant, call_id) in found {
        // Picked up here meanwhile (a request came for it): its own activity decides.
        if state.calls.get(&tenant, &call_id).is_some() {
            continue;
        }
        match locate(state, &tenant, &call_id).await {
            Ok(Serving::Here(call)) => end(state, &call, "orphaned").await,
            // A live node took it for a request meanwhile: it is in use.
            Ok(Serving::Elsewhere(_)) => {}
            Err(e) => {
                tracing::debug!(name: "call_expiry_failed", call_id = %call_id, error = %e.message, "call_expiry_failed");
            }
        }
    }
}

/// Ends a call as `DELETE /v1/calls/{id}` does: no longer live here, its session ended (what
/// still runs answered `cancelled`, the journal's end written, the tenant's place freed).
async fn end(state: &AppState, call: &Arc<LiveCall>, owner: &'static str) {
    let call_id = call.session.call_id();
    if state
        .calls
        .get(&call.tenant_id, call_id)
        .is_some_and(|c| Arc::ptr_eq(&c, call))
    {
        state.calls.remove(&call.tenant_id, call_id);
    }
    let idle_s = call.activity.idle_for().as_secs();
    if call.session.end().await.is_some() {
        tracing::info!(name: "call_expired_idle", tenant_id = %call.tenant_id, call_id = %call_id, owner, idle_s, "call_expired_idle");
        metrics::counter!("switchboard_calls_expired_total").increment(1);
    }
}
