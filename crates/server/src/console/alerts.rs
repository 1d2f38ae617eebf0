//! The alerts page: the tenant's rules (what each watches, when it fires, its channels, its
//! state), a JSON editor to make one (answered with the API's problems at their pointers), a
//! delete per rule, and the history of transitions, newest first and paged, each with its
//! deliveries per channel. Every read and change goes through the same checks and store
//! queries as `/v1/alerts`, scoped by the signed-in tenant.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_store::{AlertEvent, AlertRule};

use super::pages::{error_fragment, error_page, nav, urlencode};
use super::{Operator, render};
use crate::alerts::rules::{Condition, Rule};
use crate::error::ApiError;
use crate::routes::alerts::{AlertEventView, MAX_HISTORY_OFFSET, create, read_rule};
use crate::state::AppState;

/// Transitions one page of the history shows.
const HISTORY_PAGE: u32 = 25;
/// The biggest JSON editor text taken, in bytes.
const MAX_DEFINITION: usize = 16 * 1024;

#[derive(Debug, Deserialize)]
pub struct HistoryPage {
    /// 1, 2, …: the newest page first.
    page: Option<u32>,
}

/// The offset of a history page; past the most the API skips, a clear refusal.
fn offset_of(page: Option<u32>) -> Result<(u32, i64), ApiError> {
    let page = page.unwrap_or(1).max(1);
    let offset = (page - 1).saturating_mul(HISTORY_PAGE);
    if offset > MAX_HISTORY_OFFSET {
        return Err(ApiError::bad_request(format!(
            "page {page} is past the history kept; ask for page 1 to {}",
            MAX_HISTORY_OFFSET / HISTORY_PAGE + 1
        )));
    }
    Ok((page, i64::from(offset)))
}

/// Examples of each kind for the editor.
fn examples() -> Vec<String> {
    [
        json!({"id": "crm-failing", "kind": "tool_failure_rate", "tool": "crm_lookup",
               "above_percent": 20, "min_calls": 10, "window_s": 300,
               "webhook_url": "https://alerts.example.com/switchboard"}),
        json!({"id": "crm-slow", "kind": "tool_latency_p95", "tool": "crm_lookup", "above_ms": 1500,
               "email": {"to": ["oncall@example.com"], "from_email": "alerts@example.com",
                         "smtp_host": "smtp.example.com", "smtp_port": 587, "security": "starttls",
                         "username": "alerts", "password": "…"}}),
        json!({"id": "breaker", "kind": "breaker_open", "upstream": "api.example.com:443",
               "webhook_url": "https://alerts.example.com/switchboard"}),
        json!({"id": "calendar", "kind": "connection_broken",
               "webhook_url": "https://alerts.example.com/switchboard"}),
        json!({"id": "busy", "kind": "live_call_cap", "at_percent": 90,
               "webhook_url": "https://alerts.example.com/switchboard"}),
    ]
    .iter()
    .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
    .collect()
}

/// The host a webhook goes to (never its path or query, which can carry a token).
fn webhook_host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn rule_view(r: &AlertRule) -> Value {
    let kind = r.definition.get("kind").cloned().unwrap_or_default();
    let (target, threshold, channels) = match Rule::stored(&r.id, &r.definition) {
        Some(rule) => {
            let mut channels = Vec::new();
            if let Some(url) = &rule.webhook_url {
                channels.push(format!("webhook to {}", webhook_host(url)));
            }
            if let Some(e) = &rule.email {
                channels.push(format!("email to {}", e.to.join(", ")));
            }
            let target = match &rule.condition {
                Condition::LiveCallCap { .. } => "the live-call cap".to_owned(),
                c => c.target(),
            };
            (target, rule.condition.threshold(), channels.join("; "))
        }
        None => ("?".into(), "unreadable".into(), String::new()),
    };
    json!({"id": r.id, "href": urlencode(&r.id), "kind": kind, "target": target,
           "threshold": threshold, "channels": channels, "state": r.state,
           "transitions": r.transitions, "changed_at": r.changed_at, "created_at": r.created_at})
}

fn event_view(e: AlertEvent) -> Value {
    let href = urlencode(&e.rule_id);
    let detail = e
        .detail
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut v = serde_json::to_value(AlertEventView::from(e)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("href".to_owned(), json!(href));
        o.insert("figures".to_owned(), json!(detail));
    }
    v
}

