//! The console's pages and the fragments htmx swaps into them.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_core::builder::{Format, ToolChoice};
use switchboard_core::{RunInput, run_to_end};
use switchboard_runtime::InvocationRecord;
use switchboard_runtime::redact::Redactor;
use switchboard_store::{Page, RecordPage, RecordsAt};

use super::{
    AnySession, Operator, cleared_cookie, is_htmx, open_session, place, render, same_origin,
    to_signin_htmx,
};
use crate::error::ApiError;
use crate::routes::calls::{CallList, CallQuery, call_list};
use crate::routes::replay::{ReplayRun, report};
use crate::routes::tools::{parse_mocks, stub, test_context};
use crate::state::AppState;
use crate::toolset::{agent_toolset, refer_config};

/// Records a page of a timeline shows: the newest on the call's page, then as many earlier
/// ones each time "load earlier" is pressed.
pub(super) const TIMELINE_PAGE: u32 = 200;
/// The most records one poll of a live timeline sends (a page's worth).
pub(super) const TIMELINE_RECORDS: usize = TIMELINE_PAGE as usize;

/// An error as a console answer: its status, and a message that names the fix.
pub(super) fn error_page(e: &ApiError) -> Response {
    let mut r = render(
        "error.html",
        json!({"status": e.status.as_u16(), "message": e.message, "details": e.details}),
    );
    *r.status_mut() = e.status;
    r
}

/// An error as a fragment for a panel (htmx swaps only 2xx answers unless told otherwise, so
/// the panel's error is answered 200 with the status in the text).
pub(super) fn error_fragment(e: &ApiError) -> Response {
    render(
        "error_fragment.html",
        json!({"status": e.status.as_u16(), "message": e.message, "details": e.details}),
    )
}

pub(super) fn nav(op: &Operator, active: &str) -> Value {
    json!({"tenant": op.tenant, "csrf": op.csrf, "active": active})
}

// ---- sign-in ----

#[derive(Debug, Deserialize)]
pub struct SignInQuery {
    /// The console page to go to once signed in (a connect link opened before signing in).
    next: Option<String>,
}

pub async fn signin_page(Query(q): Query<SignInQuery>) -> Response {
    let next = q.next.as_deref().and_then(safe_next);
    render("signin.html", json!({"message": null, "next": next}))
}

/// `next` if it is a page of this console (never another site, and never the sign-in page).
pub(super) fn safe_next(next: &str) -> Option<&str> {
    let ok = next.len() <= 512
        && next.starts_with("/console/")
        && !next.starts_with("/console/signin")
        && !next.contains("//")
        && !next.contains('\\')
        && next.chars().all(|c| c.is_ascii_graphic());
    ok.then_some(next)
}

#[derive(Debug, Deserialize)]
pub struct SignIn {
    key: String,
    #[serde(default)]
    next: String,
}

pub async fn signin(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let next = safe_next(&form.next);
    if !same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            render(
                "signin.html",
                json!({"message": "Sign in from this server's own sign-in page.", "next": next}),
            ),
        )
            .into_response();
    }
    let principal = state
        .store
        .authenticate(form.key.trim())
        .await
        .ok()
        .flatten();
    let refused = |status: StatusCode, message: &str| {
        (
            status,
            render("signin.html", json!({"message": message, "next": next})),
        )
            .into_response()
    };
    let Some(principal) = principal else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "This key is not valid (unknown or revoked). Paste a tenant API key or the admin key.",
        );
    };
    // The admin key opens the admin pages (the tenants); a tenant's key, the tenant's pages.
    let home = match &principal.tenant_id {
        Some(tenant) => {
            if let Err(retry_after) = state.limits.check_rate(tenant) {
                return refused(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!("Too many requests for this tenant; retry in {retry_after} s."),
                );
            }
            next.unwrap_or("/console/tools")
        }
        None => "/console/admin/tenants",
    };
    match open_session(&state, &principal).await {
        Ok(cookie) => {
            let mut r = Redirect::to(home).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => {
            tracing::warn!(name: "console_session_not_opened", error = %e, "console_session_not_opened");
            refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "The session could not be opened (the database did not answer); try again in a moment.",
            )
        }
    }
}

