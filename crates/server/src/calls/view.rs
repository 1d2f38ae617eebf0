//! A call as its view shows it (`GET /v1/calls/{id}`, the console): its context and newest
//! records, every string redacted of the call's secrets.

use serde::Serialize;
use serde_json::Value;
use switchboard_core::Context;
use switchboard_runtime::InvocationRecord;
use switchboard_runtime::redact::Redactor;
use utoipa::ToSchema;

use super::LiveCall;
use crate::error::ApiResult;
use crate::state::AppState;
use crate::toolset::call_config;

/// A call, its context and its invocation record.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallView {
    pub call_id: String,
    pub agent: String,
    pub status: String,
    /// The call's context; the call's secrets and the user's tokens are redacted wherever they
    /// appear.
    #[schema(value_type = Object)]
    pub context: Value,
    /// The newest invocation records (at most the server's `max_records_per_call`), oldest
    /// first; each record's `arguments`, `output` and logs are bounded too. Every record, a
    /// page at a time: `GET /v1/calls/{call_id}/invocations`.
    #[schema(value_type = Vec<Object>)]
    pub invocations: Vec<Value>,
    /// How many invocations the call has recorded in all (more than `invocations` holds
    /// when older ones were left out).
    pub invocations_total: u64,
    pub live_on_this_node: bool,
}

/// The redactor of a call's view: the secrets of its tools as the call pinned them (when it is
/// live here) and as they are now, the signing secret, and the user's tokens.
pub(crate) async fn view_redactor(
    state: &AppState,
    tenant: &str,
    live: Option<&LiveCall>,
    context: &Context,
) -> ApiResult<Redactor> {
    let (current, _) = call_config(state, tenant).await?;
    let pinned = live.map(|l| l.session.config());
    Ok(Redactor::for_calls(
        std::iter::once(&current).chain(pinned.as_deref()),
        &context.user,
    ))
}

/// The call as `GET /v1/calls/{id}` shows it: every string of the context (all namespaces) and
/// of the records, keys included, with the call's secrets replaced.
pub(crate) fn view(
    redactor: &Redactor,
    call_id: &str,
    agent: &str,
    status: &str,
    context: &Context,
    (records, invocations_total): (&[InvocationRecord], u64),
    live: bool,
) -> CallView {
    let mut ctx = serde_json::to_value(context).unwrap_or(Value::Null);
    redactor.redact_value(&mut ctx);
    CallView {
        call_id: redactor.redact(call_id),
        agent: redactor.redact(agent),
        status: status.to_owned(),
        context: ctx,
        invocations: records
            .iter()
            .filter_map(|r| view_record(redactor, r))
            .collect(),
        invocations_total,
        live_on_this_node: live,
    }
}

/// A record as a call's view and its invocation list show it: without its replay trace (that is
/// for `POST /v1/tools/{name}:replay`), every string (keys included) redacted.
pub(crate) fn view_record(redactor: &Redactor, r: &InvocationRecord) -> Option<Value> {
    let r = InvocationRecord {
        trace: None,
        ..r.clone()
    };
    let mut v = serde_json::to_value(redactor.redact_record(&r)).ok()?;
    redactor.redact_value(&mut v);
    Some(v)
}

/// The newest records of a call that a view shows, and how many it has in all.
pub(crate) async fn recent_invocations(
    state: &AppState,
    tenant: &str,
    call_id: &str,
) -> ApiResult<(Vec<InvocationRecord>, u64)> {
    let limit = state.config.records.records();
    Ok(state
        .store
        .recent_invocations(tenant, call_id, limit)
        .await?)
}
