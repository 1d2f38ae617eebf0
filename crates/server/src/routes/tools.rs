//! Tools as data: create, change (a new version), read, list, delete, validate, test.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_core::effect::HttpResponse;
use switchboard_core::{
    CallInfo, Context, EffectOutcome, EffectRequest, RunInput, Tool, run_to_end,
};
use switchboard_runtime::effects::TransferLedger;
use switchboard_runtime::executor::OpenGate;
use switchboard_runtime::{CallConfig, Invocation, ToolEntry};
use switchboard_store::{Publish, ToolVersion};
use utoipa::{IntoParams, ToSchema};

use super::{PageOf, PageQuery};
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::state::AppState;
use crate::toolset::{compile, refer_config};

/// One version of a tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolView {
    pub name: String,
    pub version: i64,
    /// The definition as given.
    #[schema(value_type = Object)]
    pub definition: Value,
    pub created_at: String,
    /// Why this version was published (`?note=` when it was put; `rollback to vN` for a
    /// rollback without a note); absent when none was given.
    pub note: Option<String>,
    /// Who published it: `key <api key id>` for the API, `console (key <api key id>)` for the
    /// console; absent for versions published before this was kept.
    pub published_by: Option<String>,
}

impl From<ToolVersion> for ToolView {
    fn from(v: ToolVersion) -> Self {
        ToolView {
            name: v.name,
            version: v.version,
            definition: v.definition,
            created_at: v.created_at,
            note: v.note,
            published_by: v.published_by,
        }
    }
}

/// `?note=` on a publish: why the version was made.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NoteQuery {
    /// A change note kept with the new version (at most 500 characters), shown in the
    /// versions list.
    pub note: Option<String>,
}

/// Who publishes through the API: the request's key, by its id (never the key).
pub(crate) fn publish_by_key(key_id: &str, note: Option<String>) -> Publish {
    Publish {
        note,
        by: Some(format!("key {key_id}")),
    }
}

/// Parses a definition; a bad one is a 400 listing every problem with its JSON Pointer and fix.
pub(crate) fn parse(state: &AppState, def: &Value) -> ApiResult<Tool> {
    Tool::parse(def, &state.config.limits).map_err(|d| {
        let n = d.0.len();
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_tool",
            format!(
                "the tool definition has {n} problem{}",
                if n == 1 { "" } else { "s" }
            ),
        )
        .with_details(json!(d.0))
    })
}

#[utoipa::path(post, path = "/v1/tools", tag = "tools", security(("bearer" = [])), request_body = Object, params(NoteQuery),
    responses((status = 201, body = ToolView), (status = 400, body = ErrorBody, description = "Every problem, each with its JSON Pointer and fix"), (status = 409, body = ErrorBody)))]
pub async fn create_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<NoteQuery>,
    Body(def): Body<Value>,
) -> ApiResult<(StatusCode, Json<ToolView>)> {
    let tool = parse(&state, &def)?;
    if state
        .store
        .get_tool(&tenant.id, tool.name())
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "tool `{}` exists; change it with PUT /v1/tools/{}",
            tool.name(),
            tool.name()
        )));
    }
    let v = state
        .store
        .put_tool(&tenant.id, &def, &publish_by_key(&tenant.key_id, q.note))
        .await?;
    Ok((StatusCode::CREATED, Json(v.into())))
}

#[utoipa::path(get, path = "/v1/tools", tag = "tools", security(("bearer" = [])), params(PageQuery),
    responses((status = 200, body = PageOf<ToolView>)))]
pub async fn list_tools(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<PageOf<ToolView>>> {
    Ok(Json(
        state.store.list_tools(&tenant.id, q.page()?).await?.into(),
    ))
}

#[utoipa::path(get, path = "/v1/tools/{name}", tag = "tools", security(("bearer" = [])),
    responses((status = 200, body = ToolView, description = "The current version"), (status = 404, body = ErrorBody)))]
