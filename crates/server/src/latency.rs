//! The cluster's view of each tool's latency: this node stores its figures and reads every
//! node's back, every [`ServerConfig::latency_sync`](crate::state::ServerConfig), so the
//! adaptive policy of a node that just started, or has seen few runs of a tool, acts on what
//! the cluster has seen (see [`switchboard_runtime::adaptive`]).

use switchboard_runtime::adaptive::Observed;
use tokio::task::JoinHandle;

use crate::state::AppState;

/// Reads the cluster's figures at once, then keeps them in step until aborted.
pub fn start(state: &AppState) -> JoinHandle<()> {
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            if let Err(e) = sync(&state).await {
                tracing::warn!(name: "tool_latency_sync_failed", error = %e, "tool_latency_sync_failed");
            }
            tokio::time::sleep(state.config.latency_sync).await;
        }
    })
}

/// One round: this node's changed figures stored, the cluster's read back.
pub async fn sync(state: &AppState) -> Result<(), switchboard_store::StoreError> {
    let changed: Vec<_> = state
        .latency
        .changed()
        .into_iter()
        .map(|(tenant, tool, o)| (tenant, tool, o.p95_ms, o.samples))
        .collect();
    if let Err(e) = state
        .store
        .note_tool_latencies(&state.node.id, &changed)
        .await
    {
        // Not lost: they are stored by the next round that reaches the database.
        let keys: Vec<(String, String)> = changed
            .into_iter()
            .map(|(tenant, tool, _, _)| (tenant, tool))
            .collect();
        state.latency.unsaved(&keys);
        tracing::debug!(name: "tool_latency_store_failed", figures = keys.len(), "tool_latency_store_failed");
        return Err(e);
    }
    let cluster = state.store.tool_latencies().await?;
    state.latency.set_cluster(
        cluster
            .into_iter()
            .map(|(tenant, tool, p95_ms, samples)| (tenant, tool, Observed { p95_ms, samples })),
    );
    Ok(())
}
