//! Finished runs the database did not take in time: kept on this node, in each call's order,
//! and stored as soon as the database answers again.
//!
//! A run that reached an effect has changed the world (an order placed, an email sent) before
//! its commit. When the commit cannot be stored within the session's retry — a PostgreSQL
//! failover takes 20–60 s — answering "nothing was changed" would be false, and the model's
//! natural retry (a new function call id, the same arguments) would do it all again. Instead
//! the session hands the journal entry to the [`Outbox`], treats the commit as made (its
//! context and dedupe answers move on, so an identical write joins the first one), and answers
//! the run's real result. The outbox stores the call's entries in their order, each fenced
//! like any journal write, as soon as the database answers; every later write of the call
//! passes them first ([`OutboxJournal`]), so the database never sees a call's entries out of
//! order. A node that dies holding entries is like one killed mid-effect: the claims and
//! checkpoints of those runs are in the database, so the node that takes the call over
//! resumes them under the same idempotency keys.
//!
//! Bounded per node ([`OutboxLimits`]); a run past the bound is still answered with its real
//! result, its record is dropped (counted and logged), and the call's next stored commit
//! carries its changes.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::BoxFuture;
use crate::invocation::{Invocation, InvocationRecord};
use crate::journal::{CallJournal, CallState, Claim, JournalEntry, JournalError};

/// How much one node keeps of entries waiting to be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// Entries kept at once, over all calls. Default 10,000.
    pub max_entries: usize,
    /// Their estimated bytes (as JSON). Default 64 MiB.
    pub max_bytes: usize,
}

