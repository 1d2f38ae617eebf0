//! The open connections of one listener, within its cap.
//!
//! At the cap, a new connection takes the place of the one that has had no request in flight
//! the longest (an idle keep-alive connection, or one still sending its head): that one is
//! closed, losing nothing in flight. Slow clients therefore cannot keep a working client out,
//! however many they open. Only when every connection has a request in flight is the new one
//! refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::activity::Activity;

/// One listener's open connections.
#[derive(Debug)]
pub(crate) struct Roster {
    max: usize,
    /// The listener's name, for metrics.
    name: &'static str,
    base: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Entry>>,
}

#[derive(Debug)]
struct Entry {
    activity: Arc<Activity>,
    /// Cancelled when the connection must make room for a new one.
    evict: CancellationToken,
}

/// A connection's place in the roster, given up when the connection's task ends.
#[derive(Debug)]
pub(crate) struct Seat {
    roster: Arc<Roster>,
    id: u64,
    pub(crate) activity: Arc<Activity>,
    /// Cancelled when another connection took this one's place.
    pub(crate) evicted: CancellationToken,
}

impl Roster {
    pub(crate) fn new(max: usize, name: &'static str) -> Arc<Self> {
        Arc::new(Roster {
            max: max.max(1),
            name,
            base: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a connection accepted now, made by evicting the connection quiet the
    /// longest when the roster is full; `None` when every connection has a request in flight.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Seat> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.len() >= self.max {
            let quietest = open
                .iter()
                .filter(|(_, e)| e.activity.is_quiet())
                .min_by_key(|(_, e)| e.activity.quiet_since())
                .map(|(id, _)| *id)?;
            if let Some(evicted) = open.remove(&quietest) {
                evicted.evict.cancel();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(self.base));
        let evict = CancellationToken::new();
        open.insert(
            id,
            Entry {
                activity: Arc::clone(&activity),
                evict: evict.clone(),
            },
        );
        self.gauge(open.len());
        Some(Seat {
            roster: Arc::clone(self),
            id,
            activity,
            evicted: evict,
        })
    }

    fn gauge(&self, open: usize) {
        metrics::gauge!("switchboard_connections_open", "listener" => self.name).set(open as f64);
    }
}

impl Seat {
    /// The listener's name, for metrics and logs.
    pub(crate) fn listener(&self) -> &'static str {
        self.roster.name
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self
            .roster
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // An evicted connection's place was already given to another.
        if open.remove(&self.id).is_some() {
            self.roster.gauge(open.len());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::http::Version;

    use super::super::activity::InFlight;
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_quiet_longest_makes_room_and_busy_ones_never_do() {
        let roster = Roster::new(2, "test");
        let first = roster.admit().unwrap();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let second = roster.admit().unwrap();
        // Full: the first (quiet since its accept, the earlier) gives its place.
        let third = roster.admit().unwrap();
        assert!(first.evicted.is_cancelled());
        assert!(!second.evicted.is_cancelled());
        // Its task ending does not free the place the third one took.
        drop(first);
        assert_eq!(roster.open.lock().unwrap().len(), 2);
        // Both busy: a new one is refused, and nothing is evicted.
        let _busy = (
            InFlight::begin(&second.activity, Version::HTTP_11),
            InFlight::begin(&third.activity, Version::HTTP_11),
        );
        assert!(roster.admit().is_none());
        assert!(!second.evicted.is_cancelled() && !third.evicted.is_cancelled());
        // A connection that closes makes room at once.
        drop(second);
        assert!(roster.admit().is_some());
    }
}