/// Ends the session, in the database (so its cookie opens nothing, on any node) and in the
/// browser. The header's button posts with htmx, which is sent to the sign-in page by
/// `HX-Redirect` (a 303 would be followed by the browser and swapped into the button).
pub async fn signout(
    State(state): State<AppState>,
    session: AnySession,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = session.end(&state).await {
        tracing::warn!(name: "console_signout_failed", error = %e, "console_signout_failed");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Html("<p class=\"error\">Signing out failed: the database did not answer, so the session is still open. Try again in a moment.</p>"),
        )
            .into_response();
    }
    let mut r = if is_htmx(&headers) {
        to_signin_htmx()
    } else {
        Redirect::to("/console/signin").into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&cleared_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

// ---- tools ----

pub async fn tools(State(state): State<AppState>, op: Operator) -> Response {
    let page = Page {
        limit: Page::MAX_LIMIT,
        after: None,
    };
    match state.store.list_tools(&op.tenant, page).await {
        Ok(list) => {
            let items: Vec<Value> = list
                .items
                .iter()
                .map(|t| {
                    json!({"name": t.name, "version": t.version, "created_at": t.created_at,
                       "description": t.definition.get("description").cloned().unwrap_or(Value::Null)})
                })
                .collect();
            render(
                "tools.html",
                json!({"nav": nav(&op, "tools"), "tools": items, "more": list.next.is_some()}),
            )
        }
        Err(e) => error_page(&e.into()),
    }
}

#[derive(Debug, Deserialize)]
pub struct NewTool {
    name: Option<String>,
}

pub async fn tool(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Query(new): Query<NewTool>,
) -> Response {
    // The tools page's "new tool" form asks for `/console/tools/new?name=…`.
    if let (Some(wanted), "new") = (new.name.as_deref(), name.as_str()) {
        let safe = wanted
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if safe && !wanted.is_empty() {
            return Redirect::to(&format!("/console/tools/{wanted}")).into_response();
        }
    }
    let versions = match state.store.list_tool_versions(&op.tenant, &name).await {
        Ok(v) => v,
        Err(e) => return error_page(&e.into()),
    };
    let (definition, is_new) = match versions.last() {
        Some(v) => (v.definition.clone(), false),
        None => (
            json!({"name": name, "description": "What the tool does, for the model", "parameters": [], "actions": [{"type": "respond", "message": "Done."}]}),
            true,
        ),
    };
    let text = serde_json::to_string_pretty(&definition).unwrap_or_default();
    let current = match state.store.get_tool(&op.tenant, &name).await {
        Ok(v) => v.map(|v| v.version),
        Err(e) => return error_page(&e.into()),
    };
    let list: Vec<Value> = versions
        .iter()
        .rev()
        .map(|v| {
            json!({"version": v.version, "created_at": v.created_at, "note": v.note,
                   "published_by": v.published_by})
        })
        .collect();
    render(
        "tool.html",
        json!({"nav": nav(&op, "tools"), "name": name, "definition": text, "is_new": is_new,
               "versions": list, "current": current, "tenant": op.tenant}),
    )
}

#[derive(Debug, Deserialize)]
pub struct Draft {
    definition: String,
    #[serde(default)]
    params: String,
    #[serde(default)]
    mocks: String,
    #[serde(default)]
    context: String,
}

/// The draft's text as a definition, its name checked against the page's tool.
pub(super) fn draft_value(name: &str, text: &str) -> Result<Value, ApiError> {
    let mut def: Value = serde_json::from_str(text).map_err(|e| {
        ApiError::bad_request(format!(
            "the definition is not JSON: {e} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    if let Value::Object(m) = &mut def {
        match m.get("name") {
            None => {
                m.insert("name".into(), Value::String(name.to_owned()));
            }
            Some(Value::String(n)) if n == name => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the definition's name {other} differs from `{name}`, the tool this page edits; rename by creating a new tool"
                )));
            }
        }
    }
    Ok(def)
}

