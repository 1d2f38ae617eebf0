//! Calls over HTTP, for any voice stack: start a call, invoke tools in it, cancel a response's
//! tools when the caller barges in, end it, and read its context and invocation record. The
//! call's life itself (starting, locating, picking up, answering) is `crate::calls`'.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_runtime::Invocation;
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::calls::{
    CallStarted, CallView, InvocationResult, NewCall, Via, live, recent_invocations, start_call,
    submit_and_wait, view, view_record, view_redactor,
};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::state::AppState;

#[utoipa::path(post, path = "/v1/calls", tag = "calls", security(("bearer" = [])), request_body = NewCall,
    responses((status = 201, body = CallStarted), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn create_call(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    Body(new): Body<NewCall>,
) -> ApiResult<(StatusCode, Json<CallStarted>)> {
    let parent = crate::traces::parent_of(&headers);
    let started = start_call(&state, &tenant.id, new, parent).await?;
    Ok((StatusCode::CREATED, Json(started)))
}

/// A function call from the model: its id, name and arguments, or the model's item as it came.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewInvocation {
    /// The model's id for this function call; repeats are answered with the first answer.
    /// Required unless `item` is given.
    #[schema(min_length = 1, max_length = 200)]
    pub function_call_id: Option<String>,
    /// The function's name; required unless `item` is given.
    pub name: Option<String>,
    /// The arguments: an object, or the JSON text the model produced (as OpenAI's events carry
    /// it), parsed like `arguments_json` (other JSON, an array or a number, is answered
    /// `tool_args_parse_error`, as that text would be)…
    #[schema(value_type = Option<serde_json::Value>)]
    pub arguments: Option<Value>,
    /// …or the JSON text the model produced.
    pub arguments_json: Option<String>,
    /// The model response it belongs to (for cancellation on barge-in).
    pub response_id: Option<String>,
    /// Instead of the fields above: the model's function call as it came, an OpenAI Responses
    /// `function_call` item, a Chat Completions tool call or an Anthropic `tool_use` block. The
    /// answer then carries `item` in the matching shape.
    #[schema(value_type = Option<Object>)]
    pub item: Option<Value>,
    /// The shape of the answer's `item` (default: the request item's; none without one).
    pub answer_as: Option<super::items::ItemFormat>,
}

#[utoipa::path(post, path = "/v1/calls/{call_id}/invocations", tag = "calls", security(("bearer" = [])), request_body = NewInvocation,
    responses((status = 200, body = InvocationResult, description = "Always an answer for the model, also when the tool failed"), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn invoke(
    State(state): State<AppState>,
    arrived: Option<axum::Extension<crate::deadlines::Arrived>>,
    tenant: Tenant,
    Path(call_id): Path<String>,
    headers: HeaderMap,
    Body(new): Body<NewInvocation>,
) -> ApiResult<Json<InvocationResult>> {
    let arrived = arrived.map_or_else(std::time::Instant::now, |a| a.0.0);
    let parent = crate::traces::parent_of(&headers);
    let call = model_call(new)?;
    let live = live(&state, &tenant.id, &call_id).await?;
    let invocation = Invocation {
        call_id: call_id.clone(),
        function_call_id: call.function_call_id,
        name: call.name,
        arguments_json: call.arguments_json,
        response_id: call.response_id,
        item_id: None,
    };
    let mut answer = submit_and_wait(&state, &live, invocation, Via::Http, arrived, parent).await?;
    if let Some(format) = call.answer_as {
        answer.item = Some(super::items::answer_item(
            format,
            &answer.function_call_id,
            answer.ok,
            &answer.output,
        ));
    }
    Ok(Json(answer))
}

/// A request's function call, read from its fields or its `item`.
struct RequestedCall {
    function_call_id: String,
    name: String,
    arguments_json: String,
    response_id: Option<String>,
    answer_as: Option<super::items::ItemFormat>,
}

fn model_call(new: NewInvocation) -> ApiResult<RequestedCall> {
    let call = match new.item {
        Some(item) => {
            if new.function_call_id.is_some()
                || new.name.is_some()
                || new.arguments.is_some()
                || new.arguments_json.is_some()
            {
                return Err(ApiError::bad_request(
                    "give the model's `item`, or `function_call_id`, `name` and the arguments, not both",
                ));
            }
            let read = super::items::read_item(&item)?;
            RequestedCall {
                function_call_id: read.function_call_id,
                name: read.name,
                arguments_json: read.arguments_json,
                response_id: new.response_id,
                answer_as: Some(new.answer_as.unwrap_or(read.format)),
            }
        }
        None => {
            let (Some(function_call_id), Some(name)) = (new.function_call_id, new.name) else {
                return Err(ApiError::bad_request(
                    "`function_call_id` and `name` are required (or send the model's function call as `item`)",
                ));
            };
            let arguments_json = match (new.arguments, new.arguments_json) {
                (Some(_), Some(_)) => {
                    return Err(ApiError::bad_request(
                        "give `arguments` or `arguments_json`, not both",
                    ));
                }
                // The model's JSON text, as OpenAI's events carry it: parsed like arguments_json.
                (Some(Value::String(s)), None) => s,
                // An object, or what the model made instead of one (an array, a number): the
                // tool answers the latter `tool_args_parse_error`, as it answers that text.
                (Some(v), None) => v.to_string(),
                (None, Some(s)) => s,
                (None, None) => "{}".to_owned(),
            };
            RequestedCall {
                function_call_id,
                name,
                arguments_json,
                response_id: new.response_id,
                answer_as: new.answer_as,
            }
        }
    };
    if call.function_call_id.is_empty() || call.function_call_id.len() > 200 {
        return Err(ApiError::bad_request(
            "function_call_id must be 1-200 characters",
        ));
    }
    Ok(call)
}

#[utoipa::path(post, path = "/v1/calls/{call_id}/responses/{response_id}/cancel", tag = "calls", security(("bearer" = [])),
    responses((status = 202, body = Object, description = "Read tools of that response are cancelled; write tools finish; transfers and hang-ups are dropped"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "The call has ended")))]
