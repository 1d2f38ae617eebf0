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
    pub handoffs: u32,
    pub ended: bool,
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
                self.checkpoints.insert(function_call_id, *checkpoint);
            }
            JournalEntry::Finished {
                record,
                context,
                handoffs,
            } => {
                self.checkpoints.remove(&record.function_call_id);
                if let Some(c) = context {
                    self.context = Some(c);
                }
                self.handoffs = handoffs;
                self.records.push(*record);
            }
            JournalEntry::Ended => {
                self.ended = true;
                self.checkpoints.clear();
            }
        }
    }
}

/// Why the journal could not record or load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("call journal: {0}")]
pub struct JournalError(pub String);

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
}
