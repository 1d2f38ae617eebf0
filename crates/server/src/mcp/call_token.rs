//! Credentials scoped to one call's MCP endpoint.
//!
//! When OpenAI calls a phone call's tools over MCP (`features.realtime.mcp_agents`), it sends
//! whatever `Authorization` the accept gave it. A tenant key there would let anyone who reads
//! OpenAI's session configuration act on every call and tool of the tenant. A call token
//! instead opens exactly one door: `/v1/calls/{call_id}/mcp` of the call it names, and only
//! while that call is live (the door checks the call's state on every request; see
//! `door::authenticate`). It is the tenant and call id sealed under the master key (AES-GCM,
//! bound to its purpose), so any node can check it and no one can forge or alter one; it also
//! carries an expiry, a backstop for a call that never ends cleanly.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use switchboard_store::Store;

/// How every call token starts, so the door tells one from a tenant key without a lookup.
pub const PREFIX: &str = "sbc_";
/// What the sealed value is bound to: a console cookie is not a call token, nor the reverse.
const PURPOSE: &str = "switchboard/mcp-call-token";
/// Longest a token lives, however long its call: a phone call longer than this is cut off by
/// OpenAI anyway.
pub const MAX_LIFETIME_SECS: u64 = 6 * 3600;
/// A token longer than this is not one of ours (nothing is decoded beyond it).
const MAX_LEN: usize = 1024;

/// Whom a call token lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGrant {
    pub tenant_id: String,
    pub call_id: String,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    t: String,
    c: String,
    exp: u64,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A token for `call_id` of `tenant_id`; `None` only if sealing fails.
pub fn mint(store: &Store, tenant_id: &str, call_id: &str) -> Option<String> {
    let plain = serde_json::to_vec(&Sealed {
        t: tenant_id.to_owned(),
        c: call_id.to_owned(),
        exp: now_secs() + MAX_LIFETIME_SECS,
    })
    .ok()?;
    let sealed = store.seal_token(PURPOSE, &plain).ok()?;
    Some(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(sealed)))
}

/// Whether `credential` looks like a call token (it may still be invalid).
pub fn is_call_token(credential: &str) -> bool {
    credential.starts_with(PREFIX)
}

/// The grant of a valid, unexpired token; `None` for anything else (forged, altered, expired,
/// sealed under another master key), alike.
pub fn verify(store: &Store, token: &str) -> Option<CallGrant> {
    let body = token.strip_prefix(PREFIX).filter(|b| b.len() <= MAX_LEN)?;
    let sealed = URL_SAFE_NO_PAD.decode(body).ok()?;
    let plain = store.open_token(PURPOSE, &sealed).ok()?;
    let s: Sealed = serde_json::from_slice(&plain).ok()?;
    (s.exp > now_secs()).then_some(CallGrant {
        tenant_id: s.t,
        call_id: s.c,
    })
}
