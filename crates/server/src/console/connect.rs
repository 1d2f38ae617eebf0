//! Connecting an agent's OAuth2 toolkit (Google Calendar) from the console: the page that says
//! which tenant and agent a connection is for and how it stands, and the start of the flow.
//!
//! Only a browser signed in to the tenant's console can start a flow; starting it (a post with
//! the session's CSRF token) sets the cookie that binds the flow to this browser and sends the
//! browser to the provider's consent page. The callback (`routes/connections.rs`) completes the
//! flow only for the browser holding that cookie. The REST API's `connect_url` leads here.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{Value, json};
use switchboard_core::toolkits::find;

use super::pages::{error_fragment, error_page, nav, urlencode};
use super::session::now_ms;
use super::{Operator, Refusal, is_htmx, render};
use crate::error::ApiError;
use crate::routes::connections::{STATE_TTL_MS, flow_cookie, tokens_for};
use crate::state::AppState;

/// The path of the page connecting `agent`'s `toolkit`.
fn page_path(agent: &str, toolkit: &str) -> String {
    format!(
        "/console/agents/{}/connections/{}",
        urlencode(agent),
        urlencode(toolkit)
    )
}

/// The agent's OAuth2 toolkits and how each is connected, for its page.
pub(super) async fn agent_connections(
    state: &AppState,
    tenant: &str,
    agent: &switchboard_store::Agent,
) -> Result<Vec<Value>, ApiError> {
    if oauth_kits(agent).next().is_none() {
        return Ok(Vec::new());
    }
    let connections = state.store.list_connections(tenant).await?;
    Ok(connections_of(agent, &connections))
}

/// The OAuth2 toolkits an agent uses.
fn oauth_kits(agent: &switchboard_store::Agent) -> impl Iterator<Item = &str> {
    agent
        .tools
        .iter()
        .filter_map(|t| t.tool.strip_prefix("toolkit:"))
        .filter(|name| find(name).is_some_and(|k| k.auth_type == Some("oauth2")))
}

/// How each of the agent's OAuth2 toolkits is connected, from the tenant's `connections`:
/// `state` is what the operator reads (`ok`, `broken` with its `error`, `never connected`);
/// `refreshed_at` is the last change of its tokens (the connection, or a refresh). Never a
/// token.
pub(super) fn connections_of(
    agent: &switchboard_store::Agent,
    connections: &[switchboard_store::ConnectionInfo],
) -> Vec<Value> {
    oauth_kits(agent)
        .map(|kit| {
            let found = connections
                .iter()
                .find(|c| c.agent == agent.name && c.toolkit == kit);
            let state = match found.map(|c| c.status.as_str()) {
                None => "never connected",
                Some("connected") => "ok",
                Some(_) => "broken",
            };
            json!({
                "toolkit": kit,
                "status": found.map_or("not connected", |c| c.status.as_str()),
                "state": state,
                "error": found.and_then(|c| c.error.clone()),
                "connected_at": found.map(|c| c.created_at.clone()),
                "updated_at": found.map(|c| c.updated_at.clone()),
                "refreshed_at": found.map(|c| c.updated_at.clone()),
                "href": page_path(&agent.name, kit),
            })
        })
        .collect()
}

/// The agent and toolkit of a connect page, checked: the toolkit connects with OAuth2 and this
/// server has a client for it, and the agent is the tenant's.
async fn checked(
    state: &AppState,
    tenant: &str,
    agent: &str,
    toolkit: &str,
) -> Result<switchboard_store::Agent, ApiError> {
    tokens_for(state, toolkit)?;
    state
        .store
        .get_agent(tenant, agent)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent `{agent}`")))
}

/// The connect page. Without a session it sends the browser to sign in and come back here.
pub async fn connect_page(
    State(state): State<AppState>,
    op: Result<Operator, Refusal>,
    Path((agent, toolkit)): Path<(String, String)>,
) -> Response {
    let op = match op {
        Ok(op) => op,
        Err(Refusal::SignIn) => {
            let back = urlencode(&page_path(&agent, &toolkit));
            return Redirect::to(&format!("/console/signin?next={back}")).into_response();
        }
        Err(other) => return other.into_response(),
    };
    let run = async {
        let found = checked(&state, &op.tenant, &agent, &toolkit).await?;
        let this = agent_connections(&state, &op.tenant, &found)
            .await?
            .into_iter()
            .find(|c| c["toolkit"] == toolkit.as_str());
        Ok::<_, ApiError>(json!({
            "nav": nav(&op, "agents"),
            "agent": agent,
            "agent_href": format!("/console/agents/{}", urlencode(&agent)),
            "toolkit": toolkit,
            "enabled": this.is_some(),
            "status": this.as_ref().map_or(json!("not connected"), |c| c["status"].clone()),
            "error": this.as_ref().map_or(Value::Null, |c| c["error"].clone()),
            "action": page_path(&agent, &toolkit),
            "minutes": STATE_TTL_MS / 60_000,
        }))
    };
    match run.await {
        Ok(v) => render("connect.html", v),
        Err(e) => error_page(&e),
    }
}

/// Starts the flow: stores it (bound to this tenant, agent and toolkit, and to this browser by
/// the cookie set here) and sends the browser to the provider's consent page.
pub async fn connect_start(
    State(state): State<AppState>,
    op: Operator,
    Path((agent, toolkit)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let htmx = is_htmx(&headers);
    let run = async {
        checked(&state, &op.tenant, &agent, &toolkit).await?;
        let provider = &tokens_for(&state, &toolkit)?.client().provider;
        let now = now_ms();
        let flow = state
            .store
            .begin_oauth(&op.tenant, &agent, &toolkit, now, now + STATE_TTL_MS)
            .await?;
        let url = provider.authorize_url(&flow.state, &flow.verifier);
        let cookie = flow_cookie(
            provider,
            &flow.state,
            secrecy::ExposeSecret::expose_secret(&flow.binding),
        );
        Ok::<_, ApiError>((url.to_string(), cookie))
    };
    let (url, cookie) = match run.await {
        Ok(started) => started,
        Err(e) if htmx => return error_fragment(&e),
        Err(e) => return error_page(&e),
    };
    tracing::info!(name: "oauth_connect_started", tenant_id = %op.tenant, agent = %agent, toolkit = %toolkit, "oauth_connect_started");
    // htmx follows `HX-Redirect` with a navigation; a form's 303 to another origin would be
    // stopped by the console's `form-action 'self'`.
    let mut r = if htmx {
        match HeaderValue::from_str(&url) {
            Ok(to) => ([("HX-Redirect", to)], StatusCode::OK).into_response(),
            Err(_) => {
                return error_fragment(&ApiError::bad_request(
                    "the provider's consent address is not a valid header value; check --google-auth-url",
                ));
            }
        }
    } else {
        Redirect::to(&url).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