pub async fn get_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<Json<ToolView>> {
    let v = state
        .store
        .get_tool(&tenant.id, &name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tool `{name}`")))?;
    Ok(Json(v.into()))
}

#[utoipa::path(put, path = "/v1/tools/{name}", tag = "tools", security(("bearer" = [])), request_body = Object,
    params(("name" = String, Path, description = "The tool's name"), NoteQuery),
    responses((status = 200, body = ToolView, description = "A new version, now current; live calls keep theirs (the same definition as the current version again changes nothing and keeps that version's note)"), (status = 400, body = ErrorBody)))]
pub async fn put_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(q): Query<NoteQuery>,
    Body(mut def): Body<Value>,
) -> ApiResult<Json<ToolView>> {
    if let Value::Object(m) = &mut def {
        match m.get("name") {
            None => {
                m.insert("name".into(), Value::String(name.clone()));
            }
            Some(Value::String(n)) if *n == name => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the definition's name {other} differs from `{name}` in the URL; rename by creating a new tool"
                )));
            }
        }
    }
    parse(&state, &def)?;
    let publish = publish_by_key(&tenant.key_id, q.note);
    Ok(Json(
        state
            .store
            .put_tool(&tenant.id, &def, &publish)
            .await?
            .into(),
    ))
}

#[utoipa::path(delete, path = "/v1/tools/{name}", tag = "tools", security(("bearer" = [])),
    responses((status = 204, description = "Deleted; its versions stay for calls that use them"), (status = 404, body = ErrorBody)))]
pub async fn delete_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_tool(&tenant.id, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("tool `{name}`")))
    }
}

#[utoipa::path(get, path = "/v1/tools/{name}/versions", tag = "tools", security(("bearer" = [])),
    responses((status = 200, body = Vec<ToolView>), (status = 404, body = ErrorBody)))]
pub async fn list_versions(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<ToolView>>> {
    let versions = state.store.list_tool_versions(&tenant.id, &name).await?;
    if versions.is_empty() {
        return Err(ApiError::not_found(format!("tool `{name}`")));
    }
    Ok(Json(versions.into_iter().map(ToolView::from).collect()))
}

#[utoipa::path(get, path = "/v1/tools/{name}/versions/{version}", tag = "tools", security(("bearer" = [])),
    params(("name" = String, Path, description = "The tool's name"), ("version" = i64, Path, description = "A version number, as `GET /v1/tools/{name}/versions` lists them")),
    responses((status = 200, body = ToolView), (status = 404, body = ErrorBody)))]
pub async fn get_version(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((name, version)): Path<(String, i64)>,
) -> ApiResult<Json<ToolView>> {
    let v = state
        .store
        .get_tool_version(&tenant.id, &name, version)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("version {version} of tool `{name}`")))?;
    Ok(Json(v.into()))
}

/// The result of validating a definition.
#[derive(Debug, Serialize, ToSchema)]
pub struct Validation {
    pub ok: bool,
    /// Every problem: `{pointer, message, fix}`.
    #[schema(value_type = Vec<Object>)]
    pub problems: Vec<Value>,
    /// The function a model would see (when valid).
    #[schema(value_type = Option<Object>)]
    pub function: Option<Value>,
    pub side_effect: Option<String>,
}

#[utoipa::path(post, path = "/v1/tools:validate", tag = "tools", security(("bearer" = [])), request_body = Object,
    responses((status = 200, body = Validation), (status = 400, body = ErrorBody)))]
pub async fn validate_tool(
    State(state): State<AppState>,
    _tenant: Tenant,
    Body(def): Body<Value>,
) -> ApiResult<Json<Validation>> {
    if !def.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a tool definition: a JSON object like the body of POST /v1/tools",
        ));
    }
    Ok(Json(match Tool::parse(&def, &state.config.limits) {
        Ok(t) => Validation {
            ok: true,
            problems: Vec::new(),
            function: serde_json::to_value(&*t.function_def(false)).ok(),
            side_effect: Some(format!("{:?}", t.side_effect()).to_lowercase()),
        },
        Err(d) => Validation {
            ok: false,
            problems: d
                .0
                .iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect(),
            function: None,
            side_effect: None,
        },
    }))
}