pub async fn cancel_response(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((call_id, response_id)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let live = live(&state, &tenant.id, &call_id).await?;
    live.activity.touch();
    live.session.cancel_response(&response_id);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"call_id": call_id, "response_id": response_id, "status": "cancelling"})),
    ))
}

#[utoipa::path(get, path = "/v1/calls/{call_id}", tag = "calls", security(("bearer" = [])),
    responses((status = 200, body = CallView), (status = 404, body = ErrorBody)))]
pub async fn get_call(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(call_id): Path<String>,
) -> ApiResult<Json<CallView>> {
    // The database is the authority: every node commits there before it answers.
    let row = state
        .store
        .get_call(&tenant.id, &call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let (records, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
    let live = state.calls.get(&tenant.id, &call_id);
    let redactor = view_redactor(&state, &tenant.id, live.as_deref(), &row.context).await?;
    Ok(Json(view(
        &redactor,
        &call_id,
        &row.agent,
        row.status.as_str(),
        &row.context,
        (&records, total),
        live.is_some(),
    )))
}

/// `GET /v1/calls/{call_id}/invocations`'s query: which page of the call's records.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InvocationQuery {
    /// Records per page, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// The `next` cursor of a page: the records after it. Without `after` or `before`, the
    /// call's first records.
    pub after: Option<String>,
    /// The `previous` cursor of a page: the records before it (the newest of them).
    pub before: Option<String>,
}

/// A page of a call's invocation records, oldest first, and where it stands in the call.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct InvocationList {
    /// The records as the call's view shows them (redacted, without replay traces).
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<Value>,
    /// Pass as `after` for the records after this page. Given on every page that holds a
    /// record, also the one ending at the call's newest, so a live call's later records can be
    /// asked for with it.
    pub next: Option<String>,
    /// Whether the call had records after this page when it was read (read on while it is
    /// true).
    pub more: bool,
    /// Pass as `before` for the earlier records; absent when the page starts at the call's first.
    pub previous: Option<String>,
    /// How many records come before this page.
    pub before: u64,
    /// How many records the call has in all.
    pub total: u64,
}

/// The store's page of a call's records that a query names; a bad value is a 400 naming the
/// parameter and the fix.
pub(crate) fn records_at(
    limit: Option<&str>,
    after: Option<&str>,
    before: Option<&str>,
) -> ApiResult<(switchboard_store::RecordsAt, u32)> {
    use switchboard_store::{Page, RecordsAt};
    let given = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let limit = match given(limit) {
        None => Page::DEFAULT_LIMIT,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=Page::MAX_LIMIT).contains(l))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`limit` is `{}`; ask for 1 to {} invocations per page",
                    l.chars().take(20).collect::<String>(),
                    Page::MAX_LIMIT
                ))
            })?,
    };
    let at = match (given(after), given(before)) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "give `after` (later invocations) or `before` (earlier invocations), not both",
            ));
        }
        (Some(a), None) => RecordsAt::After(a),
        (None, Some(b)) => RecordsAt::Before(b),
        (None, None) => RecordsAt::First,
    };
    Ok((at, limit))
}