/// The diagnostics of a draft, each with its line and column in the text.
fn diagnostics(state: &AppState, name: &str, text: &str) -> Value {
    let def = match draft_value(name, text) {
        Ok(d) => d,
        Err(e) => {
            let at = serde_json::from_str::<Value>(text)
                .err()
                .map(|e| (e.line(), e.column()));
            return json!({"ok": false, "problems": [{"pointer": "", "message": e.message,
                "fix": "Correct the JSON at the place shown.", "line": at.map(|a| a.0), "column": at.map(|a| a.1), "excerpt": ""}]});
        }
    };
    match switchboard_core::Tool::parse(&def, &state.config.limits) {
        Ok(tool) => json!({"ok": true, "problems": [],
            "function": serde_json::to_string_pretty(&*tool.function_def(false)).unwrap_or_default(),
            "side_effect": format!("{:?}", tool.side_effect()).to_lowercase()}),
        Err(d) => {
            let problems: Vec<Value> =
                d.0.iter()
                    .map(|p| {
                        let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
                        let pointer = v["pointer"].as_str().unwrap_or_default().to_owned();
                        let at = place::locate(text, &pointer);
                        v["line"] = json!(at.map(|a| a.0));
                        v["column"] = json!(at.map(|a| a.1));
                        v["excerpt"] = json!(
                            at.and_then(|(line, _)| text.lines().nth(line - 1))
                                .map(str::trim)
                                .unwrap_or_default()
                        );
                        v
                    })
                    .collect();
            json!({"ok": false, "problems": problems})
        }
    }
}

pub async fn validate(
    State(state): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
    Form(draft): Form<Draft>,
) -> Response {
    render(
        "diagnostics.html",
        diagnostics(&state, &name, &draft.definition),
    )
}

fn json_field(label: &str, text: &str) -> Result<Option<Value>, ApiError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("{label} is not JSON: {e}")))
}

pub async fn dry_run(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(draft): Form<Draft>,
) -> Response {
    let run = async {
        let def = draft_value(&name, &draft.definition)?;
        let tool = Arc::new(crate::routes::tools::parse(&state, &def)?);
        let params = json_field("params", &draft.params)?.unwrap_or(json!({}));
        let mocks = match json_field("mocks", &draft.mocks)? {
            None => Vec::new(),
            Some(Value::Array(m)) => parse_mocks(Some(&m))?,
            Some(_) => {
                return Err(ApiError::bad_request(
                    "mocks must be a list of effect outcomes, e.g. [{\"kind\": \"http\", \"status\": 503, \"body\": {}}]",
                ));
            }
        };
        let context = json_field("context", &draft.context)?;
        let ctx = test_context(&op.tenant, context.as_ref())?;
        let input = RunInput {
            refer: refer_config(&state, &op.tenant).await?,
            now: Arc::new(json!(switchboard_runtime::now_rfc3339())),
            ..RunInput::new("dry-run")
        };
        let mut effects = Vec::new();
        let mut mocks = mocks.into_iter();
        let outcome = run_to_end(&tool, input, &params.to_string(), &ctx, |req| {
            let answer = mocks.next().unwrap_or_else(|| stub(req));
            effects.push(json!({"request": req, "outcome": answer}));
            answer
        });
        Ok::<_, ApiError>(json!({
            "output": serde_json::to_string_pretty(&outcome.output()).unwrap_or_default(),
            "ok": outcome.ok(),
            "writes": outcome.writes.iter().map(|w| serde_json::to_string(w).unwrap_or_default()).collect::<Vec<_>>(),
            "effects": effects.iter().map(|e| json!({
                "request": serde_json::to_string(&e["request"]).unwrap_or_default(),
                "outcome": serde_json::to_string(&e["outcome"]).unwrap_or_default()})).collect::<Vec<_>>(),
            "logs": outcome.logs.iter().map(|l| l.message.clone()).collect::<Vec<_>>(),
        }))
    };
    match run.await {
        Ok(v) => render("dryrun.html", v),
        Err(e) => error_fragment(&e),
    }
}

