//! Notifications of alert transitions, one per channel of the rule: a signed webhook (Standard
//! Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` over the exact body) and/or
//! a plain-text email through the rule's SMTP server. The `webhook-id` (and the email's
//! `Message-ID`) is the rule's uid and the transition's number, the same on every retry and
//! from every node, so a receiver drops a copy. A node leases a notification before it sends
//! it; one that dies mid-send leaves it to be sent again when the lease ends. Never on a
//! call's path.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use secrecy::ExposeSecret;
use serde_json::{Value, json};
use switchboard_store::{DeliveryEnd, DueDelivery};

use super::rules::Rule;
use crate::state::AppState;

/// Notifications one round leases at most.
const PER_ROUND: i64 = 16;
/// The longest backoff between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The client alerts go out with: the outbound guard of `api_call` (no proxy, guarded DNS),
/// no redirects followed.
pub fn client(state: &AppState) -> reqwest::Result<reqwest::Client> {
    switchboard_runtime::http::guarded_client_builder(state.effects.http.allows_private_networks())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(state.config.alerts.timeout)
        .user_agent(concat!("switchboard-alerts/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The `webhook-id` of a rule's transition.
pub fn webhook_id(uid: &str, seq: i64) -> String {
    format!("alert_{uid}_{seq}")
}

/// Leases the notifications due and sends each once.
pub async fn round(state: &AppState, client: &reqwest::Client) {
    let settings = state.config.alerts;
    let due = match state
        .store
        .lease_alert_deliveries(&state.node.id, settings.timeout * 2, PER_ROUND)
        .await
    {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(name: "alert_delivery_failed", error = %e, "alert_delivery_failed");
            return;
        }
    };
    let sends = due.into_iter().map(|d| async move {
        let sent = match d.channel.as_str() {
            "email" => send_email(state, &d).await,
            _ => send(state, client, &d).await,
        };
        let end = match sent {
            Ok(()) => DeliveryEnd::Delivered,
            Err(error) if d.attempts >= settings.max_attempts => DeliveryEnd::Failed { error },
            Err(error) => DeliveryEnd::Retry {
                error,
                after: backoff(settings.retry_base, d.attempts),
            },
        };
        match &end {
            DeliveryEnd::Delivered => {
                tracing::info!(name: "alert_delivered", tenant_id = %d.tenant_id, rule = %d.rule.id, seq = d.event.seq, channel = %d.channel, attempts = d.attempts, "alert_delivered");
            }
            DeliveryEnd::Retry { error, .. } | DeliveryEnd::Failed { error } => {
                tracing::warn!(name: "alert_delivery_attempt_failed", tenant_id = %d.tenant_id, rule = %d.rule.id, seq = d.event.seq, channel = %d.channel, attempts = d.attempts, error = %error, "alert_delivery_attempt_failed");
            }
        }
        if let Err(e) = state
            .store
            .finish_alert_delivery(&d, &state.node.id, &end)
            .await
        {
            tracing::warn!(name: "alert_delivery_failed", error = %e, "alert_delivery_failed");
        }
    });
    futures_util::future::join_all(sends).await;
}

/// The delay after the `attempts`-th failed attempt: `base`, doubling, at most 5 minutes.
fn backoff(base: Duration, attempts: i64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 16)).unwrap_or(16);
    base.saturating_mul(1u32 << doublings).min(MAX_BACKOFF)
}

/// One attempt; the error names the status or the failure, never the URL.
async fn send(state: &AppState, client: &reqwest::Client, d: &DueDelivery) -> Result<(), String> {
    let rule = Rule::stored(&d.rule.id, &d.rule.definition)
        .ok_or_else(|| "the rule's stored definition is unreadable".to_owned())?;
    let url = rule
        .webhook_url
        .as_deref()
        .ok_or_else(|| "the rule has no webhook_url".to_owned())?;
    switchboard_runtime::mcp::check_url(url, state.effects.http.allows_private_networks())?;
    let kind = d.rule.definition.get("kind").cloned().unwrap_or_default();
    let body = json!({
        "type": format!("alert.{}", d.event.state),
        "timestamp": d.event.at,
        "data": {
            "tenant_id": d.tenant_id,
            "rule": d.rule.id,
            "kind": kind,
            "state": d.event.state,
            "seq": d.event.seq,
            "at": d.event.at,
            "detail": d.event.detail,
        }
    });
    let body = serde_json::to_vec(&body).map_err(|_| "could not encode the alert".to_owned())?;
    let id = webhook_id(&d.rule.uid, d.event.seq);
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX));
    let signer = standardwebhooks::Webhook::new(d.secret.expose_secret())
        .map_err(|_| "the rule's secret is not a Standard Webhooks secret".to_owned())?;
    let signature = signer
        .sign(&id, timestamp, &body)
        .map_err(|_| "could not sign the alert".to_owned())?;
    let answer = client
        .post(url)
        .header("content-type", "application/json")
        .header(standardwebhooks::HEADER_WEBHOOK_ID, &id)
        .header(
            standardwebhooks::HEADER_WEBHOOK_TIMESTAMP,
            timestamp.to_string(),
        )
        .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "the receiver did not answer in time".to_owned()
            } else if e.is_connect() {
                "could not connect to the receiver (or its address is not allowed)".to_owned()
            } else {
                "the request to the receiver failed".to_owned()
            }
        })?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {}", status.as_u16()))
    }
}

