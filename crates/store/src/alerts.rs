//! Alerts: a tenant's rules, their transitions (the history), each transition's notifications
//! (the outbox: one per channel of the rule, a webhook and/or an email), and the signals nodes
//! report that the store cannot see (a circuit breaker opening).
//!
//! Every node evaluates the rules from what the database holds, and records a transition
//! with a compare-and-set on the rule's `transitions`: of nodes seeing one change, one
//! records it, so a change is notified once per cluster. Notifications are delivered by
//! whichever node leases them first; time is always the database's clock.

use std::time::{Duration, SystemTime};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crypto::{open_with, seal_with};
use crate::error::{is_fk_violation, is_unique_violation};
use crate::ownership::now_stamp;
use crate::{Backend, Store, StoreError, WritePool, parse_json, to_json, with_pool};

/// Transitions kept per rule (the newest; older delivered ones are pruned).
pub const MAX_EVENTS_PER_RULE: i64 = 200;
/// Invocations a window's figures read at most (the newest in the window).
pub const WINDOW_SCAN_ROWS: i64 = 20_000;

/// A stored alert rule (its secret apart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertRule {
    /// The tenant's name for the rule.
    pub id: String,
    /// Fresh per rule: part of every webhook-id it sends.
    pub uid: String,
    /// The checked definition (kind, fields, destination).
    pub definition: Value,
    /// `ok` or `firing`.
    pub state: String,
    /// How many times the rule changed state.
    pub transitions: i64,
    /// When the rule was made.
    pub created_at: String,
    /// When it last changed state.
    pub changed_at: Option<String>,
}

/// One transition of a rule, with its notifications' deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertEvent {
    /// The rule it belongs to.
    pub rule_id: String,
    /// The rule's transition number (1, 2, …).
    pub seq: i64,
    /// `firing` or `resolved`.
    pub state: String,
    /// When it was recorded (the database's clock).
    pub at: String,
    /// What was seen (the figures the rule compared).
    pub detail: Value,
    /// Its notifications, one per channel of the rule (in channel order).
    pub deliveries: Vec<ChannelDelivery>,
}

/// Channels a rule can notify on.
pub const CHANNELS: [&str; 2] = ["webhook", "email"];

/// One notification of a transition, on one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelDelivery {
    /// `webhook` or `email`.
    pub channel: String,
    /// `pending`, `delivered` or `failed`.
    pub delivery: String,
    /// Delivery attempts made so far.
    pub attempts: i64,
    /// Why the last attempt failed, if it did (a status or a transport error, never a URL or
    /// a password).
    pub last_error: Option<String>,
    /// When it was delivered.
    pub delivered_at: Option<String>,
}

/// A notification leased to this node for one attempt.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// The rule's tenant.
    pub tenant_id: String,
    /// The rule and its transition.
    pub rule: AlertRule,
    /// The transition to notify (its `deliveries` left empty).
    pub event: AlertEvent,
    /// `webhook` or `email`.
    pub channel: String,
    /// Attempts so far, this one included.
    pub attempts: i64,
    /// The rule's webhook secret.
    pub secret: SecretString,
    /// The password of the rule's SMTP server, if it has one (email only).
    pub smtp_password: Option<SecretString>,
}

/// How a delivery attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryEnd {
    /// The receiver took it (2xx).
    Delivered,
    /// Try again after the delay.
    Retry {
        /// Why this attempt failed.
        error: String,
        /// How long to wait.
        after: Duration,
    },
    /// No more attempts.
    Failed {
        /// Why the last attempt failed.
        error: String,
    },
}

/// A tool's invocations in a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowFigures {
    /// Invocations counted (interrupted ones are not: a caller's barge-in is no failure).
    pub calls: u64,
    /// Those that failed.
    pub failures: u64,
    /// Their latencies in milliseconds, sorted.
    pub latencies_ms: Vec<f64>,
}