#[utoipa::path(get, path = "/v1/calls/{call_id}/invocations", tag = "calls", security(("bearer" = [])), params(InvocationQuery),
    responses((status = 200, body = InvocationList), (status = 400, body = ErrorBody, description = "A bad cursor or limit: the message names the parameter and the fix"), (status = 404, body = ErrorBody)))]
pub async fn list_invocations(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(call_id): Path<String>,
    Query(q): Query<InvocationQuery>,
) -> ApiResult<Json<InvocationList>> {
    let (at, limit) = records_at(q.limit.as_deref(), q.after.as_deref(), q.before.as_deref())?;
    let row = state
        .store
        .get_call(&tenant.id, &call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let page = state
        .store
        .invocation_page(&tenant.id, &call_id, &at, limit)
        .await?;
    let live = state.calls.get(&tenant.id, &call_id);
    let redactor = view_redactor(&state, &tenant.id, live.as_deref(), &row.context).await?;
    Ok(Json(InvocationList {
        items: page
            .items
            .iter()
            .filter_map(|r| view_record(&redactor, r))
            .collect(),
        next: page.next,
        more: page.more,
        previous: page.previous,
        before: page.before,
        total: page.total,
    }))
}

#[utoipa::path(delete, path = "/v1/calls/{call_id}", tag = "calls", security(("bearer" = [])),
    responses((status = 200, body = CallView, description = "Ended: what was still running was cancelled"), (status = 404, body = ErrorBody)))]
pub async fn end_call(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(call_id): Path<String>,
) -> ApiResult<Json<CallView>> {
    let live = live(&state, &tenant.id, &call_id).await;
    if let Ok(live) = live {
        state.calls.remove(&tenant.id, &call_id);
        if live.realtime {
            state.realtime.stop(&call_id);
        }
        if let Some(s) = live.session.end().await {
            // The session holds the newest records; the database counts them all.
            let (_, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
            let total = total.max(u64::try_from(s.records.len()).unwrap_or(u64::MAX));
            let redactor = view_redactor(&state, &tenant.id, Some(&live), &s.context).await?;
            return Ok(Json(view(
                &redactor,
                &call_id,
                s.context.active_agent(),
                "ended",
                &s.context,
                (&s.records, total),
                false,
            )));
        }
    }
    let row = state
        .store
        .get_call(&tenant.id, &call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let (records, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
    let redactor = view_redactor(&state, &tenant.id, None, &row.context).await?;
    Ok(Json(view(
        &redactor,
        &call_id,
        &row.agent,
        row.status.as_str(),
        &row.context,
        (&records, total),
        false,
    )))
}

/// `GET /v1/calls`'s query (also the console's calls page): what to look for and which page.
/// Every key narrows the list and matches exactly; an empty value counts as absent.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CallQuery {
    /// Calls per page, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// The `next` cursor of the previous page: the calls older than it.
    pub after: Option<String>,
    /// The `previous` cursor of a page: the calls newer than it.
    pub before: Option<String>,
    /// The call with this id.
    pub id: Option<String>,
    /// Calls from or to this phone number, as the call carries it (e.g. `+14155550100`).
    pub number: Option<String>,
    /// Calls whose `user.id` is this (a numeric id as its digits).
    pub user_id: Option<String>,
    /// Calls whose active agent is this one.
    pub agent: Option<String>,
    /// Calls that invoked this tool.
    pub tool: Option<String>,
    /// Calls with an invocation that failed with this error code (e.g. `timeout`).
    pub error: Option<String>,
    /// `active`, `ended`, or `failed` (an invocation failed).
    pub status: Option<String>,
    /// `failed` (an invocation failed) or `ok` (none did).
    pub outcome: Option<String>,
    /// RFC 3339 (e.g. `2026-11-24T09:00:00Z`) or a date: calls started at or after it.
    pub since: Option<String>,
    /// RFC 3339 or a date: calls started before it.
    pub until: Option<String>,
}

/// What [`CallQuery`] asks the store for.
pub(crate) struct CallsWanted {
    pub search: switchboard_store::CallSearch,
    pub at: switchboard_store::CallsAt,
    pub limit: u32,
}

impl CallQuery {
    /// Reads the query once; a bad value is a 400 naming the parameter and the fix.
    pub(crate) fn wanted(&self) -> ApiResult<CallsWanted> {
        use switchboard_store::{CallSearch, CallsAt, Page, StatusFilter, TimeBound};
        fn given(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let owned = |v: &Option<String>| given(v).map(str::to_owned);
        let limit = match given(&self.limit) {
            None => Page::DEFAULT_LIMIT,
            Some(l) => l
                .parse::<u32>()
                .ok()
                .filter(|l| (1..=Page::MAX_LIMIT).contains(l))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`limit` is `{}`; ask for 1 to {} calls per page",
                        l.chars().take(20).collect::<String>(),
                        Page::MAX_LIMIT
                    ))
                })?,
        };
        let at = match (owned(&self.after), owned(&self.before)) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "give `after` (older calls) or `before` (newer calls), not both",
                ));
            }
            (Some(a), None) => CallsAt::After(a),
            (None, Some(b)) => CallsAt::Before(b),
            (None, None) => CallsAt::Newest,
        };
        let time = |param: &str, v: &Option<String>| {
            given(v)
                .map(|t| TimeBound::parse(param, t))
                .transpose()
                .map_err(ApiError::from)
        };
        let search = CallSearch {
            call_id: owned(&self.id),
            number: owned(&self.number),
            user_id: owned(&self.user_id),
            agent: owned(&self.agent),
            tool: owned(&self.tool),
            error: owned(&self.error),
            status: given(&self.status)
                .map(StatusFilter::parse)
                .transpose()
                .map_err(ApiError::from)?,
            failed: match given(&self.outcome) {
                None => None,
                Some("failed") => Some(true),
                Some("ok") => Some(false),
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "`outcome` is `{}`, not a call outcome: use `ok` (no invocation failed) or `failed` (one did), or leave it out for any",
                        other.chars().take(40).collect::<String>()
                    )));
                }
            },
            since: time("since", &self.since)?,
            until: time("until", &self.until)?,
        };
        Ok(CallsWanted { search, at, limit })
    }
}

