//! The `memory.*` effect handler: the runtime's [`Memory`] over the store, scoped to the call's
//! tenant and caller. Its answers are what the model (or the tool's later actions) read.

use serde_json::{Value, json};
use switchboard_runtime::BoxFuture;
use switchboard_runtime::effects::{Memory, MemoryOp, ToolkitScope};

use super::write::NewObservation;
use super::{MemoryLimits, NewRelation};
use crate::{Store, StoreError};

/// Results of a search when the action gives no `limit`.
const DEFAULT_SEARCH_RESULTS: u32 = 5;

/// Performs `memory.search`, `memory.create` and `memory.traverse` on the store.
#[derive(Debug, Clone)]
pub struct MemoryHandler {
    store: Store,
    limits: MemoryLimits,
}

impl MemoryHandler {
    /// The handler over `store`, held to `limits`.
    pub fn new(store: Store, limits: MemoryLimits) -> Self {
        MemoryHandler { store, limits }
    }

    async fn perform(&self, scope: &ToolkitScope<'_>, op: &MemoryOp) -> Result<Value, String> {
        let Some(caller) = scope.caller else {
            return Err("nothing can be remembered for this call: it has no caller. Start the call with `from` (the caller's number) or `user.id`".to_owned());
        };
        let tenant = scope.tenant_id;
        let limits = &self.limits;
        let answer = match op {
            MemoryOp::Search { query, limit } => {
                let limit = limit.unwrap_or(DEFAULT_SEARCH_RESULTS);
                let found = self
                    .store
                    .search_memory(tenant, caller, query, limit, limits)
                    .await;
                found.map(|results| {
                    let count = results.len();
                    json!({"results": results, "count": count})
                })
            }
            MemoryOp::Create {
                entity,
                content,
                relations,
            } => {
                let relations = parse_relations(relations.as_ref())?;
                let new = NewObservation {
                    entity,
                    content,
                    relations: &relations,
                    call_id: Some(scope.call_id),
                    idempotency_key: scope.idempotency_key,
                };
                self.store
                    .remember(tenant, caller, &new, limits)
                    .await
                    .map(|r| json!({"id": r.id, "entity": r.entity, "remembered": true, "created": r.created}))
            }
            MemoryOp::Traverse {
                from,
                relation,
                depth,
            } => self
                .store
                .traverse_memory(tenant, caller, from, relation, depth.unwrap_or(1), limits)
                .await
                .and_then(|t| {
                    serde_json::to_value(t).map_err(|e| StoreError::Corrupt(e.to_string()))
                }),
        };
        answer.map_err(|e| match e {
            StoreError::Invalid(m) | StoreError::Conflict(m) | StoreError::NotFound(m) => m,
            other => {
                tracing::warn!(name: "memory_store_failed", tenant_id = %tenant, error = %other, "memory_store_failed");
                "memory is not available right now; carry on without it".to_owned()
            }
        })
    }
}

/// `relations` as `memory.create` takes them: `[{"relation": "owns", "to": "Max"}]`.
fn parse_relations(v: Option<&Value>) -> Result<Vec<NewRelation>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            format!(
                "`relations` must be a list like [{{\"relation\": \"owns\", \"to\": \"Max\"}}] ({e})"
            )
        }),
    }
}

impl Memory for MemoryHandler {
    fn call<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        op: &'a MemoryOp,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(self.perform(scope, op))
    }
}