type RuleRow = (String, String, String, String, i64, String, Option<String>);
/// A rule's row with its tenant first.
type TenantRuleRow = (
    String,
    String,
    String,
    String,
    String,
    i64,
    String,
    Option<String>,
);
type EventRow = (String, i64, String, String, String);
/// An event's row joined with one of its deliveries (none: the channel columns are null).
type HistoryRow = (
    String,
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

const RULE_COLUMNS: &str = "id, uid, definition, state, transitions, created_at, changed_at";

fn rule(row: RuleRow) -> Result<AlertRule, StoreError> {
    let (id, uid, definition, state, transitions, created_at, changed_at) = row;
    Ok(AlertRule {
        id,
        uid,
        definition: parse_json("alert rule", &definition)?,
        state,
        transitions,
        created_at,
        changed_at,
    })
}

fn event(row: EventRow) -> Result<AlertEvent, StoreError> {
    let (rule_id, seq, state, at, detail) = row;
    Ok(AlertEvent {
        rule_id,
        seq,
        state,
        at,
        detail: parse_json("alert event", &detail)?,
        deliveries: Vec::new(),
    })
}

/// A new Standard Webhooks secret (`whsec_` and 32 random bytes in base64).
pub fn new_webhook_secret() -> Result<SecretString, StoreError> {
    use aes_gcm::aead::Generate;
    use base64::Engine as _;
    let bytes = <[u8; 32] as Generate>::try_generate().map_err(|_| StoreError::Crypto)?;
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(SecretString::from(format!("whsec_{text}")))
}

/// Binds a sealed rule secret to its tenant and rule uid.
fn aad(tenant_id: &str, uid: &str) -> Vec<u8> {
    format!("alert-secret\u{0}{tenant_id}\u{0}{uid}").into_bytes()
}

/// Binds a sealed SMTP password to its tenant and rule uid.
fn smtp_aad(tenant_id: &str, uid: &str) -> Vec<u8> {
    format!("alert-smtp-password\u{0}{tenant_id}\u{0}{uid}").into_bytes()
}

fn open_text(
    store: &Store,
    sealed: &[u8],
    aad: &[u8],
    what: &str,
) -> Result<SecretString, StoreError> {
    let bytes = open_with(store.master_key(), sealed, aad)?;
    Ok(SecretString::from(
        String::from_utf8(bytes).map_err(|_| StoreError::Corrupt(what.to_owned()))?,
    ))
}

/// `stamp` moved by `ms` milliseconds (negative: earlier), as a stamp.
fn shifted(stamp: &str, ms: i64) -> String {
    let base = humantime::parse_rfc3339(stamp).unwrap_or_else(|_| SystemTime::now());
    let moved = if ms >= 0 {
        base.checked_add(Duration::from_millis(ms.unsigned_abs()))
    } else {
        base.checked_sub(Duration::from_millis(ms.unsigned_abs()))
    };
    humantime::format_rfc3339_millis(moved.unwrap_or(base)).to_string()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

impl Store {
    /// The database's clock, as a stamp.
    pub async fn db_now(&self) -> Result<String, StoreError> {
        let now: String = with_pool!(self, |pool| {
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT {}",
                now_stamp(pool.kind())
            )))
            .fetch_one(pool)
            .await?
        });
        Ok(now)
    }

    /// Creates a rule with its webhook secret and, for a rule that emails through a server
    /// that asks for one, its SMTP password (both sealed); `max_rules` bounds the tenant's
    /// rules. A rule of that id already there is a conflict.
    pub async fn create_alert_rule(
        &self,
        tenant_id: &str,
        id: &str,
        definition: &Value,
        secret: &SecretString,
        smtp_password: Option<&SecretString>,
        max_rules: i64,
    ) -> Result<AlertRule, StoreError> {
        let uid = crate::keys::random_token::<12>()?;
        let sealed = seal_with(
            self.master_key(),
            secret.expose_secret().as_bytes(),
            &aad(tenant_id, &uid),
        )?;
        let sealed_password = smtp_password
            .map(|p| {
                seal_with(
                    self.master_key(),
                    p.expose_secret().as_bytes(),
                    &smtp_aad(tenant_id, &uid),
                )
            })
            .transpose()?;
        let text = to_json(definition)?;
        let at = crate::now();
        let outcome: Result<bool, sqlx::Error> = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let (count,): (i64,) =
                    sqlx::query_as("SELECT COUNT(*) FROM alert_rules WHERE tenant_id = $1")
                        .bind(tenant_id)
                        .fetch_one(&mut *tx)
                        .await?;
                if count >= max_rules {
                    tx.rollback().await?;
                    return Ok(false);
                }
                sqlx::query(
                    "INSERT INTO alert_rules (tenant_id, id, uid, definition, secret, smtp_password, state, transitions, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'ok', 0, $7)",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(&uid)
                .bind(&text)
                .bind(&sealed)
                .bind(sealed_password.as_deref())
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(true)
            }
            .await
        });
        match outcome {
            Ok(true) => Ok(AlertRule {
                id: id.to_owned(),
                uid,
                definition: definition.clone(),
                state: "ok".to_owned(),
                transitions: 0,
                created_at: at,
                changed_at: None,
            }),
            Ok(false) => Err(StoreError::Invalid(format!(
                "this tenant already has {max_rules} alert rules (the most it may have); delete one first"
            ))),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "alert rule `{id}` exists; delete it first or choose another id"
            ))),
            Err(e) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A tenant's rules, by id (at most `limit`).
    pub async fn list_alert_rules(
        &self,
        tenant_id: &str,
        limit: i64,
    ) -> Result<Vec<AlertRule>, StoreError> {
        let rows: Vec<RuleRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {RULE_COLUMNS} FROM alert_rules WHERE tenant_id = $1 ORDER BY id LIMIT $2"
            )))
            .bind(tenant_id)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter().map(rule).collect()
    }

    /// One of a tenant's rules.
    pub async fn get_alert_rule(&self, tenant_id: &str, id: &str) -> Result<AlertRule, StoreError> {
        let row: Option<RuleRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {RULE_COLUMNS} FROM alert_rules WHERE tenant_id = $1 AND id = $2"
            )))
            .bind(tenant_id)
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        row.map(rule)
            .transpose()?
            .ok_or_else(|| StoreError::NotFound(format!("alert rule `{id}`")))
    }

    /// Deletes a rule with its history and undelivered notifications.
    pub async fn delete_alert_rule(&self, tenant_id: &str, id: &str) -> Result<(), StoreError> {
        let deleted = with_pool!(self, |pool| {
            async {
                let _turn = self.write_turn(pool.kind()).await?;
                sqlx::query("DELETE FROM alert_rules WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant_id)
                    .bind(id)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
            .await
        })?;
        if deleted == 0 {
            return Err(StoreError::NotFound(format!("alert rule `{id}`")));
        }
        Ok(())
    }

    /// Every tenant's rules, for the evaluator (at most `limit`, in tenant and id order).
    pub async fn all_alert_rules(
        &self,
        limit: i64,
    ) -> Result<Vec<(String, AlertRule)>, StoreError> {
        let rows: Vec<TenantRuleRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT tenant_id, {RULE_COLUMNS} FROM alert_rules ORDER BY tenant_id, id LIMIT $1"
            )))
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(t, id, uid, d, s, n, c, ch)| Ok((t, rule((id, uid, d, s, n, c, ch))?)))
            .collect()
    }

    /// Records a rule's change to `firing` (or back to `ok`, recorded as `resolved`) if it is
    /// still at the `transitions` the caller read; `None` when another node recorded it first
    /// or the rule is gone. Its notifications, one per channel in `channels` (of
    /// [`CHANNELS`]), are recorded with it, due now.
    pub async fn transition_alert(
        &self,
        tenant_id: &str,
        rule: &AlertRule,
        firing: bool,
        detail: &Value,
        channels: &[&str],
    ) -> Result<Option<AlertEvent>, StoreError> {
        let channels: Vec<&str> = CHANNELS
            .into_iter()
            .filter(|c| channels.contains(c))
            .collect();
        let (from, to, event_state) = if firing {
            ("ok", "firing", "firing")
        } else {
            ("firing", "ok", "resolved")
        };
        let detail_text = to_json(detail)?;
        let seq = rule.transitions.saturating_add(1);
        let recorded: Option<String> = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let at: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT {}",
                    now_stamp(pool.kind())
                )))
                .fetch_one(&mut *tx)
                .await?;
                let moved = sqlx::query(
                    "UPDATE alert_rules SET state = $1, transitions = $2, changed_at = $3 \
                     WHERE tenant_id = $4 AND id = $5 AND uid = $6 AND state = $7 AND transitions = $8",
                )
                .bind(to)
                .bind(seq)
                .bind(&at)
                .bind(tenant_id)
                .bind(&rule.id)
                .bind(&rule.uid)
                .bind(from)
                .bind(rule.transitions)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if moved != 1 {
                    tx.rollback().await?;
                    return Ok::<_, sqlx::Error>(None);
                }
                sqlx::query(
                    "INSERT INTO alert_events (tenant_id, rule_id, seq, state, at, detail) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(tenant_id)
                .bind(&rule.id)
                .bind(seq)
                .bind(event_state)
                .bind(&at)
                .bind(&detail_text)
                .execute(&mut *tx)
                .await?;
                for channel in &channels {
                    sqlx::query(
                        "INSERT INTO alert_deliveries (tenant_id, rule_id, seq, channel, delivery, attempts, next_at) \
                         VALUES ($1, $2, $3, $4, 'pending', 0, $5)",
                    )
                    .bind(tenant_id)
                    .bind(&rule.id)
                    .bind(seq)
                    .bind(channel)
                    .bind(&at)
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "DELETE FROM alert_events WHERE tenant_id = $1 AND rule_id = $2 AND seq <= $3 \
                     AND NOT EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.tenant_id = alert_events.tenant_id \
                     AND d.rule_id = alert_events.rule_id AND d.seq = alert_events.seq AND d.delivery = 'pending')",
                )
                .bind(tenant_id)
                .bind(&rule.id)
                .bind(seq - MAX_EVENTS_PER_RULE)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Some(at))
            }
            .await
        })?;
        Ok(recorded.map(|at| AlertEvent {
            rule_id: rule.id.clone(),
            seq,
            state: event_state.to_owned(),
            at,
            detail: detail.clone(),
            deliveries: channels
                .iter()
                .map(|c| ChannelDelivery {
                    channel: (*c).to_owned(),
                    delivery: "pending".to_owned(),
                    attempts: 0,
                    last_error: None,
                    delivered_at: None,
                })
                .collect(),
        }))
    }

    /// A tenant's alert history, newest first, each transition with its deliveries: one
    /// rule's or all (at most `limit`, after skipping the newest `offset`).
    pub async fn alert_history(
        &self,
        tenant_id: &str,
        rule_id: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<AlertEvent>, StoreError> {
        let rows: Vec<HistoryRow> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT e.rule_id, e.seq, e.state, e.at, e.detail, d.channel, d.delivery, d.attempts, \
                 d.last_error, d.delivered_at \
                 FROM (SELECT rule_id, seq, state, at, detail FROM alert_events WHERE tenant_id = $1 \
                       AND ($2 IS NULL OR rule_id = $2) ORDER BY at DESC, seq DESC, rule_id LIMIT $3 OFFSET $4) e \
                 LEFT JOIN alert_deliveries d ON d.tenant_id = $1 AND d.rule_id = e.rule_id AND d.seq = e.seq \
                 ORDER BY e.at DESC, e.seq DESC, e.rule_id, d.channel DESC",
            )
            .bind(tenant_id)
            .bind(rule_id)
            .bind(limit)
            .bind(offset.max(0))
            .fetch_all(pool)
            .await?
        });
        let mut out: Vec<AlertEvent> = Vec::new();
        for (
            rule_id,
            seq,
            state,
            at,
            detail,
            channel,
            delivery,
            attempts,
            last_error,
            delivered_at,
        ) in rows
        {
            let same = out
                .last()
                .is_some_and(|e| e.rule_id == rule_id && e.seq == seq);
            if !same {
                out.push(event((rule_id, seq, state, at, detail))?);
            }
            if let (Some(e), Some(channel), Some(delivery)) = (out.last_mut(), channel, delivery) {
                e.deliveries.push(ChannelDelivery {
                    channel,
                    delivery,
                    attempts: attempts.unwrap_or(0),
                    last_error,
                    delivered_at,
                });
            }
        }
        Ok(out)
    }

    /// Leases up to `limit` notifications that are due to `node` for `lease`, each counted as
    /// an attempt. A notification leased by a node that died is due again when its lease ends.
    pub async fn lease_alert_deliveries(
        &self,
        node: &str,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let now = self.db_now().await?;
        let until = shifted(&now, millis(lease));
        let due: Vec<(String, String, i64, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT tenant_id, rule_id, seq, channel FROM alert_deliveries WHERE delivery = 'pending' \
                 AND next_at <= $1 AND (lease_until IS NULL OR lease_until <= $1) \
                 ORDER BY next_at LIMIT $2",
            )
            .bind(&now)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        let mut out = Vec::new();
        for (tenant_id, rule_id, seq, channel) in due {
            let taken = with_pool!(self, |pool| {
                async {
                    let _turn = self.write_turn(pool.kind()).await?;
                    sqlx::query(
                        "UPDATE alert_deliveries SET lease_holder = $1, lease_until = $2, attempts = attempts + 1 \
                         WHERE tenant_id = $3 AND rule_id = $4 AND seq = $5 AND channel = $6 AND delivery = 'pending' \
                         AND (lease_until IS NULL OR lease_until <= $7)",
                    )
                    .bind(node)
                    .bind(&until)
                    .bind(&tenant_id)
                    .bind(&rule_id)
                    .bind(seq)
                    .bind(&channel)
                    .bind(&now)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
                }
                .await
            })?;
            if taken != 1 {
                continue;
            }
            let rule = self.get_alert_rule(&tenant_id, &rule_id).await?;
            let (sealed, sealed_password): (Vec<u8>, Option<Vec<u8>>) = with_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT secret, smtp_password FROM alert_rules WHERE tenant_id = $1 AND id = $2",
                )
                .bind(&tenant_id)
                .bind(&rule_id)
                .fetch_one(pool)
                .await?
            });
            let secret = open_text(
                self,
                &sealed,
                &aad(&tenant_id, &rule.uid),
                "alert rule secret",
            )?;
            let smtp_password = sealed_password
                .map(|p| {
                    open_text(
                        self,
                        &p,
                        &smtp_aad(&tenant_id, &rule.uid),
                        "alert rule SMTP password",
                    )
                })
                .transpose()?;
            let (row, attempts): (EventRow, i64) = with_pool!(self, |pool| {
                let (r, s, st, at, d, n): (String, i64, String, String, String, i64) =
                    sqlx::query_as(
                        "SELECT e.rule_id, e.seq, e.state, e.at, e.detail, d.attempts FROM alert_events e \
                         JOIN alert_deliveries d ON d.tenant_id = e.tenant_id AND d.rule_id = e.rule_id AND d.seq = e.seq \
                         WHERE e.tenant_id = $1 AND e.rule_id = $2 AND e.seq = $3 AND d.channel = $4",
                    )
                    .bind(&tenant_id)
                    .bind(&rule_id)
                    .bind(seq)
                    .bind(&channel)
                    .fetch_one(pool)
                    .await?;
                ((r, s, st, at, d), n)
            });
            out.push(DueDelivery {
                tenant_id,
                rule,
                event: event(row)?,
                channel,
                attempts,
                secret,
                smtp_password,
            });
        }
        Ok(out)
    }

    /// Ends `node`'s attempt at a notification; nothing changes if its lease was lost.
    pub async fn finish_alert_delivery(
        &self,
        d: &DueDelivery,
        node: &str,
        end: &DeliveryEnd,
    ) -> Result<(), StoreError> {
        let now = self.db_now().await?;
        let (delivery, next_at, error, delivered_at) = match end {
            DeliveryEnd::Delivered => ("delivered", now.clone(), None, Some(now.clone())),
            DeliveryEnd::Retry { error, after } => (
                "pending",
                shifted(&now, millis(*after)),
                Some(error.clone()),
                None,
            ),
            DeliveryEnd::Failed { error } => ("failed", now.clone(), Some(error.clone()), None),
        };
        with_pool!(self, |pool| {
            async {
                let _turn = self.write_turn(pool.kind()).await?;
                sqlx::query(
                    "UPDATE alert_deliveries SET delivery = $1, next_at = $2, last_error = $3, delivered_at = $4, \
                     lease_until = NULL, lease_holder = NULL \
                     WHERE tenant_id = $5 AND rule_id = $6 AND seq = $7 AND channel = $8 AND lease_holder = $9 \
                     AND delivery = 'pending'",
                )
                .bind(delivery)
                .bind(&next_at)
                .bind(error.as_deref())
                .bind(delivered_at.as_deref())
                .bind(&d.tenant_id)
                .bind(&d.rule.id)
                .bind(d.event.seq)
                .bind(&d.channel)
                .bind(node)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
            .await
        })?;
        Ok(())
    }

    /// Notes that a circuit breaker of `tenant_id` for `subject` (an upstream) opened on `node`.
    pub async fn note_breaker_open(
        &self,
        tenant_id: &str,
        subject: &str,
        node: &str,
    ) -> Result<(), StoreError> {
        let subject = crate::truncate(subject, 256);
        let written = with_pool!(self, |pool| {
            async {
                let _turn = self.write_turn(pool.kind()).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO alert_signals (tenant_id, kind, subject, node_id, at) VALUES ($1, 'breaker', $2, $3, {now}) \
                     ON CONFLICT (tenant_id, kind, subject, node_id) DO UPDATE SET at = excluded.at",
                    now = now_stamp(pool.kind())
                )))
                .bind(tenant_id)
                .bind(&subject)
                .bind(node)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
            .await
        });
        match written {
            Ok(_) => Ok(()),
            // The tenant was deleted meanwhile: nothing to alert.
            Err(e) if is_fk_violation(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The upstreams whose breakers opened (on any node) within `window` before `now`, matching
    /// `subject` when given.
    pub async fn breakers_opened_since(
        &self,
        tenant_id: &str,
        subject: Option<&str>,
        now: &str,
        window: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let since = shifted(now, -millis(window));
        let rows: Vec<String> = with_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT DISTINCT subject FROM alert_signals WHERE tenant_id = $1 AND kind = 'breaker' \
                 AND at >= $2 AND ($3 IS NULL OR subject = $3) ORDER BY subject LIMIT 20",
            )
            .bind(tenant_id)
            .bind(&since)
            .bind(subject)
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }

    /// Forgets breaker openings older than `keep` before `now`.
    pub async fn prune_alert_signals(&self, now: &str, keep: Duration) -> Result<(), StoreError> {
        let before = shifted(now, -millis(keep));
        with_pool!(self, |pool| {
            async {
                let _turn = self.write_turn(pool.kind()).await?;
                sqlx::query("DELETE FROM alert_signals WHERE at < $1")
                    .bind(&before)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
            .await
        })?;
        Ok(())
    }

    /// The tenant's OAuth2 connections the provider refused (`broken`), one agent's or all.
    pub async fn broken_connections(
        &self,
        tenant_id: &str,
        agent: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let rows: Vec<String> = with_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT agent FROM oauth_connections WHERE tenant_id = $1 AND status = 'broken' \
                 AND ($2 IS NULL OR agent = $2) ORDER BY agent LIMIT 20",
            )
            .bind(tenant_id)
            .bind(agent)
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }

    /// The tenant's live calls (every node's).
    pub async fn tenant_live_calls(&self, tenant_id: &str) -> Result<i64, StoreError> {
        let n: Option<i64> = with_pool!(self, |pool| {
            sqlx::query_scalar("SELECT live_calls FROM tenants WHERE id = $1")
                .bind(tenant_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(n.unwrap_or(0))
    }

    /// A tool's recorded invocations within `window` before `now` (the newest
    /// [`WINDOW_SCAN_ROWS`]); interrupted ones (`cancelled`) are left out.
    pub async fn tool_window(
        &self,
        tenant_id: &str,
        tool: &str,
        now: &str,
        window: Duration,
    ) -> Result<WindowFigures, StoreError> {
        let since = shifted(now, -millis(window));
        let rows: Vec<(i64, Option<String>, Option<f64>)> = with_pool!(self, |pool| {
            let sql = match pool.kind() {
                Backend::Sqlite => {
                    "SELECT CAST(CASE WHEN json_extract(record, '$.ok') THEN 1 ELSE 0 END AS BIGINT), \
                     json_extract(record, '$.error'), CAST(json_extract(record, '$.latency_ms') AS REAL) \
                     FROM call_invocations WHERE tenant_id = $1 AND created_at >= $2 AND created_at <= $3 \
                     AND json_extract(record, '$.tool') = $4 ORDER BY created_at DESC LIMIT $5"
                }
                Backend::Postgres => {
                    "SELECT CAST(CASE WHEN (record::jsonb ->> 'ok') = 'true' THEN 1 ELSE 0 END AS BIGINT), \
                     record::jsonb ->> 'error', CAST(record::jsonb ->> 'latency_ms' AS DOUBLE PRECISION) \
                     FROM call_invocations WHERE tenant_id = $1 AND created_at >= $2 AND created_at <= $3 \
                     AND record::jsonb ->> 'tool' = $4 ORDER BY created_at DESC LIMIT $5"
                }
            };
            sqlx::query_as(sql)
                .bind(tenant_id)
                .bind(&since)
                .bind(now)
                .bind(tool)
                .bind(WINDOW_SCAN_ROWS)
                .fetch_all(pool)
                .await?
        });
        let mut figures = WindowFigures::default();
        for (ok, error, latency) in rows {
            if error.as_deref() == Some("cancelled") {
                continue;
            }
            figures.calls += 1;
            if ok == 0 {
                figures.failures += 1;
            }
            if let Some(l) = latency.filter(|l| l.is_finite()) {
                figures.latencies_ms.push(l);
            }
        }
        figures.latencies_ms.sort_by(f64::total_cmp);
        Ok(figures)
    }
}

#[cfg(test)]
mod tests {
    use super::shifted;

    #[test]
    fn stamps_shift_both_ways() {
        assert_eq!(
            shifted("2026-11-29T05:00:00.000Z", 90_000),
            "2026-11-29T05:01:30.000Z"
        );
        assert_eq!(
            shifted("2026-11-29T05:00:00.000Z", -300_000),
            "2026-11-29T04:55:00.000Z"
        );
    }
}