/// One call as the list shows it, every string redacted of the tenant's secrets.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct CallListItem {
    pub call_id: String,
    /// The active agent.
    pub agent: String,
    /// `active` or `ended`.
    pub status: String,
    /// Whether one of its invocations failed.
    pub failed: bool,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The `user.id` the call started with.
    pub user_id: Option<String>,
    /// RFC 3339 (UTC, milliseconds).
    pub started_at: String,
    pub ended_at: Option<String>,
}

/// A page of calls, newest first, and the cursors beside it.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct CallList {
    pub items: Vec<CallListItem>,
    /// Pass as `after` for older calls; absent on the last page.
    pub next: Option<String>,
    /// Pass as `before` for newer calls; absent on the newest page.
    pub previous: Option<String>,
}

/// A page of the tenant's calls as the list shows them.
pub(crate) async fn call_list(
    state: &AppState,
    tenant: &str,
    wanted: &CallsWanted,
) -> ApiResult<CallList> {
    let page = state
        .store
        .search_calls(tenant, &wanted.search, &wanted.at, wanted.limit)
        .await?;
    let (config, _) = crate::toolset::call_config(state, tenant).await?;
    let redactor =
        switchboard_runtime::redact::Redactor::for_calls(std::iter::once(&config), &Value::Null);
    let r = |s: &str| redactor.redact(s);
    let items = page
        .items
        .iter()
        .map(|c| CallListItem {
            call_id: r(&c.id),
            agent: r(&c.agent),
            status: c.status.as_str().to_owned(),
            failed: c.failed,
            from: c.from.as_deref().map(r),
            to: c.to.as_deref().map(r),
            user_id: c.user_id.as_deref().map(r),
            started_at: c.created_at.clone(),
            ended_at: c.ended_at.clone(),
        })
        .collect();
    Ok(CallList {
        items,
        next: page.next,
        previous: page.previous,
    })
}

/// The tenant's calls, newest first, a page at a time, searched by any of the keys.
#[utoipa::path(get, path = "/v1/calls", tag = "calls", security(("bearer" = [])), params(CallQuery),
    responses((status = 200, body = CallList), (status = 400, body = ErrorBody, description = "A bad value (time, cursor, limit, status): the message names the parameter and the fix")))]
pub async fn list_calls(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<CallQuery>,
) -> ApiResult<Json<CallList>> {
    let wanted = q.wanted()?;
    Ok(Json(call_list(&state, &tenant.id, &wanted).await?))
}
