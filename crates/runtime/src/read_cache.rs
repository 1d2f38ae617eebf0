//! A call's cache of read effects: a `read` tool that declares `cache_ttl_s` has an identical
//! effect request (same tool version, same request as sent, ignoring its idempotency key and
//! timeouts) answered with the outcome the first one had, for that many seconds, within one
//! call. "What time is my appointment?" asked twice costs one upstream round trip.
//!
//! Only what succeeded is kept (an HTTP 2xx, a toolkit's or MCP server's answer); a failure is
//! asked again next time. Never a write, a transfer or a hang-up. Bounded per call by entries
//! and bytes, the oldest going first; the cache lives and dies with the call's pinned config.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchboard_core::{EffectOutcome, EffectRequest, SideEffect, Tool};

/// Most outcomes one call keeps.
pub const MAX_ENTRIES: usize = 64;
/// Most bytes (as JSON) of outcomes one call keeps.
pub const MAX_BYTES: usize = 256 * 1024;
/// Largest single outcome kept (as JSON); a bigger one is asked again each time.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// One call's reusable read outcomes.
#[derive(Debug, Default)]
pub struct ReadCache {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    /// Oldest first.
    items: VecDeque<Entry>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    /// The tool version (held, so its address names it for the entry's life).
    tool: Arc<Tool>,
    request: String,
    outcome: EffectOutcome,
    expires: Instant,
    bytes: usize,
}

/// What the cache answers for a request, with the key to store its outcome under.
#[derive(Debug)]
pub enum Lookup {
    /// The tool does not cache, or the request is not a read.
    Uncached,
    /// Kept from an identical request earlier in the call.
    Hit(EffectOutcome),
    /// Not kept yet: perform it, then [`ReadCache::store`] its outcome with this key.
    Miss(String),
}

impl ReadCache {
    /// Looks `request` of `tool` up.
    pub fn lookup(&self, tool: &Arc<Tool>, request: &EffectRequest) -> Lookup {
        if tool.cache_ttl_s().is_none() || !cacheable(tool, request) {
            return Lookup::Uncached;
        }
        let key = crate::replay::comparable(request).to_string();
        let now = Instant::now();
        let mut e = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        e.drop_expired(now);
        let hit = e
            .items
            .iter()
            .find(|x| Arc::ptr_eq(&x.tool, tool) && x.request == key)
            .map(|x| x.outcome.clone());
        match hit {
            Some(o) => Lookup::Hit(o),
            None => Lookup::Miss(key),
        }
    }

    /// Keeps `outcome` of the request looked up as `key`, if it succeeded and fits.
    pub fn store(&self, tool: &Arc<Tool>, key: String, outcome: &EffectOutcome) {
        let Some(ttl) = tool.cache_ttl_s() else {
            return;
        };
        if !succeeded(outcome) {
            return;
        }
        let bytes = key.len() + serde_json::to_vec(outcome).map_or(usize::MAX, |v| v.len());
        if bytes > MAX_ENTRY_BYTES {
            return;
        }
        let now = Instant::now();
        let mut e = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        e.drop_expired(now);
        if let Some(i) = e
            .items
            .iter()
            .position(|x| Arc::ptr_eq(&x.tool, tool) && x.request == key)
        {
            // Two identical requests ran at once: the later outcome replaces the earlier.
            if let Some(old) = e.items.remove(i) {
                e.bytes -= old.bytes;
            }
        }
        while e.items.len() >= MAX_ENTRIES || e.bytes + bytes > MAX_BYTES {
            match e.items.pop_front() {
                Some(old) => e.bytes -= old.bytes,
                None => break,
            }
        }
        e.bytes += bytes;
        e.items.push_back(Entry {
            tool: Arc::clone(tool),
            request: key,
            outcome: outcome.clone(),
            expires: now + Duration::from_secs(u64::from(ttl)),
            bytes,
        });
    }

    /// How many outcomes are kept now (expired ones included until the next lookup).
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .items
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Entries {
    fn drop_expired(&mut self, now: Instant) {
        let before = self.items.len();
        let mut freed = 0;
        self.items.retain(|x| {
            let keep = x.expires > now;
            if !keep {
                freed += x.bytes;
            }
            keep
        });
        if self.items.len() != before {
            self.bytes -= freed;
        }
    }
}

/// A read tool's request that changes nothing outside: an HTTP GET/HEAD, a toolkit's read
/// (`calendar.list_events`, `memory.search`, …), or an MCP call (which the tool, declared
/// `read`, says only reads). Never a transfer or a hang-up.
fn cacheable(tool: &Tool, request: &EffectRequest) -> bool {
    if tool.side_effect() != SideEffect::Read {
        return false;
    }
    match request {
        EffectRequest::Transfer(_) | EffectRequest::EndCall(_) => false,
        EffectRequest::Mcp(_) => true,
        EffectRequest::Http(_) | EffectRequest::Toolkit(_) => !request.is_write(),
    }
}

fn succeeded(outcome: &EffectOutcome) -> bool {
    match outcome {
        EffectOutcome::Http(r) => (200..300).contains(&r.status),
        EffectOutcome::Done { .. } => true,
        EffectOutcome::Failed(_) => false,
    }
}
