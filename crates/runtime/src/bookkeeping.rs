//! What a call session remembers between function calls, each part bounded however long the
//! call: its newest invocation records (and the function call ids they answer), the state of
//! recent model responses, and the answers of recent write calls kept for deduplication.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::invocation::InvocationRecord;

/// The newest invocation records of a call, and the function call ids they answer.
pub(crate) struct RecentRecords {
    records: VecDeque<InvocationRecord>,
    ids: HashSet<String>,
    max: usize,
    /// Older records were dropped, or not loaded: an id not here may still be in the journal.
    forgotten: bool,
}

impl RecentRecords {
    /// Starts from the records a journal gave back (the newest `max` of them are kept). A full
    /// load may have left older ones in the journal.
    pub(crate) fn new(records: Vec<InvocationRecord>, max: usize) -> Self {
        let max = max.max(1);
        let mut recent = RecentRecords {
            records: VecDeque::with_capacity(records.len().min(max)),
            ids: HashSet::new(),
            max,
            forgotten: records.len() >= max,
        };
        for r in records {
            recent.push(r);
        }
        recent
    }

    pub(crate) fn push(&mut self, record: InvocationRecord) {
        while self.records.len() >= self.max {
            if let Some(old) = self.records.pop_front() {
                self.ids.remove(&old.function_call_id);
                self.forgotten = true;
            }
        }
        self.ids.insert(record.function_call_id.clone());
        self.records.push_back(record);
    }

    pub(crate) fn contains(&self, function_call_id: &str) -> bool {
        self.ids.contains(function_call_id)
    }

    pub(crate) fn find(&self, function_call_id: &str) -> Option<&InvocationRecord> {
        if !self.contains(function_call_id) {
            return None;
        }
        self.records
            .iter()
            .rev()
            .find(|r| r.function_call_id == function_call_id)
    }

    /// Whether records were dropped (or never loaded): the journal must be asked about ids
    /// not found here.
    pub(crate) fn forgotten(&self) -> bool {
        self.forgotten
    }

    pub(crate) fn to_vec(&self) -> Vec<InvocationRecord> {
        self.records.iter().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

/// One model response as the session knows it.
#[derive(Default)]
pub(crate) struct ResponseState {
    pub(crate) cancelled: bool,
    pub(crate) done: bool,
    pub(crate) held: Vec<oneshot::Sender<bool>>,
}

/// The state of model responses, by id. A response that is done or cancelled is remembered
/// among the newest `max_finished` finished ones (so a late tool of it still sees how it
/// ended), and longer while a tool of it is still running or a terminal effect waits on it.
pub(crate) struct Responses {
    states: HashMap<String, ResponseState>,
    finished: VecDeque<String>,
    max_finished: usize,
}

impl Responses {
    pub(crate) fn new(max_finished: usize) -> Self {
        Responses {
            states: HashMap::new(),
            finished: VecDeque::new(),
            max_finished: max_finished.max(1),
        }
    }

    pub(crate) fn get(&self, response_id: &str) -> Option<&ResponseState> {
        self.states.get(response_id)
    }

    pub(crate) fn entry(&mut self, response_id: &str) -> &mut ResponseState {
        self.states.entry(response_id.to_owned()).or_default()
    }

    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = &mut ResponseState> {
        self.states.values_mut()
    }

    /// Marks a response as having ended (done or cancelled), then forgets the oldest ended
    /// responses past the bound that nothing uses any more (`in_use`: a tool of it is running).
    pub(crate) fn ended(&mut self, response_id: &str, in_use: impl Fn(&str) -> bool) {
        self.entry(response_id);
        if !self.finished.iter().any(|id| id == response_id) {
            self.finished.push_back(response_id.to_owned());
        }
        let mut kept = VecDeque::new();
        while self.finished.len() + kept.len() > self.max_finished {
            let Some(id) = self.finished.pop_front() else {
                break;
            };
            let busy = in_use(&id) || self.states.get(&id).is_some_and(|s| !s.held.is_empty());
            if busy {
                kept.push_back(id);
            } else {
                self.states.remove(&id);
            }
        }
        // Still used: they stay, the oldest first, and are looked at again next time.
        while let Some(id) = kept.pop_back() {
            self.finished.push_front(id);
        }
    }

    /// Responses remembered now.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }
}

/// A successful write's answer, kept for its dedupe window.
pub(crate) struct Answered {
    pub(crate) function_call_id: String,
    pub(crate) output: String,
    pub(crate) expires: Instant,
}

/// The SHA-256 of a write call's dedupe key (agent, tool, canonical arguments): the key itself
/// may be as long as the arguments.
pub(crate) type DedupeKey = [u8; 32];

pub(crate) fn dedupe_digest(key: &str) -> DedupeKey {
    Sha256::digest(key.as_bytes()).into()
}

/// Answers of recent successful writes by dedupe key, until their window passes; at most
/// `max` (the ones closest to expiring go first).
pub(crate) struct DedupeAnswers {
    answers: HashMap<DedupeKey, Answered>,
    max: usize,
}

impl DedupeAnswers {
    pub(crate) fn new(max: usize) -> Self {
        DedupeAnswers {
            answers: HashMap::new(),
            max: max.max(1),
        }
    }

    pub(crate) fn get(&self, key: &DedupeKey) -> Option<&Answered> {
        self.answers.get(key).filter(|a| a.expires > Instant::now())
    }

    pub(crate) fn insert(&mut self, key: DedupeKey, answered: Answered) {
        let now = Instant::now();
        self.answers.retain(|_, a| a.expires > now);
        while self.answers.len() >= self.max {
            let Some(first) = self
                .answers
                .iter()
                .min_by_key(|(_, a)| a.expires)
                .map(|(k, _)| *k)
            else {
                break;
            };
            self.answers.remove(&first);
        }
        self.answers.insert(key, answered);
    }

    pub(crate) fn len(&self) -> usize {
        self.answers.len()
    }
}
