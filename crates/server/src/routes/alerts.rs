//! Alert rules (`/v1/alerts/rules`) and their history (`/v1/alerts/history`): a tenant's own
//! only. A rule's webhook secret is answered once, when the rule is made; its SMTP password
//! never is.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_store::{AlertEvent, AlertRule, ChannelDelivery};
use utoipa::{IntoParams, ToSchema};

use crate::alerts::rules;
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::state::AppState;

/// The OpenAPI shape of a rule (checked by `alerts::rules::parse`, which names each
/// problem's JSON Pointer).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Only its schema is used: the body is read as JSON.
pub struct AlertRuleBody {
    /// The rule's name: 1-64 letters, digits, `_` or `-`.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub id: String,
    /// `tool_failure_rate`, `tool_latency_p95`, `breaker_open`, `connection_broken` or `live_call_cap`.
    pub kind: String,
    /// The tool (`tool_failure_rate`, `tool_latency_p95`).
    pub tool: Option<String>,
    /// Fires when more than this percentage of calls failed (`tool_failure_rate`; 0-99, default 20).
    #[schema(minimum = 0, maximum = 99)]
    pub above_percent: Option<u32>,
    /// Fires when the p95 latency is over this, in ms (`tool_latency_p95`; required).
    #[schema(minimum = 1, maximum = 600000)]
    pub above_ms: Option<u32>,
    /// Calls in the window needed before the rule fires (default 10).
    #[schema(minimum = 1, maximum = 100000)]
    pub min_calls: Option<u32>,
    /// The window in seconds (tool rules: 60-86400, default 300; `breaker_open`: 10-86400, default 60).
    #[schema(minimum = 10, maximum = 86400)]
    pub window_s: Option<u32>,
    /// One breaker (`host:port` of an `api_call`, `mcp:<label>` of an MCP server); absent: any.
    pub upstream: Option<String>,
    /// One agent's connection (`connection_broken`); absent: any.
    pub agent: Option<String>,
    /// Fires at this percentage of the live-call cap (`live_call_cap`; 1-100, default 100).
    #[schema(minimum = 1, maximum = 100)]
    pub at_percent: Option<u32>,
    /// Where the signed notifications go (the `api_call` outbound rules apply). A rule has
    /// `webhook_url`, `email` or both.
    pub webhook_url: Option<String>,
    /// Notify by email too (or instead).
    pub email: Option<AlertEmailBody>,
}

/// A rule's email channel: the addresses, and the SMTP server they are sent through (held to
/// the `api_call` outbound rules: no loopback or private server unless the deployment allows
/// private networks).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Only its schema is used.
pub struct AlertEmailBody {
    /// 1-10 addresses (`name@example.com`).
    #[schema(min_items = 1, max_items = 10)]
    pub to: Vec<String>,
    /// The address alerts are sent from.
    pub from_email: String,
    /// The SMTP server's name or IP address.
    pub smtp_host: String,
    /// Default 587.
    #[schema(minimum = 1, maximum = 65535)]
    pub smtp_port: Option<u16>,
    /// `starttls` (default), `tls` (implicit TLS) or `plain` (only where private networks are
    /// allowed).
    pub security: Option<String>,
    /// The SMTP user name, if the server asks for one.
    pub username: Option<String>,
    /// The SMTP password: write-only, stored sealed, never shown.
    #[schema(write_only)]
    pub password: Option<String>,
}

/// A rule as stored: its definition with every default, and its state.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertRuleView {
    pub id: String,
    /// The checked definition (kind, fields with defaults, `webhook_url` and/or `email`, never
    /// the SMTP password).
    #[schema(value_type = Object)]
    pub definition: Value,
    /// `ok` or `firing`.
    pub state: String,
    /// Changes of state so far.
    pub transitions: i64,
    pub created_at: String,
    pub changed_at: Option<String>,
}