/// A test run of a tool.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRun {
    /// The arguments, as the model would send them.
    #[schema(value_type = Object)]
    #[serde(default)]
    pub params: Value,
    /// The call's state: `{"user": {...}, "workflow": {...}, "agents": {...}, "flags": {...}}`.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// `stub` (default): effects are listed and answered with a stub (HTTP 200 `{}`);
    /// `perform`: effects are performed for real.
    pub effects: Option<String>,
    /// Test a given version instead of the current one.
    pub version: Option<i64>,
    /// Outcomes for the run's effects, in order, with `effects: stub`: the first effect gets
    /// the first mock, and so on; effects past the list get the stub. Each is an effect outcome:
    /// `{"kind": "http", "status": 503, "body": {...}}`, `{"kind": "failed", "code": "timeout",
    /// "message": "..."}` or `{"kind": "done", "value": ...}`.
    #[schema(value_type = Option<Vec<Object>>, max_items = 64)]
    pub mocks: Option<Vec<Value>>,
}

/// The most mocks a test run takes.
const MAX_MOCKS: usize = 64;

/// The mocks of a test run, each checked to be an effect outcome.
pub(crate) fn parse_mocks(given: Option<&[Value]>) -> ApiResult<Vec<EffectOutcome>> {
    let given = given.unwrap_or_default();
    if given.len() > MAX_MOCKS {
        return Err(ApiError::bad_request(format!(
            "mocks has {} entries, over the limit of {MAX_MOCKS}; a run asks for fewer effects",
            given.len()
        )));
    }
    given
        .iter()
        .enumerate()
        .map(|(i, m)| {
            serde_json::from_value(m.clone()).map_err(|e| {
                ApiError::bad_request(format!(
                    "mocks[{i}] is not an effect outcome ({e}); write {{\"kind\": \"http\", \"status\": 200, \"body\": {{}}}}, {{\"kind\": \"failed\", \"code\": \"timeout\", \"message\": \"...\"}} or {{\"kind\": \"done\", \"value\": null}}"
                ))
            })
        })
        .collect()
}

/// What a test run did.
#[derive(Debug, Serialize, ToSchema)]
pub struct TestResult {
    /// The JSON the model would receive.
    #[schema(value_type = Object)]
    pub output: Value,
    /// The effects the run asked for, in order.
    #[schema(value_type = Vec<Object>)]
    pub effects: Vec<Value>,
    /// The context writes it would commit.
    #[schema(value_type = Vec<Object>)]
    pub writes: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub logs: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub handoff: Option<Value>,
}

/// `POST /v1/tools/{name}:test`, `:replay` and `:rollback`, which share one axum route (a path
/// segment cannot end in a literal): the segment's suffix picks the operation.
pub async fn tool_operation(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(segment): Path<String>,
    req: Request,
) -> Response {
    if segment.ends_with(":rollback") {
        match Body::from_request(req, &state).await {
            Ok(body) => super::rollback::rollback_tool(State(state), tenant, Path(segment), body)
                .await
                .into_response(),
            Err(e) => e.into_response(),
        }
    } else if segment.ends_with(":replay") {
        match Body::from_request(req, &state).await {
            Ok(body) => super::replay::replay_tool(State(state), tenant, Path(segment), body)
                .await
                .into_response(),
            Err(e) => e.into_response(),
        }
    } else {
        match Body::from_request(req, &state).await {
            Ok(body) => test_tool(State(state), tenant, Path(segment), body)
                .await
                .into_response(),
            Err(e) => e.into_response(),
        }
    }
}