pub async fn replay(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(draft): Form<Draft>,
) -> Response {
    let run = async {
        let def = draft_value(&name, &draft.definition)?;
        let run = ReplayRun {
            definition: Some(def),
            last_calls: Some(super::publishing::REPLAYED_CALLS),
            ..Default::default()
        };
        report(&state, &op.tenant, name.clone(), &run).await
    };
    match run.await {
        Ok(r) => {
            let invocations: Vec<Value> = r
                .invocations
                .iter()
                .map(|i| {
                    let diff =
                        |a: &Value, b: &Value| diff_runs(line_diff(&pretty(a), &pretty(b)));
                    json!({
                        "call_id": i.call_id,
                        "function_call_id": i.function_call_id,
                        "verdict": i.verdict,
                        "reason": i.reason,
                        "arguments": i.arguments.to_string(),
                        "output_changed": i.output_changed,
                        "output_diff": diff(&i.recorded_output, &i.replayed_output),
                        "writes_changed": i.writes_changed,
                        "writes_diff": diff(&json!(i.recorded_writes), &json!(i.replayed_writes)),
                        "effects": i.effects.iter().map(|e| json!({"status": e.status, "request": describe(&serde_json::to_value(&e.request).unwrap_or(Value::Null))})).collect::<Vec<_>>(),
                        "not_requested": i.effects_not_requested.iter().map(|e| describe(&serde_json::to_value(e).unwrap_or(Value::Null))).collect::<Vec<_>>(),
                    })
                })
                .collect();
            render(
                "replay.html",
                json!({"summary": r.summary, "invocations": invocations,
                       "calls": r.calls.len(), "asked_calls": super::publishing::REPLAYED_CALLS,
                       "truncated": r.truncated}),
            )
        }
        Err(e) => error_fragment(&e),
    }
}

#[derive(Debug, Deserialize)]
pub struct DiffQuery {
    a: i64,
    b: i64,
}

pub async fn diff(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Query(q): Query<DiffQuery>,
) -> Response {
    let run = async {
        let mut texts = Vec::new();
        for v in [q.a, q.b] {
            let found = state
                .store
                .get_tool_version(&op.tenant, &name, v)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("version {v} of tool `{name}`")))?;
            texts.push(pretty(&found.definition));
        }
        Ok::<_, ApiError>(line_diff(&texts[0], &texts[1]))
    };
    match run.await {
        Ok(lines) => render(
            "diff.html",
            json!({"a": q.a, "b": q.b, "runs": diff_runs(lines),
                   "label": format!("Changes from v{} to v{}", q.a, q.b)}),
        ),
        Err(e) => error_fragment(&e),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A line diff: each line with its tag (`same`, `added`, `removed`).
pub(super) fn line_diff(a: &str, b: &str) -> Vec<Value> {
    let diff = similar::TextDiff::from_lines(a, b);
    diff.iter_all_changes()
        .map(|c| {
            let tag = match c.tag() {
                similar::ChangeTag::Equal => "same",
                similar::ChangeTag::Insert => "added",
                similar::ChangeTag::Delete => "removed",
            };
            json!({"tag": tag, "text": c.value().trim_end_matches('\n')})
        })
        .collect()
}

/// Unchanged lines shown around each change; a longer unchanged run folds the rest away.
const DIFF_CONTEXT: usize = 3;

/// A line diff as the page shows it: runs of lines, the unchanged ones more than
/// [`DIFF_CONTEXT`] lines from any change in runs that are `hidden` (folded, opened on a click).
pub(super) fn diff_runs(lines: Vec<Value>) -> Vec<Value> {
    let mut runs = Vec::new();
    let mut shown: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let same = lines[i..].iter().take_while(|l| l["tag"] == "same").count();
        if same == 0 {
            shown.push(lines[i].clone());
            i += 1;
            continue;
        }
        let lead = if i == 0 { 0 } else { DIFF_CONTEXT };
        let tail = if i + same == lines.len() {
            0
        } else {
            DIFF_CONTEXT
        };
        // Folding fewer than a few lines saves nothing.
        if same > lead + tail + 2 {
            shown.extend_from_slice(&lines[i..i + lead]);
            runs.push(json!({"hidden": false, "lines": std::mem::take(&mut shown)}));
            runs.push(json!({"hidden": true, "lines": &lines[i + lead..i + same - tail]}));
            shown.extend_from_slice(&lines[i + same - tail..i + same]);
        } else {
            shown.extend_from_slice(&lines[i..i + same]);
        }
        i += same;
    }
    runs.push(json!({"hidden": false, "lines": shown}));
    runs.retain(|r| r["lines"].as_array().is_some_and(|l| !l.is_empty()));
    runs
}

