//! What the simulated GPT-Live API remembers per session, behind one briefly held lock.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::{RestRequest, Violation};

/// The backend input budget per session: 128 items or 32,768 UTF-8 bytes (observed).
pub(crate) const INPUT_BUDGET_BYTES: usize = 32 * 1024;
pub(crate) const INPUT_BUDGET_ITEMS: usize = 128;

/// How many client events a session keeps for inspection.
pub(crate) const MAX_EVENTS: usize = 10_000;

/// A request to a sideband task from outside it.
#[derive(Debug)]
pub(crate) enum Outbound {
    Text(String),
    /// `session.closed` was sent: close normally.
    Close,
    /// Drop without a close frame (a network failure), then acknowledge.
    Drop(oneshot::Sender<()>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Incoming,
    Accepted,
    Rejected,
    Ended,
}

/// One backend turn the test started: its function calls and what the client did about them.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    pub(crate) delegation_id: String,
    pub(crate) calls: Vec<String>,
    pub(crate) answered: HashMap<String, String>,
    /// Calls whose output was refused for the input budget (still pending).
    pub(crate) refused: Vec<String>,
    pub(crate) continued: bool,
}

#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) status: Status,
    /// The accepted `session`, with delegation updates applied.
    pub(crate) config: Option<Value>,
    pub(crate) turns: Vec<Turn>,
    pub(crate) input_bytes: usize,
    pub(crate) input_items: usize,
    pub(crate) outputs: Vec<(String, String)>,
    pub(crate) response_creates: usize,
    pub(crate) commentary: Vec<String>,
    pub(crate) session_updates: Vec<Value>,
    /// Every client event received on the sideband, in order (the last [`MAX_EVENTS`]).
    pub(crate) client_events: VecDeque<Value>,
    /// The sideband now open, if any: where the test's events go.
    pub(crate) outbound: Option<mpsc::UnboundedSender<Outbound>>,
    /// Attachments not yet handed to the test, as their client-event receivers.
    pub(crate) pending: VecDeque<(
        mpsc::UnboundedSender<Outbound>,
        mpsc::UnboundedReceiver<Value>,
    )>,
    pub(crate) attachments: usize,
}

impl Session {
    fn new() -> Session {
        Session {
            status: Status::Incoming,
            config: None,
            turns: Vec::new(),
            input_bytes: 0,
            input_items: 0,
            outputs: Vec::new(),
            response_creates: 0,
            commentary: Vec::new(),
            session_updates: Vec::new(),
            client_events: VecDeque::new(),
            outbound: None,
            pending: VecDeque::new(),
            attachments: 0,
        }
    }

    /// The delegation type of the accepted session (`client` when none was given).
    pub(crate) fn delegation_type(&self) -> &str {
        self.config
            .as_ref()
            .and_then(|c| c.pointer("/delegation/type"))
            .and_then(Value::as_str)
            .unwrap_or("client")
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) api_key: String,
    pub(crate) sessions: HashMap<String, Session>,
    pub(crate) requests: Vec<RestRequest>,
    pub(crate) violations: Vec<Violation>,
    pub(crate) budget_bytes: usize,
    /// Statuses to answer instead of serving, per action, consumed front first.
    pub(crate) failures: HashMap<String, VecDeque<u16>>,
    /// Delays before answering, per action, consumed front first.
    pub(crate) stalls: HashMap<String, VecDeque<Duration>>,
}

impl State {
    pub(crate) fn session_mut(&mut self, id: &str) -> &mut Session {
        self.sessions
            .entry(id.to_owned())
            .or_insert_with(Session::new)
    }

    pub(crate) fn violation(&mut self, session_id: &str, message: String, event: &Value) {
        self.violations.push(Violation {
            call_id: session_id.to_owned(),
            message,
            event: event.clone(),
        });
    }
}

/// What the server, the sideband tasks and the handles share.
#[derive(Debug)]
pub(crate) struct LiveShared {
    state: Mutex<State>,
    changed: Notify,
    ids: AtomicU64,
    shutdown: watch::Sender<bool>,
}

impl LiveShared {
    pub(crate) fn new() -> LiveShared {
        LiveShared {
            state: Mutex::new(State {
                api_key: "sk-test".to_owned(),
                sessions: HashMap::new(),
                requests: Vec::new(),
                violations: Vec::new(),
                budget_bytes: INPUT_BUDGET_BYTES,
                failures: HashMap::new(),
                stalls: HashMap::new(),
            }),
            changed: Notify::new(),
            ids: AtomicU64::new(0),
            shutdown: watch::Sender::new(false),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every waiter: something changed.
    pub(crate) fn touch(&self) {
        self.changed.notify_waiters();
    }

    /// A fresh id with `prefix` (`event`, `fc`, `call`, `resp`, `deleg`).
    pub(crate) fn id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.ids.fetch_add(1, Ordering::Relaxed) + 1)
    }

    pub(crate) fn stop(&self) {
        self.shutdown.send_replace(true);
        self.touch();
    }

    pub(crate) async fn stopped(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Waits up to `timeout` for `check` to give something.
    pub(crate) async fn wait_for<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&mut State) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(found) = check(&mut self.lock()) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}
