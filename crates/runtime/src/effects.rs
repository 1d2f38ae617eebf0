//! Where the core's effect requests are performed.
//!
//! `api_call` goes to [`HttpEffects`]; `transfer` and `end_call` go to a [`CallControl`] when the
//! door has one (the Realtime SIP door REFERs and hangs up itself), and are otherwise handed to
//! the client as [`CallAction`]s to carry out (the HTTP door); `mcp.call` goes to [`McpCalls`].

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::effect::{EffectOutcome, EffectRequest, McpRequest, ToolkitRequest};
use switchboard_core::{ErrorCode, ToolError};

use crate::BoxFuture;
use crate::http::HttpEffects;

/// Moves or ends a live call (OpenAI's call REST endpoints at the phone doors).
///
/// Both name the function call that asked (`function_call_id`): once the call is leaving, the
/// door still waits for that call's answer before it lets go of the line, so the tool's answer
/// reaches the model and its record says what happened, rather than the line's end cancelling
/// it.
pub trait CallControl: Send + Sync {
    /// SIP REFER of the call to `target_uri`.
    fn refer<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
        target_uri: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Starts the hang-up: `Ok` once it is under way. The door sends the function call's
    /// answer first, then has the model say `goodbye` (if any), then hangs up.
    fn hangup<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
        goodbye: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// Calls tools on a tenant's registered MCP servers.
pub trait McpCalls: Send + Sync {
    fn call<'a>(
        &'a self,
        tenant_id: &'a str,
        request: &'a McpRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, EffectOutcome>;
}

/// Sends email (`email.send`); the SMTP toolkit provides one.
pub trait EmailSender: Send + Sync {
    fn send<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        message: &'a EmailMessage,
    ) -> BoxFuture<'a, Result<Value, String>>;
}

/// Reads and writes calendars (`calendar.*`); the Google Calendar and CalDAV toolkits provide one.
///
/// A failure is typed: its code is the answer's `error` (`slot_taken` with free `alternatives`
/// in its details, `outside_hours`, `calendar_unavailable`, `not_connected`, `rate_limited`,
/// `timeout`, `invalid_attendee`, `not_found`, `too_late_to_change`, `invalid_arguments`), its
/// message a sentence the model can say.
pub trait Calendar: Send + Sync {
    fn call<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        op: &'a CalendarOp,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

/// Entities and relations kept per tenant and caller (`memory.*`).
pub trait Memory: Send + Sync {
    fn call<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        op: &'a MemoryOp,
    ) -> BoxFuture<'a, Result<Value, String>>;
}

/// What a toolkit handler knows of the call: the tenant, the caller, and the agent tool's config
/// and secrets (e.g. SMTP host and password, calendar id and OAuth token).
#[derive(Debug)]
pub struct ToolkitScope<'a> {
    pub tenant_id: &'a str,
    /// The call the effect belongs to (memory notes which call an observation came from).
    pub call_id: &'a str,
    /// Who is calling: `call.from`, else `user.id`.
    pub caller: Option<&'a str>,
    pub config: &'a Value,
    pub secrets: &'a Value,
    pub idempotency_key: &'a str,
}

/// One or several addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Addresses {
    One(String),
    Many(Vec<String>),
}

impl Addresses {
    pub fn list(&self) -> Vec<&str> {
        match self {
            Addresses::One(a) => vec![a.as_str()],
            Addresses::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// `email.send`'s fields: a `subject` and `body`, or a `template` of the agent's email
/// toolkit and its `variables`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailMessage {
    pub to: Addresses,
    #[serde(default)]
    pub cc: Option<Addresses>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub reply_to: Option<String>,
    /// The name of a template in the email toolkit's `config.templates`.
    #[serde(default)]
    pub template: Option<String>,
    /// What the template's `variables` scope holds.
    #[serde(default)]
    pub variables: Option<Value>,
}

/// `calendar.*`'s operations: seed 003's three, and the caller's own bookings found, cancelled
/// and moved, and free slots in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CalendarOp {
    ListEvents {
        time_min: String,
        time_max: Option<String>,
        max_results: Option<u32>,
    },
    CreateEvent {
        title: String,
        start_time: String,
        duration_minutes: Option<u32>,
        attendees: Option<Vec<String>>,
        description: Option<String>,
    },
    CheckAvailability {
        date: String,
        duration_minutes: Option<u32>,
    },
    /// The caller's own upcoming bookings (those carrying the call's caller identity).
    FindBookings {
        email: Option<String>,
        name: Option<String>,
    },
    /// Cancels one of the caller's own bookings.
    CancelEvent { event_id: String },
    /// Moves one of the caller's own bookings; the new slot is held before the move.
    RescheduleEvent {
        event_id: String,
        new_start_time: String,
        duration_minutes: Option<u32>,
    },
    /// Free slots in a window: a day (and part of it), a range, or the next week.
    FindFreeSlots {
        day: Option<String>,
        part_of_day: Option<String>,
        time_min: Option<String>,
        time_max: Option<String>,
        duration_minutes: Option<u32>,
    },
}

/// `memory.*`'s operations (seed 002).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemoryOp {
    Search {
        query: String,
        limit: Option<u32>,
    },
    Create {
        entity: String,
        content: String,
        relations: Option<Value>,
    },
    Traverse {
        from: String,
        relation: String,
        depth: Option<u32>,
    },
}