/// One line for an effect request: `GET https://…` for HTTP, else its kind and target.
fn describe(request: &Value) -> String {
    match request["kind"].as_str() {
        Some("http") => format!(
            "{} {}",
            request["method"].as_str().unwrap_or(""),
            request["url"].as_str().unwrap_or("")
        ),
        Some("transfer") => format!(
            "transfer to {}",
            request["target_uri"].as_str().unwrap_or("")
        ),
        Some("mcp") => format!(
            "mcp {}/{}",
            request["server"].as_str().unwrap_or(""),
            request["tool"].as_str().unwrap_or("")
        ),
        Some("toolkit") => request["action"].as_str().unwrap_or("toolkit").to_owned(),
        Some(kind) => kind.to_owned(),
        None => String::new(),
    }
}

// ---- agents ----

pub async fn agents(State(state): State<AppState>, op: Operator) -> Response {
    let page = Page {
        limit: Page::MAX_LIMIT,
        after: None,
    };
    let run = async {
        let list = state.store.list_agents(&op.tenant, page).await?;
        let connections = state.store.list_connections(&op.tenant).await?;
        let items: Vec<Value> = list
            .items
            .iter()
            .map(|a| {
                json!({"name": a.name, "default": a.default, "tools": a.tools.len(),
                       "connections": super::connect::connections_of(a, &connections)})
            })
            .collect();
        Ok::<_, ApiError>(json!({"nav": nav(&op, "agents"), "agents": items}))
    };
    match run.await {
        Ok(v) => render("agents.html", v),
        Err(e) => error_page(&e),
    }
}

#[derive(Debug, Deserialize)]
pub struct FormatQuery {
    format: Option<String>,
    /// `/console/agents/new?name=…`: the editor for a new agent of that name.
    name: Option<String>,
    /// Set once the editor saved the agent.
    saved: Option<String>,
}

pub async fn agent(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Query(q): Query<FormatQuery>,
) -> Response {
    // The agents page's "new agent" form asks for `/console/agents/new?name=…`.
    if let (Some(wanted), "new") = (q.name.as_deref(), name.as_str()) {
        return super::agent_edit::new_page(&state, &op, wanted).await;
    }
    let run = async {
        let agent = state
            .store
            .get_agent(&op.tenant, &name)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("agent `{name}`")))?;
        let format_name = q.format.as_deref().unwrap_or("openai-realtime");
        let format: Format = format_name
            .parse()
            .map_err(|e| ApiError::bad_request(format!("{e}")))?;
        let toolset = agent_toolset(&state, &op.tenant, &name, false, None::<ToolChoice>).await?;
        // A number routes to an agent by name, or by `{agent, api}` (Realtime or GPT-Live).
        let numbers: Vec<String> = state
            .store
            .get_tenant(&op.tenant)
            .await?
            .and_then(|t| crate::phone::RealtimeFeature::of(&t.features).ok())
            .map(|f| {
                f.phone_numbers
                    .iter()
                    .filter(|(_, route)| route.agent() == Some(name.as_str()))
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default();
        let connections = super::connect::agent_connections(&state, &op.tenant, &agent).await?;
        let tools: Vec<Value> = agent
            .tools
            .iter()
            .map(|t| {
                json!({"tool": t.tool, "enabled": t.enabled, "config": t.config.to_string(),
                       "sensitive_config_set": t.sensitive_config_set})
            })
            .collect();
        Ok::<_, ApiError>(json!({
            "nav": nav(&op, "agents"),
            "name": agent.name,
            "instructions": agent.instructions,
            "default": agent.default,
            "handoffs": agent.handoffs,
            "tools": tools,
            "numbers": numbers,
            "connections": connections,
            "format": format_name,
            "formats": ["openai-realtime", "openai-chat", "openai-responses", "anthropic", "mcp"],
            "toolset": pretty(&toolset.render(format)),
            "editor": super::agent_edit::editable(&agent),
            "base": agent.updated_at,
            "numbers_text": numbers.join(", "),
            "saved": q.saved.is_some(),
        }))
    };
    match run.await {
        Ok(v) => render("agent.html", v),
        Err(e) => error_page(&e),
    }
}

