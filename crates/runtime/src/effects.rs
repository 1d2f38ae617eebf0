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
use switchboard_core::effect::{EffectOutcome, EffectRequest, McpRequest};
use switchboard_core::{ErrorCode, ToolError};

use crate::BoxFuture;
use crate::http::HttpEffects;

/// Moves or ends a live call (OpenAI's call REST endpoints at the Realtime door).
pub trait CallControl: Send + Sync {
    /// SIP REFER of the call to `target_uri`.
    fn refer<'a>(
        &'a self,
        call_id: &'a str,
        target_uri: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Has the model say `goodbye` (if any), then hangs up.
    fn hangup<'a>(
        &'a self,
        call_id: &'a str,
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
    pub signing_secret: Option<&'a str>,
    pub transfers: &'a TransferLedger,
    /// Time left before the tool's deadline, the ceiling for any one effect.
    pub remaining: Duration,
}

impl Effects {
    /// Effects with HTTP only: terminal effects become [`CallAction`]s for the client.
    pub fn http_only(http: Arc<HttpEffects>) -> Self {
        Effects {
            http,
            call_control: None,
            mcp: None,
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
                    Some(cc) => match cc.refer(scope.call_id, &t.target_uri).await {
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
                Some(cc) => match cc.hangup(scope.call_id, e.message.as_deref()).await {
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
        }
    }
}