/// Reads a toolkit request's fields as the typed operation its handler takes.
fn typed<T: serde::de::DeserializeOwned>(
    action: &str,
    op: Option<&str>,
    fields: &serde_json::Map<String, Value>,
) -> Result<T, ToolError> {
    let mut v = Value::Object(fields.clone());
    if let (Some(op), Value::Object(m)) = (op, &mut v) {
        m.insert("op".into(), Value::String(op.to_owned()));
    }
    serde_json::from_value(v).map_err(|e| {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!("{action}: the rendered fields do not fit ({e}); check the tool's templates"),
        )
    })
}

/// Something the client must do for the call because a tool asked (when Switchboard does not
/// control the call itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CallAction {
    Transfer { target_uri: String },
    Hangup { message: Option<String> },
}

/// Per-call memory of REFERs already sent, so a call is transferred at most once per target
/// (`{call_id}-transfer-{target_uri}`), however often the model asks.
#[derive(Debug, Default)]
pub struct TransferLedger(Mutex<HashSet<String>>);

impl TransferLedger {
    /// Claims `key`; false when it was claimed before.
    fn claim(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned())
    }

    fn release(&self, key: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

/// The effect handlers of a deployment.
#[derive(Clone)]
pub struct Effects {
    pub http: Arc<HttpEffects>,
    pub call_control: Option<Arc<dyn CallControl>>,
    pub mcp: Option<Arc<dyn McpCalls>>,
    pub email: Option<Arc<dyn EmailSender>>,
    pub calendar: Option<Arc<dyn Calendar>>,
    pub memory: Option<Arc<dyn Memory>>,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("call_control", &self.call_control.is_some())
            .field("mcp", &self.mcp.is_some())
            .finish_non_exhaustive()
    }
}

/// What an effect needs to know about its call.
#[derive(Debug)]
pub struct EffectScope<'a> {
    pub tenant_id: &'a str,
    pub call_id: &'a str,
    /// The function call whose run asked for the effect.
    pub function_call_id: &'a str,
    pub signing_secret: Option<&'a str>,
    pub transfers: &'a TransferLedger,
    /// Time left before the tool's deadline, the ceiling for any one effect.
    pub remaining: Duration,
    /// Who is calling (`call.from`, else `user.id`), for per-caller toolkits such as memory.
    pub caller: Option<&'a str>,
    /// The agent tool's config and secrets, for toolkit handlers.
    pub tool_config: &'a Value,
    pub tool_secrets: &'a Value,
}

impl Effects {
    /// Effects with HTTP only: terminal effects become [`CallAction`]s for the client.
    pub fn http_only(http: Arc<HttpEffects>) -> Self {
        Effects {
            http,
            call_control: None,
            mcp: None,
            email: None,
            calendar: None,
            memory: None,
        }
    }

