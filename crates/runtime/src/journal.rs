//! The call journal: what a call records so another process can pick it up after a crash.
//!
//! A session records the context after each commit (with the invocation's record), and each
//! suspended run at each effect boundary (a checkpoint: the run and the effect it waits for).
//! [`CallSession::restore`](crate::CallSession::restore) rebuilds the call from the folded
//! entries and resumes every checkpointed run by performing its effect again, with the same
//! idempotency key, so a receiver that honours the key sees it once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::{CallInfo, Context, EffectRequest};

use crate::BoxFuture;
use crate::invocation::{Invocation, InvocationRecord};

/// A run stopped at an effect: enough to perform the effect and continue the run elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub invocation: Invocation,
    pub request: EffectRequest,
    /// The serialised `Suspended` run (it carries its tool's definition).
    pub suspended: Value,
}

/// One thing a call records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum JournalEntry {
    Started {
        call: CallInfo,
        context: Context,
    },
    Checkpoint {
        function_call_id: String,
        checkpoint: Box<Checkpoint>,
    },
    /// An invocation ended; `context` is present when it changed the call's context.
    Finished {
        record: Box<InvocationRecord>,
        context: Option<Context>,
        handoffs: u32,
    },
    Ended,
}

/// A call as its journal entries leave it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallState {
    pub call: Option<CallInfo>,
    pub context: Option<Context>,
    pub records: Vec<InvocationRecord>,
    /// Runs waiting at an effect, by function call id.
    pub checkpoints: BTreeMap<String, Checkpoint>,
    /// Function calls claimed to run that have neither a record nor a checkpoint: their run
    /// stopped before its first effect (the node died), so it starts again from the beginning.
    #[serde(default)]
    pub claimed: BTreeMap<String, Invocation>,
    pub handoffs: u32,
    pub ended: bool,
    /// How long ago the newest record was stored, by the journal's own clock (a database's,
    /// which every node shares), when the journal can say.
    #[serde(skip)]
    pub newest_record_age: Option<std::time::Duration>,
}

impl CallState {
    /// Folds one entry into the state.
    pub fn apply(&mut self, entry: JournalEntry) {
        match entry {
            JournalEntry::Started { call, context } => {
                self.call = Some(call);
                self.context = Some(context);
            }
            JournalEntry::Checkpoint {
                function_call_id,
                checkpoint,
            } => {
                self.claimed.remove(&function_call_id);
                self.checkpoints.insert(function_call_id, *checkpoint);
            }
            JournalEntry::Finished {
                record,
                context,
                handoffs,
            } => {
                self.checkpoints.remove(&record.function_call_id);
                self.claimed.remove(&record.function_call_id);
                if let Some(c) = context {
                    self.context = Some(c);
                }
                self.handoffs = handoffs;
                self.records.push(*record);
            }
            JournalEntry::Ended => {
                self.ended = true;
                self.checkpoints.clear();
                self.claimed.clear();
            }
        }
    }
}

/// Why the journal could not record or load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// The journal failed (a database that did not answer, a row that could not be read).
    #[error("call journal: {0}")]
    Failed(String),
    /// Another node owns the call now (its lease moved on): this session may write nothing
    /// more for it, and its runs' answers are the new owner's to give.
    #[error("call journal: this node no longer owns the call: {0}")]
    Fenced(String),
    /// The journal did not answer in time (a database cut off, not refusing): the write was
    /// given up on and may still land, so whether it was stored is not known.
    #[error("call journal: {0}")]
    Unanswered(String),
}

impl JournalError {
    /// A failure of the journal.
    pub fn failed(message: impl Into<String>) -> Self {
        JournalError::Failed(message.into())
    }

    /// Whether the call has moved to another owner (retrying cannot help).
    pub fn is_fenced(&self) -> bool {
        matches!(self, JournalError::Fenced(_))
    }

    /// Whether the write may still land although it was given up on.
    pub fn is_unanswered(&self) -> bool {
        matches!(self, JournalError::Unanswered(_))
    }
}

/// Whether a function call may run here: claimed before its run starts, so that no two nodes
/// ever run one function call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Claimed now: run it.
    Claimed,
    /// Claimed before (running, or answered): do not run it again.
    Taken,
}

/// Durable storage of call journals (the store crate provides the database one).
pub trait CallJournal: Send + Sync {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>>;
    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>>;

    /// [`CallJournal::load`] keeping only the newest `max_records` records: a session holds no
    /// more (a journal that can should not read the rest at all).
    fn load_recent<'a>(
        &'a self,
        call_id: &'a str,
        max_records: usize,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        Box::pin(async move {
            let mut state = self.load(call_id).await?;
            if let Some(s) = &mut state {
                let extra = s.records.len().saturating_sub(max_records);
                s.records.drain(..extra);
            }
            Ok(state)
        })
    }

    /// Claims a function call before it runs (see [`Claim`]). The claim keeps the invocation,
    /// so a node that takes the call over runs it if it never reached its first effect. A
    /// journal that one process alone uses has nothing to guard against.
    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        let _ = (call_id, invocation);
        Box::pin(async { Ok(Claim::Claimed) })
    }

    /// Keeps an entry this journal could not store in time, to store it after the call's
    /// earlier ones as soon as it can (see [`crate::outbox`]); every later write of the call
    /// waits behind it. `Err` when it can keep no more, or keeps none (the default: a journal
    /// without an outbox in front).
    fn defer(&self, call_id: &str, entry: JournalEntry) -> Result<(), JournalError> {
        let _ = (call_id, entry);
        Err(JournalError::failed(
            "this journal keeps no entries to store later",
        ))
    }

    /// The record of one function call of the call, if it has one: how a session that no
    /// longer holds an old record knows the call was answered.
    fn recorded<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<InvocationRecord>, JournalError>> {
        Box::pin(async move {
            Ok(self.load(call_id).await?.and_then(|s| {
                s.records
                    .into_iter()
                    .find(|r| r.function_call_id == function_call_id)
            }))
        })
    }
}

/// A journal in memory: for tests, the CLI and single-process deployments without a database.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    calls: Mutex<HashMap<String, CallState>>,
}

impl CallJournal for MemoryJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.entry(call_id.to_owned()).or_default().apply(entry);
        Box::pin(async { Ok(()) })
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        let state = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(call_id)
            .cloned();
        Box::pin(async { Ok(state) })
    }

    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let fc = &invocation.function_call_id;
        let result = match calls.get_mut(call_id) {
            Some(s) if s.ended => Err(JournalError::failed(format!("call `{call_id}` has ended"))),
            Some(s) => {
                if s.claimed.contains_key(fc)
                    || s.checkpoints.contains_key(fc)
                    || s.records.iter().any(|r| &r.function_call_id == fc)
                {
                    Ok(Claim::Taken)
                } else {
                    s.claimed.insert(fc.clone(), invocation.clone());
                    Ok(Claim::Claimed)
                }
            }
            None => Err(JournalError::failed(format!(
                "call `{call_id}` is not in the journal"
            ))),
        };
        Box::pin(async { result })
    }

    fn recorded<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<InvocationRecord>, JournalError>> {
        let found = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(call_id)
            .and_then(|s| {
                s.records
                    .iter()
                    .find(|r| r.function_call_id == function_call_id)
                    .cloned()
            });
        Box::pin(async { Ok(found) })
    }
}
