//! What the `memory` toolkit remembers about a caller: read it all, or delete it all (a caller
//! who asks to be forgotten). Scoped to the key's tenant: another tenant's callers are not found.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use switchboard_store::memory::check_caller;
use switchboard_store::{CallerMemory, Observation, Relation};
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;
use crate::state::AppState;

/// One remembered fact.
#[derive(Debug, Serialize, ToSchema)]
pub struct ObservationView {
    pub id: i64,
    /// Who or what it is about (`caller`, `Max`, …).
    pub entity: String,
    pub content: String,
    /// The call it was remembered in.
    pub call_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}

/// A link between two entities: `from` `relation` `to`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RelationView {
    pub from: String,
    pub relation: String,
    pub to: String,
}

/// Everything remembered about one caller (bounded by the server's per-caller limits).
#[derive(Debug, Serialize, ToSchema)]
pub struct CallerMemoryView {
    /// The caller's number (`call.from`) or `user.id`.
    pub caller: String,
    pub entities: Vec<String>,
    /// Oldest first.
    pub observations: Vec<ObservationView>,
    pub relations: Vec<RelationView>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// What deleting a caller's memory removed (all zero when nothing was remembered).
#[derive(Debug, Serialize, ToSchema)]
pub struct CallerForgotten {
    pub caller: String,
    pub observations: i64,
    pub entities: i64,
    pub relations: i64,
}

fn observation(o: Observation) -> ObservationView {
    ObservationView {
        id: o.id,
        entity: o.entity,
        content: o.content,
        call_id: o.call_id,
        created_at: o.created_at,
    }
}

fn relation(r: Relation) -> RelationView {
    RelationView {
        from: r.from,
        relation: r.relation,
        to: r.to,
    }
}

fn view(m: CallerMemory) -> CallerMemoryView {
    CallerMemoryView {
        caller: m.caller,
        entities: m.entities,
        observations: m.observations.into_iter().map(observation).collect(),
        relations: m.relations.into_iter().map(relation).collect(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

#[utoipa::path(get, path = "/v1/memory/callers/{caller}", tag = "memory", security(("bearer" = [])),
    params(("caller" = String, Path, description = "The caller's number as the call's `from` gave it (URL-encoded, e.g. %2B14155550100), or its `user.id`")),
    responses((status = 200, body = CallerMemoryView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody, description = "Nothing is remembered about this caller")))]
pub async fn get_caller_memory(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(caller): Path<String>,
) -> ApiResult<Json<CallerMemoryView>> {
    check_caller(&caller, &state.config.memory)?;
    let memory = state
        .store
        .caller_memory(&tenant.id, &caller)
        .await?
        .ok_or_else(|| ApiError::not_found("memory of this caller"))?;
    Ok(Json(view(memory)))
}

#[utoipa::path(delete, path = "/v1/memory/callers/{caller}", tag = "memory", security(("bearer" = [])),
    params(("caller" = String, Path, description = "The caller's number as the call's `from` gave it (URL-encoded), or its `user.id`")),
    responses((status = 200, body = CallerForgotten, description = "Everything remembered about the caller is deleted"), (status = 400, body = ErrorBody)))]
pub async fn delete_caller_memory(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(caller): Path<String>,
) -> ApiResult<Json<CallerForgotten>> {
    check_caller(&caller, &state.config.memory)?;
    let gone = state.store.forget_caller(&tenant.id, &caller).await?;
    tracing::info!(name: "caller_memory_deleted", tenant_id = %tenant.id, observations = gone.observations, "caller_memory_deleted");
    Ok(Json(CallerForgotten {
        caller,
        observations: gone.observations,
        entities: gone.entities,
        relations: gone.relations,
    }))
}