// ---- calls ----

/// The calls page: the tenant's calls a page at a time, searched like `GET /v1/calls` (the
/// same query, read by the same code). A bad value shows the page again with the form as
/// typed and the error naming the field (400).
pub async fn calls(
    State(state): State<AppState>,
    op: Operator,
    q: Result<Query<CallQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error_page(&ApiError::from(e)),
    };
    let filters = filters_of(&q);
    let listed = async {
        let wanted = q.wanted()?;
        call_list(&state, &op.tenant, &wanted).await
    };
    let (status, list, error) = match listed.await {
        Ok(list) => (StatusCode::OK, Some(list), None),
        Err(e) if e.status == StatusCode::BAD_REQUEST => {
            (StatusCode::BAD_REQUEST, None, Some(e.message))
        }
        Err(e) => return error_page(&e),
    };
    let search = search_query(&q);
    let link = |cursor: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|v| format!("/console/calls?{search}{cursor}={}", urlencode(v)))
    };
    let rows = list.as_ref().map(|l| list_rows(&state, &op.tenant, l));
    let events = {
        let mut here = search.clone();
        for (name, value) in [("after", &q.after), ("before", &q.before)] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                here.push_str(&format!("{name}={}&", urlencode(v)));
            }
        }
        format!("/console/calls-live?{}", here.trim_end_matches('&'))
    };
    let mut r = render(
        "calls.html",
        json!({"nav": nav(&op, "calls"), "calls": rows, "error": error, "filters": filters,
               "next": list.as_ref().and_then(|l| link("after", &l.next)),
               "previous": list.as_ref().and_then(|l| link("before", &l.previous)),
               "events_url": events}),
    );
    *r.status_mut() = status;
    r
}

/// The form's fields as typed, to show them again.
fn filters_of(q: &CallQuery) -> Value {
    json!({"id": q.id, "number": q.number, "user_id": q.user_id, "agent": q.agent,
           "tool": q.tool, "error": q.error, "status": q.status, "outcome": q.outcome,
           "since": q.since, "until": q.until})
}

/// The search's part of a query string (no cursor), each pair followed by `&`.
pub(super) fn search_query(q: &CallQuery) -> String {
    let pairs = [
        ("id", &q.id),
        ("number", &q.number),
        ("user_id", &q.user_id),
        ("agent", &q.agent),
        ("tool", &q.tool),
        ("error", &q.error),
        ("status", &q.status),
        ("outcome", &q.outcome),
        ("since", &q.since),
        ("until", &q.until),
        ("limit", &q.limit),
    ];
    pairs
        .iter()
        .filter_map(|(name, value)| {
            let v = value.as_deref().filter(|v| !v.is_empty())?;
            Some(format!("{name}={}&", urlencode(v)))
        })
        .collect()
}

