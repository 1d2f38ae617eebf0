//! `transfer`: a SIP REFER of the call (seed 001), to a configured destination or a URI.

use serde_json::{Value, json};

use super::{Exec, Flow, ParseCx};
use crate::effect::{EffectOutcome, EffectRequest, TransferRequest};
use crate::error::{ErrorCode, ToolError};
use crate::reader::Obj;
use crate::template::StrTemplate;
use crate::transfer::{
    Resolution, fallback_target, normalize_target_uri, resolve_destination,
    transfer_idempotency_key,
};

pub(crate) const FIELDS: &[&str] = &["type", "destination", "target_uri", "reason"];

/// What the model is told when the REFER fails (seed 001).
pub(crate) const TRANSFER_FAILED: &str =
    "Failed to transfer the call. Please handle the call without transfer.";

#[derive(Debug)]
enum Target {
    Destination(StrTemplate),
    Uri(StrTemplate),
}

#[derive(Debug)]
pub(crate) struct Transfer {
    target: Target,
    reason: Option<StrTemplate>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Transfer> {
    let destination = cx.template(obj, "destination", false);
    let uri = cx.template(obj, "target_uri", false);
    let reason = cx.template(obj, "reason", false);
    let target = match (destination, uri) {
        (Some(d), None) => Target::Destination(d),
        (None, Some(u)) => Target::Uri(u),
        (Some(_), Some(_)) => {
            cx.sink.error_fix(
                &obj.ptr,
                "`transfer` has both `destination` and `target_uri`",
                "keep one of them",
            );
            return None;
        }
        (None, None) => {
            if obj.get("destination").is_none() && obj.get("target_uri").is_none() {
                cx.sink.error_fix(
                    &obj.ptr,
                    "`transfer` has neither `destination` nor `target_uri`",
                    "add `\"destination\": \"{{params.destination_id}}\"` or a `target_uri`",
                );
            }
            return None;
        }
    };
    Some(Transfer { target, reason })
}

fn is_uri(s: &str) -> bool {
    ["sip:", "sips:", "tel:"]
        .iter()
        .any(|p| s.starts_with(p) && s.len() > p.len())
}

impl Transfer {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match self.request(x) {
            Ok(r) => Flow::Suspend(EffectRequest::Transfer(r)),
            Err(e) => Flow::Fail(e),
        }
    }

    fn request(&self, x: &Exec<'_>) -> Result<TransferRequest, ToolError> {
        let reason = self
            .reason
            .as_ref()
            .map(|t| x.render(t))
            .transpose()?
            .filter(|r| !r.is_empty());
        let (target_uri, destination_id) = match &self.target {
            Target::Destination(t) => {
                let id = x.render(t)?;
                let resolution = match &x.st.input.refer {
                    Some(cfg) => resolve_destination(cfg, &id),
                    None => Resolution::Disabled,
                };
                match resolution {
                    Resolution::Target(uri) => (uri, Some(id)),
                    Resolution::Disabled => {
                        return Err(ToolError::new(
                            ErrorCode::CallTransferFailed,
                            "Call transfer is not available. Please handle the call without transfer.",
                        ));
                    }
                    Resolution::Unknown { valid_ids } => {
                        return Err(ToolError::new(
                            ErrorCode::CallTransferFailed,
                            format!(
                                "'{id}' is not a transfer destination. Valid destinations: {}.",
                                valid_ids.join(", ")
                            ),
                        )
                        .with_details(json!({"valid_destination_ids": valid_ids})));
                    }
                }
            }
            Target::Uri(t) => {
                let uri = normalize_target_uri(x.render(t)?.trim());
                if !is_uri(&uri) {
                    return Err(x.internal(format!(
                        "`{uri}` is not a sip:, sips: or tel: URI, nor an E.164 number"
                    )));
                }
                (uri, None)
            }
        };
        Ok(TransferRequest {
            idempotency_key: transfer_idempotency_key(call_id(x), &target_uri),
            target_uri,
            destination_id,
            reason,
        })
    }

    /// The REFER the run is waiting for: the first, or after it failed its destination's
    /// fallback.
    fn current(&self, x: &Exec<'_>) -> Result<TransferRequest, ToolError> {
        let first = self.request(x)?;
        if x.st.transfer_attempts.is_empty() {
            return Ok(first);
        }
        Ok(self.fallback(x, &first).unwrap_or(first))
    }

    /// The REFER to `first`'s destination's fallback, if it has one.
    fn fallback(&self, x: &Exec<'_>, first: &TransferRequest) -> Option<TransferRequest> {
        let cfg = x.st.input.refer.as_ref()?;
        let (id, target_uri) = fallback_target(cfg, first.destination_id.as_deref()?)?;
        Some(TransferRequest {
            idempotency_key: transfer_idempotency_key(call_id(x), &target_uri),
            target_uri,
            destination_id: Some(id),
            reason: first.reason.clone(),
        })
    }

    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        let req = match self.current(x) {
            Ok(r) => r,
            Err(e) => return Flow::Fail(e),
        };
        let reason = match outcome {
            EffectOutcome::Done { .. } => return transferred(x, req),
            EffectOutcome::Failed(e) if e.code == ErrorCode::Cancelled => return Flow::Fail(e),
            EffectOutcome::Failed(e) => e.message,
            EffectOutcome::Http(r) => format!("the phone API answered {}", r.status),
        };
        let first = x.st.transfer_attempts.is_empty();
        x.st.transfer_attempts.push(json!({
            "destination_id": req.destination_id,
            "target_uri": req.target_uri,
            "error": reason,
        }));
        // The first destination's fallback is tried once; the fallback's own is not.
        if first && let Some(next) = self.fallback(x, &req) {
            return Flow::Suspend(EffectRequest::Transfer(next));
        }
        let message = if first {
            TRANSFER_FAILED.to_owned()
        } else {
            format!(
                "{TRANSFER_FAILED} Neither {} nor its fallback took the call.",
                x.st.transfer_attempts[0]["destination_id"]
                    .as_str()
                    .unwrap_or("the destination")
            )
        };
        Flow::Fail(
            ToolError::new(ErrorCode::CallTransferFailed, message)
                .with_details(json!({"reason": reason, "attempts": x.st.transfer_attempts})),
        )
    }
}

/// The call's id, part of every transfer's idempotency key.
fn call_id<'x>(x: &'x Exec<'_>) -> &'x str {
    x.st.ctx
        .call
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The REFER `req` was accepted: the result says where the call went, and which destinations
/// refused it first.
fn transferred(x: &mut Exec<'_>, req: TransferRequest) -> Flow {
    let attempts = std::mem::take(&mut x.st.transfer_attempts);
    let result = std::sync::Arc::make_mut(&mut x.st.result);
    if let Value::Object(m) = result {
        m.insert("transfer".into(), json!("requested"));
        m.insert("target_uri".into(), json!(req.target_uri));
        if let Some(d) = req.destination_id {
            m.insert("destination_id".into(), json!(d));
        }
        if let Some(r) = req.reason {
            m.insert("reason".into(), json!(r));
        }
        if !attempts.is_empty() {
            m.insert("failed_attempts".into(), Value::Array(attempts));
        }
    }
    Flow::Next
}