#[utoipa::path(post, path = "/v1/tools/{name}:test", tag = "tools", security(("bearer" = [])), request_body = TestRun,
    responses((status = 200, body = TestResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn test_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(segment): Path<String>,
    Body(run): Body<TestRun>,
) -> ApiResult<Json<TestResult>> {
    let Some(name) = segment.strip_suffix(":test").map(str::to_owned) else {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!(
                "POST /v1/tools/{segment} is not an operation: test a tool with POST /v1/tools/{segment}:test, change it with PUT"
            ),
        ));
    };
    if !(run.params.is_null() || run.params.is_object()) {
        return Err(ApiError::bad_request(
            "`params` must be a JSON object of the arguments by name, as the model sends them (e.g. {\"order\": \"A-1\"}); leave it out for none",
        ));
    }
    let v = match run.version {
        Some(n) => state.store.get_tool_version(&tenant.id, &name, n).await?,
        None => state.store.get_tool(&tenant.id, &name).await?,
    }
    .ok_or_else(|| ApiError::not_found(format!("tool `{name}`")))?;
    let tool = compile(&state, &tenant.id, &v)?;
    let ctx = test_context(&tenant.id, run.context.as_ref())?;
    let refer = refer_config(&state, &tenant.id).await?;
    let args = if run.params.is_null() {
        "{}".to_owned()
    } else {
        run.params.to_string()
    };
    let input = RunInput {
        refer: refer.clone(),
        now: Arc::new(json!(switchboard_runtime::now_rfc3339())),
        ..RunInput::new("test")
    };
    let mocks = parse_mocks(run.mocks.as_deref())?;
    let (outcome, effects) = match run.effects.as_deref() {
        None | Some("stub") => {
            let mut effects = Vec::new();
            let mut mocks = mocks.into_iter();
            let outcome = run_to_end(&tool, input, &args, &ctx, |req| {
                effects.push(serde_json::to_value(req).unwrap_or(Value::Null));
                mocks.next().unwrap_or_else(|| stub(req))
            });
            (outcome, effects)
        }
        Some("perform") if !mocks.is_empty() => {
            return Err(ApiError::bad_request(
                "mocks answer effects instead of performing them: use them with `effects: stub` (the default), or drop them to perform",
            ));
        }
        Some("perform") => {
            let mut config = CallConfig {
                tenant_id: tenant.id.clone(),
                refer,
                ..CallConfig::default()
            };
            config.agents.insert(
                ctx.active_agent().to_owned(),
                HashMap::from([(tool.name().to_owned(), ToolEntry::new(Arc::clone(&tool)))]),
            );
            let inv = Invocation {
                call_id: "test".into(),
                function_call_id: "test".into(),
                name: name.clone(),
                arguments_json: args,
                response_id: None,
                item_id: None,
            };
            let exec = state
                .executor
                .execute(&config, &ctx, &inv, &OpenGate, &TransferLedger::default())
                .await;
            let effects = exec
                .call_actions
                .iter()
                .filter_map(|a| serde_json::to_value(a).ok())
                .collect();
            (exec.outcome, effects)
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "effects must be `stub` or `perform`, not `{other}`"
            )));
        }
    };
    Ok(Json(TestResult {
        output: outcome.output(),
        effects,
        writes: outcome
            .writes
            .iter()
            .filter_map(|w| serde_json::to_value(w).ok())
            .collect(),
        logs: outcome
            .logs
            .iter()
            .filter_map(|l| serde_json::to_value(l).ok())
            .collect(),
        handoff: outcome
            .handoff
            .as_ref()
            .and_then(|h| serde_json::to_value(h).ok()),
    }))
}

pub(crate) fn stub(req: &EffectRequest) -> EffectOutcome {
    match req {
        EffectRequest::Http(_) => EffectOutcome::Http(HttpResponse {
            status: 200,
            headers: Map::new(),
            body: json!({}),
        }),
        _ => EffectOutcome::Done { value: Value::Null },
    }
}

pub(crate) fn test_context(tenant: &str, given: Option<&Value>) -> ApiResult<Context> {
    let call = CallInfo {
        id: "test".into(),
        tenant_id: tenant.to_owned(),
        agent: "default".into(),
        from: None,
        to: None,
        started_at: switchboard_runtime::now_rfc3339(),
    };
    Context::from_json(call, given.unwrap_or(&Value::Null)).map_err(ApiError::bad_request)
}
