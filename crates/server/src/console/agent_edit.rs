//! The agent editor: an agent's instructions and the numbers routed to it, each in its own box,
//! and the rest of its definition (tools and their config, handoffs, filler, turn budget,
//! guards, default) as JSON. Saving checks the whole through the checks of
//! `PUT /v1/agents/{name}` ([`checked_agent`]) and shows each problem at its line of the JSON
//! (or at its box), or saves and reloads the page.
//!
//! Sensitive config is write-only here as in the API: the editor's JSON never holds it; an
//! entry that names `sensitive_config` sets or replaces it, one that leaves it out keeps what is
//! stored, `null` clears it.
//!
//! The form is bounded as an API request is (the server's `max_body_bytes`), its JSON by the
//! depth limit of API bodies, its numbers by [`MAX_NUMBERS`].

use std::collections::{BTreeMap, BTreeSet};

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_core::json_bounds::text_deeper_than;
use switchboard_store::Agent;

use super::pages::urlencode;
use super::{Operator, place, render};
use crate::error::ApiError;
use crate::phone::{NumberRoute, RealtimeFeature};
use crate::routes::agents::{AgentBody, checked_agent};
use crate::routes::settings::check_features;
use crate::state::AppState;

/// The most phone numbers the editor routes to one agent.
pub(super) const MAX_NUMBERS: usize = 100;

/// The editor's JSON for an agent: what `PUT /v1/agents/{name}` takes, without the name and the
/// instructions (their own boxes) and without sensitive config, which is never shown.
pub(super) fn editable(agent: &Agent) -> String {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            m.insert(k.to_owned(), v);
        }
    };
    put("model", json!(agent.model));
    put("voice", json!(agent.voice));
    put("live", json!(agent.live));
    put("guards", json!(agent.guards));
    put("turn_budget_ms", json!(agent.turn_budget_ms));
    put("filler", json!(agent.filler));
    let tools: Vec<Value> = agent
        .tools
        .iter()
        .map(|t| {
            let mut e = json!({"tool": t.tool, "enabled": t.enabled, "config": t.config});
            if let Some(actions) = &t.actions {
                e["actions"] = json!(actions);
            }
            e
        })
        .collect();
    put("tools", json!(tools));
    put("handoffs", json!(agent.handoffs));
    put("default", json!(agent.default));
    serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default()
}

/// The editor's JSON for a new agent.
pub(super) fn blank() -> String {
    serde_json::to_string_pretty(&json!({"tools": [], "handoffs": [], "default": false}))
        .unwrap_or_default()
}

