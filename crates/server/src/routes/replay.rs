//! `POST /v1/tools/{name}:replay`: a tool's recorded invocations run again against a draft (or
//! a stored version) with their recorded effect outcomes, performing nothing, and what each
//! would change.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::Tool;
use switchboard_runtime::redact::Redactor;
use switchboard_runtime::replay::{ReplaySummary, ReplayedInvocation, replay};
use switchboard_store::CallRecord;
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path};
use crate::state::AppState;
use crate::toolset::compile;

/// The most invocations one replay runs, and its default.
pub const MAX_REPLAYED: u32 = 200;
const DEFAULT_REPLAYED: u32 = 50;
/// The most calls a replay may name.
pub const MAX_CALLS: usize = 50;

/// What to replay, and against what.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRun {
    /// A draft definition of the tool (not saved). Absent: `version`, else the current version.
    #[schema(value_type = Option<Object>)]
    pub definition: Option<Value>,
    /// A stored version to replay against, instead of a draft.
    pub version: Option<i64>,
    /// How many of the tool's newest recorded invocations to replay (default 50).
    #[schema(minimum = 1, maximum = 200)]
    pub last: Option<u32>,
    /// Replay every invocation of the tool in its newest this many calls (1 to 50), up to
    /// `last` invocations in all (default 200 here), instead of the newest invocations.
    #[schema(minimum = 1, maximum = 50)]
    pub last_calls: Option<u32>,
    /// Replay the tool's invocations in these calls (by call id) instead of the newest ones.
    #[schema(max_items = 50)]
    pub calls: Option<Vec<String>>,
}

/// What a replay found.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayReport {
    pub tool: String,
    /// The stored version replayed; absent for a draft.
    pub version: Option<i64>,
    /// How many invocations are unchanged, changed, newly failing, newly passing, skipped.
    #[schema(value_type = Object)]
    pub summary: ReplaySummary,
    /// The calls replayed (each call's id once, in the order of `invocations`).
    pub calls: Vec<String>,
    /// True when the selection held more invocations than `last`: the oldest were left out.
    pub truncated: bool,
    /// Per invocation, newest first (by call, in call order, when calls were named): the
    /// verdict, the output recorded and now, the context writes, and each effect (`recorded`:
    /// its recorded outcome was reused; `diverged`: the recording has no such request, so it
    /// was answered with a failure).
    #[schema(value_type = Vec<Object>)]
    pub invocations: Vec<ReplayedInvocation>,
}

#[utoipa::path(post, path = "/v1/tools/{name}:replay", tag = "tools", security(("bearer" = [])), request_body = ReplayRun,
    responses((status = 200, body = ReplayReport, description = "Each recorded invocation replayed against the draft; nothing is performed"),
        (status = 400, body = ErrorBody, description = "A draft with problems (each with its JSON Pointer and fix), or a selection out of range"),
        (status = 404, body = ErrorBody)))]
pub async fn replay_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(segment): Path<String>,
    Body(run): Body<ReplayRun>,
) -> ApiResult<Json<ReplayReport>> {
    let name = segment
        .strip_suffix(":replay")
        .unwrap_or(&segment)
        .to_owned();
    Ok(Json(report(&state, &tenant.id, name, &run).await?))
}