    /// Performs one effect. Never panics and never fails outward: failures are outcomes.
    pub async fn perform(
        &self,
        scope: &EffectScope<'_>,
        request: &EffectRequest,
        actions: &mut Vec<CallAction>,
    ) -> EffectOutcome {
        match request {
            EffectRequest::Http(h) => {
                self.http
                    .perform(scope.tenant_id, scope.signing_secret, h)
                    .await
            }
            EffectRequest::Transfer(t) => {
                if !scope.transfers.claim(&t.idempotency_key) {
                    tracing::info!(name: "request_transfer_refer_skipped_duplicate", idempotency_key = %t.idempotency_key, "request_transfer_refer_skipped_duplicate");
                    return EffectOutcome::Done { value: Value::Null };
                }
                match &self.call_control {
                    None => {
                        actions.push(CallAction::Transfer {
                            target_uri: t.target_uri.clone(),
                        });
                        EffectOutcome::Done { value: Value::Null }
                    }
                    Some(cc) => match cc
                        .refer(scope.call_id, scope.function_call_id, &t.target_uri)
                        .await
                    {
                        Ok(()) => {
                            tracing::info!(name: "request_transfer_refer_call_succeeded", target_uri = %t.target_uri, "request_transfer_refer_call_succeeded");
                            EffectOutcome::Done { value: Value::Null }
                        }
                        Err(e) => {
                            // A REFER that failed may be tried again by a later call of the tool.
                            scope.transfers.release(&t.idempotency_key);
                            tracing::warn!(name: "tool_execution_error", target_uri = %t.target_uri, error = %e, "tool_execution_error");
                            EffectOutcome::Failed(ToolError::new(ErrorCode::CallTransferFailed, e))
                        }
                    },
                }
            }
            EffectRequest::EndCall(e) => match &self.call_control {
                None => {
                    actions.push(CallAction::Hangup {
                        message: e.message.clone(),
                    });
                    EffectOutcome::Done { value: Value::Null }
                }
                Some(cc) => match cc
                    .hangup(scope.call_id, scope.function_call_id, e.message.as_deref())
                    .await
                {
                    Ok(()) => EffectOutcome::Done { value: Value::Null },
                    Err(err) => EffectOutcome::Failed(ToolError::new(
                        ErrorCode::ToolExecutionFailed,
                        format!("The call could not be ended: {err}"),
                    )),
                },
            },
            EffectRequest::Mcp(m) => match &self.mcp {
                None => EffectOutcome::Failed(ToolError::new(
                    ErrorCode::ToolExecutionFailed,
                    format!("No MCP server `{}` is available to this tenant.", m.server),
                )),
                Some(mcp) => mcp.call(scope.tenant_id, m, scope.remaining).await,
            },
            EffectRequest::Toolkit(t) => self.toolkit(scope, t).await,
        }
    }

    async fn toolkit(&self, scope: &EffectScope<'_>, request: &ToolkitRequest) -> EffectOutcome {
        let tk = ToolkitScope {
            tenant_id: scope.tenant_id,
            call_id: scope.call_id,
            caller: scope.caller,
            config: scope.tool_config,
            secrets: scope.tool_secrets,
            idempotency_key: &request.idempotency_key,
        };
        let action = request.action.as_str();
        let (family, op) = action.split_once('.').unwrap_or((action, ""));
        let unavailable = || {
            EffectOutcome::Failed(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "`{action}` is not available here: no {family} handler is configured. Tell the caller this cannot be done by phone."
                ),
            ))
        };
        let result = match family {
            "email" => match &self.email {
                None => return unavailable(),
                Some(h) => match typed::<EmailMessage>(action, None, &request.fields) {
                    Ok(msg) => h.send(&tk, &msg).await,
                    Err(e) => return EffectOutcome::Failed(e),
                },
            },
            "calendar" => match &self.calendar {
                None => return unavailable(),
                Some(h) => match typed::<CalendarOp>(action, Some(op), &request.fields) {
                    Ok(op) => {
                        return match h.call(&tk, &op).await {
                            Ok(value) => EffectOutcome::Done { value },
                            Err(e) => EffectOutcome::Failed(e),
                        };
                    }
                    Err(e) => return EffectOutcome::Failed(e),
                },
            },
            "memory" => match &self.memory {
                None => return unavailable(),
                Some(h) => match typed::<MemoryOp>(action, Some(op), &request.fields) {
                    Ok(op) => h.call(&tk, &op).await,
                    Err(e) => return EffectOutcome::Failed(e),
                },
            },
            _ => return unavailable(),
        };
        match result {
            Ok(value) => EffectOutcome::Done { value },
            Err(message) => EffectOutcome::Failed(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!("{action} failed: {message}"),
            )),
        }
    }
}