impl From<AlertRule> for AlertRuleView {
    fn from(r: AlertRule) -> Self {
        AlertRuleView {
            id: r.id,
            definition: r.definition,
            state: r.state,
            transitions: r.transitions,
            created_at: r.created_at,
            changed_at: r.changed_at,
        }
    }
}

/// A rule just made, with its webhook secret (shown this once).
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedAlertRule {
    #[serde(flatten)]
    pub rule: AlertRuleView,
    /// The Standard Webhooks secret (`whsec_…`) its notifications are signed with; it is not
    /// shown again.
    pub secret: String,
}

/// A tenant's rules.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertRuleList {
    pub items: Vec<AlertRuleView>,
}

/// One transition of a rule and its notifications.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertEventView {
    pub rule: String,
    pub seq: i64,
    /// `firing` or `resolved`.
    pub state: String,
    pub at: String,
    /// The figures the rule compared.
    #[schema(value_type = Object)]
    pub detail: Value,
    /// All its notifications together: `pending` while one is, else `failed` if one failed,
    /// else `delivered`.
    pub delivery: String,
    /// Attempts over all its notifications.
    pub attempts: i64,
    /// The first failing notification's last error.
    pub last_error: Option<String>,
    /// When the last notification was delivered, once all were.
    pub delivered_at: Option<String>,
    /// Each notification: one per channel of the rule.
    pub deliveries: Vec<AlertDeliveryView>,
}

/// One notification of a transition.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertDeliveryView {
    /// `webhook` or `email`.
    pub channel: String,
    /// `pending`, `delivered` or `failed`.
    pub delivery: String,
    pub attempts: i64,
    /// Why the last attempt failed (a status or what the server answered; never a URL or a
    /// password).
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
}

impl From<ChannelDelivery> for AlertDeliveryView {
    fn from(d: ChannelDelivery) -> Self {
        AlertDeliveryView {
            channel: d.channel,
            delivery: d.delivery,
            attempts: d.attempts,
            last_error: d.last_error,
            delivered_at: d.delivered_at,
        }
    }
}

impl From<AlertEvent> for AlertEventView {
    fn from(e: AlertEvent) -> Self {
        let has = |state: &str| e.deliveries.iter().any(|d| d.delivery == state);
        let delivery = if has("pending") {
            "pending"
        } else if has("failed") {
            "failed"
        } else {
            "delivered"
        };
        let delivered_at = (delivery == "delivered")
            .then(|| {
                e.deliveries
                    .iter()
                    .filter_map(|d| d.delivered_at.clone())
                    .max()
            })
            .flatten();
        AlertEventView {
            rule: e.rule_id,
            seq: e.seq,
            state: e.state,
            at: e.at,
            detail: e.detail,
            delivery: delivery.to_owned(),
            attempts: e.deliveries.iter().map(|d| d.attempts).sum(),
            last_error: e.deliveries.iter().find_map(|d| d.last_error.clone()),
            delivered_at,
            deliveries: e.deliveries.into_iter().map(Into::into).collect(),
        }
    }
}

/// A tenant's alert history, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertHistory {
    pub items: Vec<AlertEventView>,
}

/// `?rule=&limit=` of the history.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// One rule's transitions only.
    pub rule: Option<String>,
    /// At most this many (1-500, default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// Skip this many of the newest first (0-10000, default 0): the next page.
    #[param(minimum = 0, maximum = 10000)]
    pub offset: Option<u32>,
}

/// The most transitions a history page skips.
pub const MAX_HISTORY_OFFSET: u32 = 10_000;

/// Makes a rule from a request body, every problem at its pointer.
pub(crate) fn read_rule(state: &AppState, body: &Value) -> ApiResult<rules::Rule> {
    rules::parse(body, state.effects.http.allows_private_networks()).map_err(|problems| {
        let n = problems.len();
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_alert_rule",
            format!(
                "the alert rule has {n} problem{}",
                if n == 1 { "" } else { "s" }
            ),
        )
        .with_details(json!(problems))
    })
}