/// The list's rows as the page's template reads them.
pub(super) fn list_rows(state: &AppState, tenant: &str, list: &CallList) -> Vec<Value> {
    list.items
        .iter()
        .map(|c| {
            json!({"id": c.call_id, "href": urlencode(&c.call_id), "agent": c.agent,
                   "status": c.status, "failed": c.failed, "from": c.from, "to": c.to,
                   "user_id": c.user_id, "created_at": c.started_at, "ended_at": c.ended_at,
                   "live_here": state.calls.get(tenant, &c.call_id).is_some()})
        })
        .collect()
}

/// A record as a timeline row: redacted, with its effects and context changes from its trace.
pub(super) fn row(redactor: &Redactor, mut r: InvocationRecord) -> Value {
    // The row shows the trace's effects and writes, not the context and input the trace also
    // keeps for replays: only those two parts are redacted (as values, as `redact_record`
    // redacts the whole trace), so a long call's context is not redacted again on every row.
    let trace = r.trace.take();
    let r = redactor.redact_record(&r);
    let shown = trace.map(|t| {
        let t = *t;
        (
            redacted_part(redactor, &t.effects).unwrap_or_default(),
            redacted_part(redactor, &t.writes).unwrap_or_default(),
        )
    });
    let bookings: Vec<Value> = shown
        .iter()
        .flat_map(|(effects, _)| effects)
        .filter_map(|e| booking(&e.request, &e.outcome))
        .collect();
    let (effects, writes) = match &shown {
        Some((effects, writes)) => (
            effects
                .iter()
                .map(|e| {
                    let req = serde_json::to_value(&e.request).unwrap_or(Value::Null);
                    let out = match &e.outcome {
                        switchboard_core::EffectOutcome::Http(h) => format!("HTTP {}", h.status),
                        switchboard_core::EffectOutcome::Done { .. } => "done".to_owned(),
                        switchboard_core::EffectOutcome::Failed(err) => {
                            format!("failed: {}", err.code.as_str())
                        }
                    };
                    let out = if e.cached {
                        format!("{out} · from this call's cache")
                    } else {
                        out
                    };
                    json!({"request": describe(&req), "outcome": out})
                })
                .collect::<Vec<_>>(),
            writes
                .iter()
                .map(|w| serde_json::to_string(w).unwrap_or_default())
                .collect::<Vec<_>>(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let mut v = json!({
        "function_call_id": r.function_call_id,
        "tool": r.tool,
        "arguments": r.arguments,
        "output": r.output,
        "ok": r.ok,
        "error": r.error.map(|e| e.as_str()),
        "latency_ms": format!("{:.1}", r.latency_ms),
        "started_at": r.started_at,
        "interrupted": r.interrupted,
        "duplicate_of": r.duplicate_of,
        "policy": r.policy.as_ref().map(|p| p.describe()),
        "effects": effects,
        "writes": writes,
        "bookings": bookings,
    });
    redactor.redact_value(&mut v);
    v
}

/// The calendar event a booking effect made or moved (`calendar.create_event`,
/// `calendar.reschedule_event`), as the timeline links it: its id, and its page when the
/// calendar gave one (Google's `htmlLink`, a CalDAV resource URL) and it is a web address.
fn booking(
    request: &switchboard_core::EffectRequest,
    outcome: &switchboard_core::EffectOutcome,
) -> Option<Value> {
    let switchboard_core::EffectRequest::Toolkit(t) = request else {
        return None;
    };
    if !matches!(
        t.action.as_str(),
        "calendar.create_event" | "calendar.reschedule_event"
    ) {
        return None;
    }
    let switchboard_core::EffectOutcome::Done { value } = outcome else {
        return None;
    };
    let id = value.get("id").and_then(Value::as_str)?;
    let link = value
        .get("link")
        .and_then(Value::as_str)
        .filter(|l| l.starts_with("https://") || l.starts_with("http://"));
    Some(json!({
        "id": id,
        "link": link,
        "start": value.get("start"),
        "moved": t.action == "calendar.reschedule_event",
    }))
}

/// A part of a record's trace redacted as values; `None` (shown as nothing) when it cannot be
/// read back, so a part is never shown unredacted.
fn redacted_part<T: serde::Serialize + serde::de::DeserializeOwned>(
    redactor: &Redactor,
    part: &T,
) -> Option<T> {
    let mut v = serde_json::to_value(part).ok()?;
    redactor.redact_value(&mut v);
    serde_json::from_value(v).ok()
}

/// The call's timeline page: its newest [`TIMELINE_RECORDS`] records (a live call's new ones
/// follow over [`super::events::call_events`]), a notice when earlier ones are not shown, and
/// a button loading them a page at a time ([`call_rows`]).
pub async fn call(State(state): State<AppState>, op: Operator, Path(id): Path<String>) -> Response {
    let run = async {
        let row_ = state
            .store
            .get_call(&op.tenant, &id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("call `{id}`")))?;
        let page = state
            .store
            .invocation_page(&op.tenant, &id, &RecordsAt::Newest, TIMELINE_PAGE)
            .await?;
        let live = state.calls.get(&op.tenant, &id);
        let redactor =
            crate::calls::view_redactor(&state, &op.tenant, live.as_deref(), &row_.context).await?;
        let total = page.total;
        let earlier = earlier(&id, &page);
        let rows: Vec<Value> = page.items.into_iter().map(|r| row(&redactor, r)).collect();
        Ok::<_, ApiError>(json!({
            "nav": nav(&op, "calls"),
            "id": redactor.redact(&id),
            "events_url": format!(
                "/console/calls/{}/events?after={}&context={}",
                urlencode(&id), total, row_.version
            ),
            "agent": row_.agent,
            "status": row_.status.as_str(),
            "created_at": row_.created_at,
            "shown": rows.len(),
            "rows": rows,
            "earlier": earlier,
            "total": total,
            "context": context_text(&redactor, &row_.context),
        }))
    };
    match run.await {
        Ok(v) => render("call.html", v),
        Err(e) => error_page(&e),
    }
}

/// The call's context as the page shows it: every string redacted, pretty JSON.
pub(super) fn context_text(redactor: &Redactor, context: &switchboard_core::Context) -> String {
    let mut context = serde_json::to_value(context).unwrap_or(Value::Null);
    redactor.redact_value(&mut context);
    pretty(&context)
}

/// The "load earlier" row's data when a page does not start at the call's first record.
fn earlier(id: &str, page: &RecordPage) -> Value {
    match &page.previous {
        Some(cursor) => json!({
            "count": page.before,
            "url": format!("/console/calls/{}/rows?before={}", urlencode(id), urlencode(cursor)),
            "next": page.before.min(u64::from(TIMELINE_PAGE)),
        }),
        None => Value::Null,
    }
}

#[derive(Debug, Deserialize)]
pub struct RowsQuery {
    before: Option<String>,
}

/// An htmx fragment: the page of a call's timeline before a cursor (the rows, and the "load
/// earlier" row again while earlier ones remain), swapped in place of the button that asked.
pub async fn call_rows(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Query(q): Query<RowsQuery>,
) -> Response {
    let run = async {
        let (at, limit) = crate::routes::calls::records_at(
            Some(&TIMELINE_PAGE.to_string()),
            None,
            q.before.as_deref(),
        )?;
        let call = state
            .store
            .get_call(&op.tenant, &id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("call `{id}`")))?;
        let page = state
            .store
            .invocation_page(&op.tenant, &id, &at, limit)
            .await?;
        let live = state.calls.get(&op.tenant, &id);
        let redactor =
            crate::calls::view_redactor(&state, &op.tenant, live.as_deref(), &call.context).await?;
        let earlier = earlier(&id, &page);
        let rows: Vec<Value> = page.items.into_iter().map(|r| row(&redactor, r)).collect();
        Ok::<_, ApiError>(json!({"rows": rows, "earlier": earlier}))
    };
    match run.await {
        Ok(v) => render("rows.html", v),
        Err(e) => {
            let mut r = error_fragment(&e);
            *r.status_mut() = e.status;
            r
        }
    }
}

pub(super) fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
