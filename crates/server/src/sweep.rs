//! The sweep's pass: every orphaned phone call found is taken over in the same pass, several at
//! once, not a batch per sweep.
//!
//! A node's sweep (`ownership::start`) runs every quarter lease (at most every 2 s). Taking one
//! batch of orphans per sweep, one after another, a dead node's 1,000 Realtime calls waited up
//! to 62 s to be taken over with the default 10 s lease, and 10,000 calls ten minutes, while
//! their callers heard silence. A pass now asks for orphans again as long as a batch came back
//! full, and takes each batch over [`CALL_SETUPS_AT_ONCE`] calls at a time, each in a place of
//! the node's call set-ups, so takeovers and new calls' set-ups share one bound. Orphans come
//! in a fixed order, so those whose takeover failed in this pass are the first still there: the
//! next batch skips them. Calls that cannot be taken over (a tenant without its OpenAI key)
//! used to come back first in every batch, and 32 of them hid every other orphan for good. The
//! next sweep tries them again; a pass always ends.
//!
//! [`CALL_SETUPS_AT_ONCE`]: crate::state::CALL_SETUPS_AT_ONCE

use std::collections::HashSet;
use std::future::Future;

use futures_util::StreamExt;

/// Orphans asked for at a time, per door.
pub(crate) const BATCH: u32 = 32;

/// An orphaned call: (tenant, call id).
pub(crate) type Orphan = (String, String);

/// One pass: `find(skip)` the orphans in their order, past the first `skip` (at most
/// [`BATCH`]; `None` when the database did not answer), `take` each over (`at_once` at a time;
/// `false` when it failed, so the call is still an orphan), and again while a batch came back
/// full and held a call not tried in this pass. How many calls were tried.
pub(crate) async fn pass<F, FF, T, TF>(find: F, take: T, at_once: usize) -> usize
where
    F: Fn(usize) -> FF,
    FF: Future<Output = Option<Vec<Orphan>>>,
    T: Fn(Orphan) -> TF,
    TF: Future<Output = bool>,
{
    let mut tried: HashSet<Orphan> = HashSet::new();
    let mut failed = 0;
    loop {
        let Some(found) = find(failed).await else {
            return tried.len();
        };
        let full = found.len() >= BATCH as usize;
        let new: Vec<Orphan> = found
            .into_iter()
            .filter(|o| tried.insert(o.clone()))
            .collect();
        if new.is_empty() {
            return tried.len();
        }
        failed += futures_util::stream::iter(new)
            .map(&take)
            .buffer_unordered(at_once.max(1))
            .filter(|taken| std::future::ready(!taken))
            .count()
            .await;
        if !full {
            return tried.len();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Orphans as a database would return them: in their order, past `skip`, at most
    /// [`BATCH`] of those not taken.
    struct Orphans {
        left: Mutex<Vec<Orphan>>,
        /// Calls whose takeover fails: they stay orphaned.
        failing: HashSet<Orphan>,
        running: AtomicUsize,
        most_at_once: AtomicUsize,
    }

    impl Orphans {
        fn new(n: usize, failing: usize) -> Orphans {
            let all: Vec<Orphan> = (0..n)
                .map(|i| ("acme".to_owned(), format!("rtc_{i:05}")))
                .collect();
            Orphans {
                failing: all[..failing].iter().cloned().collect(),
                left: Mutex::new(all),
                running: AtomicUsize::new(0),
                most_at_once: AtomicUsize::new(0),
            }
        }

        async fn find(&self, skip: usize) -> Option<Vec<Orphan>> {
            let left = self.left.lock().unwrap();
            Some(
                left.iter()
                    .skip(skip)
                    .take(BATCH as usize)
                    .cloned()
                    .collect(),
            )
        }

        async fn take(&self, o: Orphan) -> bool {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await;
            let taken = !self.failing.contains(&o);
            if taken {
                self.left.lock().unwrap().retain(|l| *l != o);
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            taken
        }
    }

    /// A dead node's 1,000 calls are all taken over in one pass, 32 at a time at most; one
    /// batch a sweep took 32.
    #[tokio::test]
    async fn one_pass_takes_over_every_orphan_a_bounded_number_at_a_time() {
        let o = Orphans::new(1000, 0);
        let tried = pass(|skip| o.find(skip), |c| o.take(c), 32).await;
        assert_eq!(tried, 1000);
        assert!(o.left.lock().unwrap().is_empty());
        let most = o.most_at_once.load(Ordering::SeqCst);
        assert!(most > 1 && most <= 32, "{most} at once");
    }

    /// Calls whose takeover fails (more than a batch of them, first in the orphans' order) are
    /// tried once each and skipped after: every other orphan is still taken over in the pass.
    #[tokio::test]
    async fn failing_takeovers_hide_no_other_orphan() {
        let o = Orphans::new(100, 40);
        let tried = pass(|skip| o.find(skip), |c| o.take(c), 8).await;
        assert_eq!(tried, 100, "each call tried once");
        let left = o.left.lock().unwrap().clone();
        assert_eq!(left.len(), 40, "only the failing are left");
        assert!(left.iter().all(|l| o.failing.contains(l)));
    }

    /// A database that does not answer ends the pass.
    #[tokio::test]
    async fn a_pass_without_an_answer_takes_nothing() {
        let taken = AtomicUsize::new(0);
        let tried = pass(
            |_| async { None },
            |_| async {
                taken.fetch_add(1, Ordering::SeqCst);
                true
            },
            8,
        )
        .await;
        assert_eq!(tried, 0);
        assert_eq!(taken.load(Ordering::SeqCst), 0);
    }
}