impl Default for OutboxLimits {
    fn default() -> Self {
        OutboxLimits {
            max_entries: 10_000,
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// How long one stored entry may take before the flush stops and tries again later.
const ATTEMPT: Duration = Duration::from_secs(5);
/// The flusher's pause between rounds: the first, and the longest while the database stays away.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// A call: tenant and call id.
type CallKey = (String, String);

/// The entries waiting for one call, and the journal that stores them.
struct Backlog {
    journal: Arc<dyn CallJournal>,
    entries: Mutex<VecDeque<Held>>,
    /// One flush of the call at a time (the session's own writes and the flusher).
    turn: tokio::sync::Mutex<()>,
}

struct Held {
    entry: JournalEntry,
    bytes: usize,
}

#[derive(Default)]
struct Totals {
    entries: usize,
    bytes: usize,
}

/// This node's entries waiting to be stored (see the module docs). Cheap to share.
pub struct Outbox {
    calls: Mutex<HashMap<CallKey, Arc<Backlog>>>,
    totals: Mutex<Totals>,
    limits: OutboxLimits,
    flushing: AtomicBool,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("held", &self.held())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    pub fn new(limits: OutboxLimits) -> Arc<Outbox> {
        Arc::new(Outbox {
            calls: Mutex::new(HashMap::new()),
            totals: Mutex::new(Totals::default()),
            limits,
            flushing: AtomicBool::new(false),
        })
    }

    /// `inner` (one tenant's journal, fenced as its session's is) with this outbox in front.
    pub fn journal(self: &Arc<Self>, tenant: &str, inner: Arc<dyn CallJournal>) -> OutboxJournal {
        OutboxJournal {
            outbox: Arc::clone(self),
            tenant: tenant.to_owned(),
            inner,
        }
    }

    /// Entries waiting now, over all calls.
    pub fn held(&self) -> usize {
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
    }

    fn backlog(&self, key: &CallKey) -> Option<Arc<Backlog>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Keeps `entry` after the call's other waiting entries; refused past the limits.
    fn keep(
        self: &Arc<Self>,
        key: CallKey,
        journal: &Arc<dyn CallJournal>,
        entry: JournalEntry,
    ) -> Result<(), JournalError> {
        let bytes = serde_json::to_vec(&entry).map_or(0, |v| v.len());
        {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            if totals.entries >= self.limits.max_entries
                || totals.bytes.saturating_add(bytes) > self.limits.max_bytes
            {
                metrics::counter!("switchboard_unsaved_outcomes_dropped_total", "reason" => "full")
                    .increment(1);
                return Err(JournalError::failed(format!(
                    "this node already keeps {} results waiting for the database ({} bytes; at most {} results, {} bytes)",
                    totals.entries, totals.bytes, self.limits.max_entries, self.limits.max_bytes
                )));
            }
            totals.entries += 1;
            totals.bytes += bytes;
        }
        {
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            let backlog = calls.entry(key).or_insert_with(|| {
                Arc::new(Backlog {
                    journal: Arc::clone(journal),
                    entries: Mutex::new(VecDeque::new()),
                    turn: tokio::sync::Mutex::new(()),
                })
            });
            backlog
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(Held { entry, bytes });
        }
        metrics::counter!("switchboard_unsaved_outcomes_kept_total").increment(1);
        self.publish();
        self.start_flusher();
        Ok(())
    }

    /// Stores the call's waiting entries, in order; `Ok` once none waits. A fenced entry means
    /// another node owns the call: the rest are dropped (that node resumes their runs).
    async fn drain(&self, key: &CallKey) -> Result<(), JournalError> {
        let Some(backlog) = self.backlog(key) else {
            return Ok(());
        };
        let _turn = backlog.turn.lock().await;
        loop {
            let front = backlog
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .front()
                .map(|h| h.entry.clone());
            let Some(entry) = front else {
                break;
            };
            let stored =
                match tokio::time::timeout(ATTEMPT, backlog.journal.append(&key.1, entry)).await {
                    Ok(stored) => stored,
                    Err(_) => Err(JournalError::failed(format!(
                        "the database did not answer within {} s",
                        ATTEMPT.as_secs()
                    ))),
                };
            match stored {
                Ok(()) => {
                    self.forget(&backlog, 1);
                    metrics::counter!("switchboard_unsaved_outcomes_stored_total").increment(1);
                }
                Err(e) if e.is_fenced() => {
                    let dropped = backlog
                        .entries
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .len();
                    self.forget(&backlog, dropped);
                    metrics::counter!("switchboard_unsaved_outcomes_dropped_total", "reason" => "fenced")
                        .increment(u64::try_from(dropped).unwrap_or(u64::MAX));
                    tracing::warn!(name: "unsaved_outcomes_fenced", call_id = %key.1, dropped, error = %e, "unsaved_outcomes_fenced");
                    self.remove_if_empty(key);
                    return Err(e);
                }
                Err(e) => {
                    let waiting = backlog
                        .entries
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .len();
                    return Err(JournalError::failed(format!(
                        "{waiting} earlier results of this call are still waiting to be stored: {e}"
                    )));
                }
            }
        }
        self.remove_if_empty(key);
        Ok(())
    }

    /// Drops the first `n` entries of a backlog from it and from the totals.
    fn forget(&self, backlog: &Backlog, n: usize) {
        let mut entries = backlog
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (mut count, mut bytes) = (0, 0);
        let n = n.min(entries.len());
        for held in entries.drain(..n) {
            count += 1;
            bytes += held.bytes;
        }
        drop(entries);
        {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            totals.entries = totals.entries.saturating_sub(count);
            totals.bytes = totals.bytes.saturating_sub(bytes);
        }
        self.publish();
    }

    fn remove_if_empty(&self, key: &CallKey) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let empty = calls.get(key).is_some_and(|b| {
            b.entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        });
        if empty {
            calls.remove(key);
        }
    }

    fn publish(&self) {
        let held = self.held();
        metrics::gauge!("switchboard_unsaved_outcomes").set(held as f64);
    }

    /// The record of a function call that waits here, if one does.
    fn waiting_record(&self, key: &CallKey, function_call_id: &str) -> Option<InvocationRecord> {
        let backlog = self.backlog(key)?;
        let entries = backlog
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        entries.iter().find_map(|h| match &h.entry {
            JournalEntry::Finished { record, .. }
                if record.function_call_id == function_call_id =>
            {
                Some((**record).clone())
            }
            _ => None,
        })
    }

    /// Starts the task that stores what waits, unless it runs; it stops once nothing waits.
    fn start_flusher(self: &Arc<Self>) {
        if self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let outbox = Arc::clone(self);
        tokio::spawn(async move {
            let mut pause = FIRST_PAUSE;
            loop {
                tokio::time::sleep(pause).await;
                let keys: Vec<CallKey> = outbox
                    .calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .keys()
                    .cloned()
                    .collect();
                let mut failed = false;
                for key in &keys {
                    if let Err(e) = outbox.drain(key).await
                        && !e.is_fenced()
                    {
                        failed = true;
                        tracing::debug!(name: "unsaved_outcomes_waiting", call_id = %key.1, error = %e, "unsaved_outcomes_waiting");
                    }
                }
                pause = if failed {
                    (pause * 2).min(LONGEST_PAUSE)
                } else {
                    FIRST_PAUSE
                };
                if outbox.held() == 0 {
                    outbox.flushing.store(false, Ordering::Release);
                    // An entry kept between the count and the store above found the flag
                    // still set: take the work back.
                    if outbox.held() == 0 || outbox.flushing.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
            }
        });
    }
}

/// A call journal with the node's [`Outbox`] in front: a call's writes pass its waiting
/// entries first (and wait behind them while the database is away), and a session may hand
/// it an entry to keep ([`CallJournal::defer`]).
pub struct OutboxJournal {
    outbox: Arc<Outbox>,
    tenant: String,
    inner: Arc<dyn CallJournal>,
}

impl std::fmt::Debug for OutboxJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxJournal")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl OutboxJournal {
    fn key(&self, call_id: &str) -> CallKey {
        (self.tenant.clone(), call_id.to_owned())
    }
}

impl CallJournal for OutboxJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            self.outbox.drain(&self.key(call_id)).await?;
            self.inner.append(call_id, entry).await
        })
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        self.inner.load(call_id)
    }

    fn load_recent<'a>(
        &'a self,
        call_id: &'a str,
        max_records: usize,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        self.inner.load_recent(call_id, max_records)
    }

    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        Box::pin(async move {
            self.outbox.drain(&self.key(call_id)).await?;
            self.inner.claim(call_id, invocation).await
        })
    }

    fn recorded<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<InvocationRecord>, JournalError>> {
        Box::pin(async move {
            if let Some(r) = self
                .outbox
                .waiting_record(&self.key(call_id), function_call_id)
            {
                return Ok(Some(r));
            }
            self.inner.recorded(call_id, function_call_id).await
        })
    }

    fn defer(&self, call_id: &str, entry: JournalEntry) -> Result<(), JournalError> {
        self.outbox.keep(self.key(call_id), &self.inner, entry)
    }
}