/// Replays the tenant's recorded invocations of tool `name` as `run` asks.
pub(crate) async fn report(
    state: &AppState,
    tenant: &str,
    name: String,
    run: &ReplayRun,
) -> ApiResult<ReplayReport> {
    let (tool, version) = draft_or_version(state, tenant, &name, run).await?;
    let default = if run.last_calls.is_some() {
        MAX_REPLAYED
    } else {
        DEFAULT_REPLAYED
    };
    let last = run.last.unwrap_or(default);
    if !(1..=MAX_REPLAYED).contains(&last) {
        return Err(ApiError::bad_request(format!(
            "last is {last}; replay 1 to {MAX_REPLAYED} invocations at a time"
        )));
    }
    let named = match (run.last_calls, &run.calls) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "give `last_calls` (the newest calls) or `calls` (calls by id), not both",
            ));
        }
        (Some(n), None) => {
            if !(1..=MAX_CALLS as u32).contains(&n) {
                return Err(ApiError::bad_request(format!(
                    "last_calls is {n}; replay 1 to {MAX_CALLS} calls at a time"
                )));
            }
            Some(
                state
                    .store
                    .recent_calls_of_tool(tenant, &name, n as usize)
                    .await?,
            )
        }
        (None, calls) => calls.clone(),
    };
    let (records, truncated) =
        select(state, tenant, &name, last as usize, named.as_deref()).await?;
    let mut calls: Vec<String> = Vec::new();
    for r in &records {
        if !calls.contains(&r.call_id) {
            calls.push(r.call_id.clone());
        }
    }
    let invocations = tokio::task::spawn_blocking(move || {
        records
            .iter()
            .map(|r| replay(&tool, &r.call_id, &r.record))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| ApiError::internal(format!("the replay stopped unexpectedly: {e}")))?;
    // Records are redacted when kept; a record kept before a secret (or one of its encoded
    // forms) was known is redacted here with the tenant's secrets as they are now.
    let (config, _) = crate::toolset::call_config(state, tenant).await?;
    let redactor = Redactor::for_call(&config, &Value::Null);
    let invocations: Vec<ReplayedInvocation> = invocations
        .into_iter()
        .map(|i| i.redacted(&redactor))
        .collect();
    Ok(ReplayReport {
        tool: name,
        version,
        summary: ReplaySummary::of(&invocations),
        calls: calls.iter().map(|c| redactor.redact(c)).collect(),
        truncated,
        invocations,
    })
}

/// The tool to replay against: the draft, the version asked for, or the current version.
async fn draft_or_version(
    state: &AppState,
    tenant: &str,
    name: &str,
    run: &ReplayRun,
) -> ApiResult<(Arc<Tool>, Option<i64>)> {
    match (&run.definition, run.version) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "give a draft `definition` or a stored `version` to replay against, not both",
        )),
        (Some(def), None) => {
            let mut def = def.clone();
            match &mut def {
                Value::Object(m) => match m.get("name") {
                    None => {
                        m.insert("name".into(), Value::String(name.to_owned()));
                    }
                    Some(Value::String(n)) if n == name => {}
                    Some(other) => {
                        return Err(ApiError::bad_request(format!(
                            "the draft's name {other} differs from `{name}` in the URL; a replay runs a tool's own records against a draft of that tool"
                        )));
                    }
                },
                _ => {
                    return Err(ApiError::bad_request(
                        "definition must be a tool definition: a JSON object like the body of PUT /v1/tools/{name}",
                    ));
                }
            }
            let tool = super::tools::parse(state, &def)?;
            Ok((Arc::new(tool), None))
        }
        (None, version) => {
            let v = match version {
                Some(n) => state.store.get_tool_version(tenant, name, n).await?,
                None => state.store.get_tool(tenant, name).await?,
            }
            .ok_or_else(|| match version {
                Some(n) => ApiError::not_found(format!("version {n} of tool `{name}`")),
                None => ApiError::not_found(format!("tool `{name}`")),
            })?;
            let n = v.version;
            Ok((compile(state, tenant, &v)?, Some(n)))
        }
    }
}

/// The records to replay: the tool's invocations in the named calls, or its newest ones; and
/// whether some were left out past `last`.
async fn select(
    state: &AppState,
    tenant: &str,
    name: &str,
    last: usize,
    calls: Option<&[String]>,
) -> ApiResult<(Vec<CallRecord>, bool)> {
    let Some(calls) = calls else {
        return Ok((
            state
                .store
                .recent_invocations_of_tool(tenant, name, last)
                .await?,
            false,
        ));
    };
    if calls.len() > MAX_CALLS {
        return Err(ApiError::bad_request(format!(
            "calls names {} calls, over the limit of {MAX_CALLS}; replay them in several requests",
            calls.len()
        )));
    }
    let mut out = Vec::new();
    let mut truncated = false;
    for call in calls {
        let room = last.saturating_sub(out.len());
        if room == 0 {
            truncated = true;
            break;
        }
        // One more than there is room for tells whether the call had more.
        let mut found = state
            .store
            .call_invocations_of_tool(tenant, call, name, room + 1)
            .await?;
        if found.len() > room {
            truncated = true;
            found.remove(0);
        }
        out.extend(found);
    }
    Ok((out, truncated))
}