/// The numbers the tenant's `features.realtime.phone_numbers` route to `agent`.
pub(super) fn numbers_of(features: &Value, agent: &str) -> Vec<String> {
    RealtimeFeature::of(features)
        .map(|f| {
            f.phone_numbers
                .iter()
                .filter(|(_, route)| route.agent() == Some(agent))
                .map(|(n, _)| n.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Deserialize)]
pub struct AgentForm {
    #[serde(default)]
    instructions: String,
    definition: String,
    #[serde(default)]
    phone_numbers: String,
    /// The agent's `updated_at` when the page was opened (empty for a new agent).
    #[serde(default)]
    base: String,
    /// `yes` when the page creates the agent.
    #[serde(default)]
    create: String,
}

/// A problem the page shows: at a line of the JSON, or at one of the other boxes.
fn at_line(text: &str, pointer: &str, message: String, fix: Option<String>) -> Value {
    let at = place::locate(text, pointer);
    json!({"pointer": pointer, "message": message, "fix": fix,
           "line": at.map(|a| a.0), "column": at.map(|a| a.1)})
}

fn at_field(field: &str, label: &str, message: String, fix: &str) -> Value {
    json!({"pointer": "", "field": field, "field_label": label, "message": message, "fix": fix})
}

/// The problems of a save, as the editor's problem list.
fn problems(summary: &str, problems: Vec<Value>) -> Response {
    render(
        "diagnostics.html",
        json!({"ok": false, "summary": summary, "problems": problems}),
    )
}

pub async fn save(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(form): Form<AgentForm>,
) -> Response {
    match save_checked(&state, &op, &name, form).await {
        Ok(r) => r,
        Err(e) => super::pages::error_fragment(&e),
    }
}

async fn save_checked(
    state: &AppState,
    op: &Operator,
    name: &str,
    form: AgentForm,
) -> Result<Response, ApiError> {
    let existing = state.store.get_agent(&op.tenant, name).await?;
    match (&existing, form.create == "yes") {
        (Some(_), true) => {
            return Ok(problems(
                &format!("Agent `{name}` exists already."),
                vec![
                    json!({"pointer": "", "message": format!("this tenant has an agent `{name}`"),
                            "fix": "open its page to edit it, or choose another name"}),
                ],
            ));
        }
        (None, false) => return Err(ApiError::not_found(format!("agent `{name}`"))),
        (Some(a), false) if a.updated_at != form.base => {
            return Ok(problems(
                &format!("Agent `{name}` changed since this page was opened."),
                vec![
                    json!({"pointer": "", "message": format!("it was saved again at {}", a.updated_at),
                            "fix": "reload the page to edit the saved version (copy your changes first)"}),
                ],
            ));
        }
        _ => {}
    }
    let text = form.definition.replace("\r\n", "\n");
    let instructions = form.instructions.replace("\r\n", "\n");
    let max_depth = state.config.limits.json_depth();
    if let Some(depth) = text_deeper_than(text.as_bytes(), max_depth) {
        return Ok(problems(
            "The definition cannot be read.",
            vec![
                json!({"pointer": "", "message": format!("the JSON nests {depth} levels deep, over the limit of {max_depth}"),
                        "fix": "write flatter JSON"}),
            ],
        ));
    }
    // Read once as a value, for the fields written in their own boxes, and once as the API's
    // body, whose errors name their line and column in the text as typed.
    let value: Result<Value, _> = serde_json::from_str(&text);
    let body = value.and_then(|v| serde_json::from_str::<AgentBody>(&text).map(|b| (v, b)));
    let (value, mut body) = match body {
        Ok(b) => b,
        Err(e) => {
            return Ok(problems(
                "The definition cannot be read.",
                vec![json!({"pointer": "", "message": e.to_string(),
                            "fix": "correct the JSON at the place shown",
                            "line": e.line(), "column": e.column()})],
            ));
        }
    };
    for (field, label) in [
        ("instructions", "Instructions"),
        ("name", "the page's name"),
    ] {
        if value.get(field).is_some() {
            return Ok(problems(
                "The definition cannot be saved.",
                vec![at_line(
                    &text,
                    &format!("/{field}"),
                    format!("`{field}` is not written here: it is {label}"),
                    Some(format!("remove `{field}` from the JSON")),
                )],
            ));
        }
    }
    body.instructions = instructions;
    let numbers = match routed_numbers(state, &op.tenant, name, &form.phone_numbers).await? {
        Ok(n) => n,
        Err(p) => return Ok(problems("The phone numbers cannot be saved.", p)),
    };
    let def = match checked_agent(state, &op.tenant, name, body).await {
        Ok(d) => d,
        Err(e) if e.status == StatusCode::BAD_REQUEST => {
            let placed: Vec<Value> = match e.details.as_ref().and_then(Value::as_array) {
                Some(details) => details
                    .iter()
                    .map(|d| {
                        let pointer = d["pointer"].as_str().unwrap_or_default();
                        at_line(
                            &text,
                            pointer,
                            d["message"].as_str().unwrap_or_default().to_owned(),
                            d["fix"].as_str().map(str::to_owned),
                        )
                    })
                    .collect(),
                None => vec![json!({"pointer": "", "message": e.message})],
            };
            return Ok(problems(&e.message, placed));
        }
        Err(e) => return Err(e),
    };
    // The agent and its numbers land together, or neither.
    let routing = numbers.as_ref().map(|(f, seen)| (f, seen.as_str()));
    state
        .store
        .put_agent_routed(&op.tenant, &def, routing)
        .await?;
    let to = format!("/console/agents/{}?saved=1", urlencode(name));
    let mut r = StatusCode::OK.into_response();
    if let Ok(v) = HeaderValue::from_str(&to) {
        r.headers_mut().insert("HX-Redirect", v);
    }
    Ok(r)
}

/// The tenant's features with `typed` (numbers separated by commas, spaces or lines) routed to
/// `agent` and no other number routed to it, with the tenant's `updated_at` when they were read
/// (the save lands only on the tenant as read); `None` when nothing changes. A number routed to
/// another agent is a problem: it is taken from that agent on that agent's page.
async fn routed_numbers(
    state: &AppState,
    tenant: &str,
    agent: &str,
    typed: &str,
) -> Result<Result<Option<(Value, String)>, Vec<Value>>, ApiError> {
    let wanted: BTreeSet<&str> = typed
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .collect();
    const FIELD: &str = "phone-numbers";
    const LABEL: &str = "Phone numbers";
    if wanted.len() > MAX_NUMBERS {
        return Ok(Err(vec![at_field(
            FIELD,
            LABEL,
            format!(
                "{} numbers are listed; an agent answers at most {MAX_NUMBERS}",
                wanted.len()
            ),
            "route fewer numbers to this agent",
        )]));
    }
    let read = state
        .store
        .get_tenant(tenant)
        .await?
        .ok_or_else(|| ApiError::not_found("this tenant"))?;
    let (mut features, seen) = (read.features, read.updated_at);
    let mut routes: BTreeMap<String, NumberRoute> = RealtimeFeature::of(&features)
        .map_err(ApiError::bad_request)?
        .phone_numbers;
    let mut problems = Vec::new();
    let mut kept: BTreeMap<String, NumberRoute> = routes
        .iter()
        .filter(|(_, r)| r.agent() != Some(agent))
        .map(|(n, r)| (n.clone(), r.clone()))
        .collect();
    for number in &wanted {
        // Each number checked as `PUT /v1/features` checks it.
        let one = json!({"phone_numbers": {*number: agent}});
        if let Err(message) = RealtimeFeature::parse(&one) {
            problems.push(at_field(
                FIELD,
                LABEL,
                message,
                "write each number as in the SIP To header, e.g. +18005551212",
            ));
            continue;
        }
        match kept.get(*number) {
            Some(other) => problems.push(at_field(
                FIELD,
                LABEL,
                format!(
                    "`{number}` is routed to {}",
                    other.agent().map_or_else(
                        || "the default agent".to_owned(),
                        |a| format!("agent `{a}`")
                    )
                ),
                "remove it from that agent's numbers first, or from this list",
            )),
            None => {
                let route = routes
                    .remove(*number)
                    .unwrap_or_else(|| NumberRoute::Agent(agent.to_owned()));
                kept.insert((*number).to_owned(), route);
            }
        }
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    let before = numbers_of(&features, agent);
    if before.len() == wanted.len() && before.iter().all(|n| wanted.contains(n.as_str())) {
        return Ok(Ok(None));
    }
    let realtime = features.as_object_mut().map(|m| {
        let r = m.entry("realtime").or_insert_with(|| json!({}));
        if r.is_null() {
            *r = json!({});
        }
        r
    });
    let Some(Value::Object(realtime)) = realtime else {
        return Err(ApiError::bad_request(
            "this tenant's features are not an object; fix them with PUT /v1/features",
        ));
    };
    realtime.insert("phone_numbers".to_owned(), json!(kept));
    if let Err(e) = check_features(&features) {
        return Ok(Err(vec![at_field(
            FIELD,
            LABEL,
            e.message,
            "correct the numbers",
        )]));
    }
    Ok(Ok(Some((features, seen))))
}

/// The editor for a new agent named `name`; an agent of that name opens its own page.
pub(super) async fn new_page(state: &AppState, op: &Operator, name: &str) -> Response {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return super::pages::error_page(&ApiError::bad_request(
            "an agent's name is 1-64 letters, digits, `_` or `-`; go back and choose another",
        ));
    }
    match state.store.get_agent(&op.tenant, name).await {
        Ok(Some(_)) => {
            axum::response::Redirect::to(&format!("/console/agents/{name}")).into_response()
        }
        Ok(None) => render(
            "agent.html",
            json!({"nav": super::pages::nav(op, "agents"), "name": name, "is_new": true,
                   "editor": blank(), "base": "", "numbers_text": "", "instructions": "",
                   "saved": false}),
        ),
        Err(e) => super::pages::error_page(&e.into()),
    }
}
