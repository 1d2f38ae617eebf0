//! Warm upstreams: when a call starts, the origins its agent's tools name literally
//! (`https://api.example.com/orders/{{params.id}}` names `https://api.example.com`) get a
//! connection in the shared pool, so the call's first tool call pays no DNS lookup, TCP
//! handshake or TLS handshake.
//!
//! reqwest has no connect-only call, so the connection is opened by a `HEAD /` to the origin,
//! a request HTTP defines as safe, sent with the same guarded client (the outbound-address
//! guard applies; its answer is dropped). Each origin is warmed at most once per
//! [`REWARM_AFTER`] per node (the pool keeps an idle connection for 90 s, and calls' own
//! requests keep it warm), never while a tenant's breaker for it is open, and never counted by
//! the breaker. It runs in a task of its own: a call's start never waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::Url;

use super::HttpEffects;
use crate::breaker::BreakerState;

/// Most origins one call start warms.
pub const MAX_ORIGINS_PER_CALL: usize = 8;
/// An origin warmed this recently is not warmed again.
pub const REWARM_AFTER: Duration = Duration::from_secs(20);
/// How long a warming request may take before it is given up.
const WARM_TIMEOUT: Duration = Duration::from_secs(5);
/// Most origins a node remembers warming (older ones are forgotten first).
const MAX_REMEMBERED: usize = 4_096;

/// When each origin was last warmed on this node.
#[derive(Debug, Default)]
pub(crate) struct Warmed(Mutex<HashMap<String, Instant>>);

impl Warmed {
    /// Claims `origin` for warming now: false when it was warmed within [`REWARM_AFTER`], or
    /// the node remembers too many origins to add one.
    fn claim(&self, origin: &str, now: Instant) -> bool {
        let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if m.get(origin)
            .is_some_and(|at| now.duration_since(*at) < REWARM_AFTER)
        {
            return false;
        }
        if m.len() >= MAX_REMEMBERED && !m.contains_key(origin) {
            m.retain(|_, at| now.duration_since(*at) < REWARM_AFTER);
            if m.len() >= MAX_REMEMBERED {
                return false;
            }
        }
        m.insert(origin.to_owned(), now);
        true
    }
}

impl HttpEffects {
    /// Opens connections to `origins` (`scheme://host[:port]`) for `tenant_id`'s call, in the
    /// background; the first [`MAX_ORIGINS_PER_CALL`] only.
    pub fn warm(self: &Arc<Self>, tenant_id: &str, origins: Vec<String>) {
        let now = Instant::now();
        let mut todo = Vec::new();
        for origin in origins.into_iter().take(MAX_ORIGINS_PER_CALL) {
            let Ok(url) = Url::parse(&origin) else {
                continue;
            };
            if !self.config.allow_private_networks && super::check_literal_host(&url).is_err() {
                continue;
            }
            let host = format!(
                "{}:{}",
                url.host_str().unwrap_or_default(),
                url.port_or_known_default().unwrap_or(80)
            );
            if matches!(
                self.breaker_state(tenant_id, &host),
                BreakerState::Open { .. }
            ) {
                continue;
            }
            if self.warmed.claim(&origin, now) {
                todo.push(url);
            }
        }
        if todo.is_empty() {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            for url in todo {
                let started = Instant::now();
                let result = this
                    .client
                    .head(url.clone())
                    .timeout(WARM_TIMEOUT)
                    .send()
                    .await;
                let host = url.host_str().unwrap_or_default();
                match result {
                    Ok(r) => {
                        tracing::debug!(name: "upstream_warmed", host = %host, status = r.status().as_u16(), elapsed_ms = started.elapsed().as_secs_f64() * 1000.0, "upstream_warmed");
                        metrics::counter!("switchboard_upstreams_warmed_total").increment(1);
                    }
                    Err(e) => {
                        // The tool's own call will meet (and report) the same problem.
                        tracing::debug!(name: "upstream_warm_failed", host = %host, connect = e.is_connect(), timeout = e.is_timeout(), "upstream_warm_failed");
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_warmed_once_per_period_and_the_memory_is_bounded() {
        let w = Warmed::default();
        let t0 = Instant::now();
        assert!(w.claim("https://a.example", t0));
        assert!(!w.claim("https://a.example", t0 + Duration::from_secs(1)));
        assert!(w.claim("https://a.example", t0 + REWARM_AFTER));
        for i in 0..MAX_REMEMBERED {
            w.claim(&format!("https://h{i}.example"), t0 + REWARM_AFTER);
        }
        assert!(!w.claim("https://new.example", t0 + REWARM_AFTER));
        // Once the remembered ones are old, they make room.
        assert!(w.claim("https://new.example", t0 + REWARM_AFTER * 3));
        assert!(w.0.lock().unwrap().len() <= MAX_REMEMBERED);
    }
}