/// A page of the history (one rule's or all), with what the pager needs.
async fn history(
    state: &AppState,
    tenant: &str,
    rule: Option<&str>,
    page: Option<u32>,
) -> Result<Value, ApiError> {
    let (page, offset) = offset_of(page)?;
    // One more than a page: whether there is an older page.
    let mut events = state
        .store
        .alert_history(tenant, rule, i64::from(HISTORY_PAGE) + 1, offset)
        .await?;
    let older = events.len() > HISTORY_PAGE as usize;
    events.truncate(HISTORY_PAGE as usize);
    Ok(json!({
        "events": events.into_iter().map(event_view).collect::<Vec<_>>(),
        "page": page,
        "newer": (page > 1).then(|| page - 1),
        "older": older.then(|| page + 1),
    }))
}

pub async fn alerts(
    State(state): State<AppState>,
    op: Operator,
    Query(q): Query<HistoryPage>,
) -> Response {
    let run = async {
        let rules = state
            .store
            .list_alert_rules(&op.tenant, state.config.alerts.max_rules_per_tenant)
            .await?;
        let history = history(&state, &op.tenant, None, q.page).await?;
        let examples = examples();
        Ok::<_, ApiError>(render(
            "alerts.html",
            json!({"nav": nav(&op, "alerts"),
                   "rules": rules.iter().map(rule_view).collect::<Vec<_>>(),
                   "max_rules": state.config.alerts.max_rules_per_tenant,
                   "example": examples.first(), "examples": examples,
                   "history": history, "base": "/console/alerts"}),
        ))
    };
    run.await.unwrap_or_else(|e| error_page(&e))
}

pub async fn alert(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Query(q): Query<HistoryPage>,
) -> Response {
    let run = async {
        let rule = state.store.get_alert_rule(&op.tenant, &id).await?;
        let history = history(&state, &op.tenant, Some(&id), q.page).await?;
        let definition = serde_json::to_string_pretty(&rule.definition).unwrap_or_default();
        Ok::<_, ApiError>(render(
            "alert.html",
            json!({"nav": nav(&op, "alerts"), "rule": rule_view(&rule),
                   "definition": definition, "history": history,
                   "base": format!("/console/alerts/{}", urlencode(&id))}),
        ))
    };
    run.await.unwrap_or_else(|e| error_page(&e))
}

#[derive(Debug, Deserialize)]
pub struct NewRule {
    definition: String,
}

pub async fn create_rule(
    State(state): State<AppState>,
    op: Operator,
    Form(form): Form<NewRule>,
) -> Response {
    let run = async {
        if form.definition.len() > MAX_DEFINITION {
            return Err(ApiError::bad_request(format!(
                "the rule is {} bytes; a rule takes at most {MAX_DEFINITION}",
                form.definition.len()
            )));
        }
        // The parser's message names the line and column, never the text (it may hold the
        // SMTP password).
        let body: Value = serde_json::from_str(&form.definition).map_err(|e| {
            ApiError::bad_request(format!(
                "the rule is not JSON (line {}, column {}); write it as a JSON object like the examples",
                e.line(),
                e.column()
            ))
        })?;
        let rule = read_rule(&state, &body)?;
        let created = create(&state, &op.tenant, &rule, &body).await?;
        Ok(render(
            "alert_created.html",
            json!({"id": created.rule.id, "href": urlencode(&created.rule.id),
                   "webhook": rule.webhook_url.is_some(), "secret": created.secret}),
        ))
    };
    run.await.unwrap_or_else(|e| error_fragment(&e))
}

pub async fn delete_rule(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
) -> Response {
    match state.store.delete_alert_rule(&op.tenant, &id).await {
        Ok(()) => {
            let mut r = render("alert_deleted.html", json!({"id": id}));
            r.headers_mut()
                .insert("hx-refresh", HeaderValue::from_static("true"));
            r
        }
        Err(e) => error_fragment(&e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_past_the_history_kept_are_refused() {
        assert_eq!(offset_of(None).ok(), Some((1, 0)));
        assert_eq!(offset_of(Some(3)).ok(), Some((3, 50)));
        assert!(offset_of(Some(u32::MAX)).is_err());
    }

    #[test]
    fn every_example_is_a_valid_rule() {
        for e in examples() {
            let v: Value = serde_json::from_str(&e).unwrap_or_default();
            assert!(crate::alerts::rules::parse(&v, false).is_ok(), "{e}");
        }
    }
}