/// Stores a checked rule with a new webhook secret (and the body's SMTP password, sealed);
/// answers it with the webhook secret.
pub(crate) async fn create(
    state: &AppState,
    tenant: &str,
    rule: &rules::Rule,
    body: &Value,
) -> ApiResult<CreatedAlertRule> {
    let secret = switchboard_store::alerts::new_webhook_secret()?;
    let password = rule
        .email
        .as_ref()
        .and_then(|e| e.username.as_ref())
        .and_then(|_| rules::smtp_password(body));
    let stored = state
        .store
        .create_alert_rule(
            tenant,
            &rule.id,
            &rule.definition(),
            &secret,
            password.as_ref(),
            state.config.alerts.max_rules_per_tenant,
        )
        .await?;
    Ok(CreatedAlertRule {
        rule: stored.into(),
        secret: secret.expose_secret().to_owned(),
    })
}

#[utoipa::path(post, path = "/v1/alerts/rules", tag = "alerts", security(("bearer" = [])), request_body = AlertRuleBody,
    responses((status = 201, body = CreatedAlertRule, description = "Made; `secret` is shown this once"),
              (status = 400, body = ErrorBody, description = "`invalid_alert_rule`: every problem at its JSON Pointer; or the tenant has its most rules"),
              (status = 409, body = ErrorBody, description = "A rule of that id exists")))]
pub async fn create_rule(
    State(state): State<AppState>,
    tenant: Tenant,
    Body(body): Body<Value>,
) -> ApiResult<(StatusCode, Json<CreatedAlertRule>)> {
    let rule = read_rule(&state, &body)?;
    let created = create(&state, &tenant.id, &rule, &body).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/v1/alerts/rules", tag = "alerts", security(("bearer" = [])),
    responses((status = 200, body = AlertRuleList)))]
pub async fn list_rules(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<AlertRuleList>> {
    let rules = state
        .store
        .list_alert_rules(&tenant.id, state.config.alerts.max_rules_per_tenant)
        .await?;
    Ok(Json(AlertRuleList {
        items: rules.into_iter().map(Into::into).collect(),
    }))
}

#[utoipa::path(get, path = "/v1/alerts/rules/{id}", tag = "alerts", security(("bearer" = [])),
    responses((status = 200, body = AlertRuleView), (status = 404, body = ErrorBody)))]
pub async fn get_rule(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> ApiResult<Json<AlertRuleView>> {
    let rule = state.store.get_alert_rule(&tenant.id, &id).await?;
    Ok(Json(rule.into()))
}

#[utoipa::path(delete, path = "/v1/alerts/rules/{id}", tag = "alerts", security(("bearer" = [])),
    responses((status = 204, description = "Deleted, with its history and undelivered notifications"), (status = 404, body = ErrorBody)))]
pub async fn delete_rule(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    state.store.delete_alert_rule(&tenant.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/v1/alerts/history", tag = "alerts", security(("bearer" = [])), params(HistoryQuery),
    responses((status = 200, body = AlertHistory), (status = 400, body = ErrorBody)))]
pub async fn history(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<HistoryQuery>,
) -> ApiResult<Json<AlertHistory>> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit {limit} is out of range; ask for 1 to 500"
        )));
    }
    let offset = q.offset.unwrap_or(0);
    if offset > MAX_HISTORY_OFFSET {
        return Err(ApiError::bad_request(format!(
            "offset {offset} is out of range; ask for 0 to {MAX_HISTORY_OFFSET}"
        )));
    }
    let events = state
        .store
        .alert_history(
            &tenant.id,
            q.rule.as_deref(),
            i64::from(limit),
            i64::from(offset),
        )
        .await?;
    Ok(Json(AlertHistory {
        items: events.into_iter().map(Into::into).collect(),
    }))
}
