//! How long a pooled session to an MCP server lives. Its streams to the server (a legacy
//! session's GET stream, a 2026-07-28 session's `subscriptions/listen`, a stdio server's
//! process) last as long as it, so each session is closed after the idle time without a request
//! through it, and retired at its longest life: the next request opens a new session, and the
//! old one closes when the requests still running on it are done (a session ends when its last
//! user lets it go).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::{Pooled, Session};

/// When the session of one pool entry was opened and last used.
#[derive(Debug)]
pub(super) struct Lifetime {
    base: Instant,
    /// Milliseconds since `base`.
    opened: AtomicU64,
    last_used: AtomicU64,
}

impl Lifetime {
    pub(super) fn new() -> Self {
        Lifetime {
            base: Instant::now(),
            opened: AtomicU64::new(0),
            last_used: AtomicU64::new(0),
        }
    }

    /// A session was opened now.
    pub(super) fn opened(&self) {
        let now = self.now();
        self.opened.store(now, Ordering::Release);
        self.last_used.store(now, Ordering::Release);
    }

    /// The session is used now.
    pub(super) fn used(&self) {
        self.last_used.store(self.now(), Ordering::Release);
    }

    /// When the session must go: the idle time after its last use, or its longest life after
    /// it was opened, whichever comes first.
    pub(super) fn due(&self, idle: Duration, max_age: Duration) -> Instant {
        let at =
            |millis: &AtomicU64| self.base + Duration::from_millis(millis.load(Ordering::Acquire));
        (at(&self.last_used) + idle).min(at(&self.opened) + max_age)
    }

    pub(super) fn expired(&self, idle: Duration, max_age: Duration) -> bool {
        self.due(idle, max_age) <= Instant::now()
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Takes `session` out of its pool entry when its lifetime ends (unless it is gone or replaced
/// by then). Holds neither: a session that ends otherwise ends the watch.
pub(super) fn watch(
    pooled: &Arc<Pooled>,
    session: &Arc<Session>,
    idle: Duration,
    max_age: Duration,
    label: String,
) {
    let (pooled, session): (Weak<Pooled>, Weak<Session>) =
        (Arc::downgrade(pooled), Arc::downgrade(session));
    tokio::spawn(async move {
        loop {
            let Some(due) = pooled.upgrade().map(|p| p.lifetime.due(idle, max_age)) else {
                return;
            };
            tokio::time::sleep_until(due).await;
            let (Some(entry), Some(current)) = (pooled.upgrade(), session.upgrade()) else {
                return;
            };
            if !entry.lifetime.expired(idle, max_age) {
                continue;
            }
            let mut slot = entry.session.lock().await;
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &current)) {
                *slot = None;
                tracing::info!(name: "mcp_session_retired", server = %label, "mcp_session_retired");
            }
            return;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_session_is_due_at_its_idle_time_or_its_longest_life() {
        let lifetime = Lifetime::new();
        let start = Instant::now();
        lifetime.opened();
        let (idle, max_age) = (Duration::from_secs(10), Duration::from_secs(25));
        assert_eq!(lifetime.due(idle, max_age), start + idle);
        tokio::time::advance(Duration::from_secs(8)).await;
        lifetime.used();
        assert_eq!(lifetime.due(idle, max_age), start + Duration::from_secs(18));
        assert!(!lifetime.expired(idle, max_age));
        tokio::time::advance(Duration::from_secs(9)).await;
        lifetime.used();
        // Used all along: its longest life still ends it.
        assert_eq!(lifetime.due(idle, max_age), start + max_age);
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(lifetime.expired(idle, max_age));
    }
}