/// The subject of a transition's email.
pub fn subject(state: &str, rule: &Rule) -> String {
    let line = format!(
        "[Switchboard] {state}: {} on {}",
        rule.id,
        rule.condition.target()
    );
    line.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// The plain-text body of a transition's email: the rule, what it watches, the figures it
/// compared. No link, and nothing secret (the figures are counts, names and times).
pub fn email_body(
    tenant: &str,
    rule: &Rule,
    kind: &str,
    state: &str,
    seq: i64,
    at: &str,
    detail: &Value,
) -> String {
    let verb = if state == "firing" {
        "is firing"
    } else {
        "is resolved"
    };
    let mut out = format!(
        "Alert rule {id} {verb}.\n\nRule: {id} ({kind})\nWatches: {target}\nFires when: {threshold}\nTenant: {tenant}\nTransition: {seq}, at {at}\n\nWhat was seen:\n",
        id = rule.id,
        target = rule.condition.target(),
        threshold = rule.condition.threshold(),
    );
    match detail.as_object() {
        Some(figures) if !figures.is_empty() => {
            for (k, v) in figures.iter().take(20) {
                let shown = match v {
                    Value::String(s) => s.clone(),
                    Value::Array(items) if items.is_empty() => "none".to_owned(),
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                let shown: String = shown
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(300)
                    .collect();
                out.push_str(&format!("  {k}: {shown}\n"));
            }
        }
        _ => out.push_str("  (no figures)\n"),
    }
    out.push_str(
        "\nSent once per change of state. The history of this rule is on the console's Alerts page and at /v1/alerts/history.\n",
    );
    out
}

/// One email attempt through the rule's SMTP server; the error names the server and the
/// failure, never the password.
async fn send_email(state: &AppState, d: &DueDelivery) -> Result<(), String> {
    let rule = Rule::stored(&d.rule.id, &d.rule.definition)
        .ok_or_else(|| "the rule's stored definition is unreadable".to_owned())?;
    let e = rule
        .email
        .as_ref()
        .ok_or_else(|| "the rule has no email".to_owned())?;
    let kind = d
        .rule
        .definition
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = email_body(
        &d.tenant_id,
        &rule,
        kind,
        &d.event.state,
        d.event.seq,
        &d.event.at,
        &d.event.detail,
    );
    let message = switchboard_toolkits::smtp::plain_text(
        &e.from_email,
        &e.to,
        &subject(&d.event.state, &rule),
        body,
        format!("<{}@switchboard>", webhook_id(&d.rule.uid, d.event.seq)),
    )?;
    let password = d.smtp_password.as_ref().map_or("", |p| p.expose_secret());
    let relay = switchboard_toolkits::smtp::Relay {
        host: &e.smtp_host,
        port: e.smtp_port,
        security: &e.security,
        credentials: e.username.clone().map(|u| (u, password)),
    };
    tokio::time::timeout(
        state.config.alerts.timeout,
        switchboard_toolkits::smtp::transmit(
            &relay,
            state.effects.http.allows_private_networks(),
            message,
        ),
    )
    .await
    .map_err(|_| {
        format!(
            "the mail server {}:{} did not answer in time",
            e.smtp_host, e.smtp_port
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_ceiling() {
        let base = Duration::from_secs(5);
        assert_eq!(backoff(base, 1), Duration::from_secs(5));
        assert_eq!(backoff(base, 2), Duration::from_secs(10));
        assert_eq!(backoff(base, 4), Duration::from_secs(40));
        assert_eq!(backoff(base, 40), MAX_BACKOFF);
    }
}
