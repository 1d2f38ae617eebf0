//! What the simulated API remembers, shared by the HTTP handlers, the WebSocket tasks, the
//! [`Simulator`](crate::Simulator) and every [`ModelHandle`](crate::ModelHandle).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::{RestRequest, Violation};

/// A request to a connection task from outside it.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A serialized server event to write.
    Text(String),
    /// The call ended: close with a close frame.
    Close,
    /// Drop the socket without a close frame (a network failure), then acknowledge.
    Drop(oneshot::Sender<()>),
}

/// Everything the server, the connection tasks and the handles share.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    ids: Ids,
    /// Flips to `true` once; the server and every connection task watch it.
    shutdown: watch::Sender<bool>,
    /// Origin of `audio_start_ms`, so barge-ins carry plausible, increasing offsets.
    started: Instant,
}

/// Counters for the ids the simulated API hands out; atomics so making an id never takes a lock.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    event: AtomicU64,
    response: AtomicU64,
    item: AtomicU64,
    attachment: AtomicU64,
}

fn next(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::Relaxed) + 1
}

impl Ids {
    /// A server event id, `event_N`.
    pub(crate) fn event(&self) -> String {
        format!("event_{}", next(&self.event))
    }

    /// A response id, `resp_N`.
    pub(crate) fn response(&self) -> String {
        format!("resp_{}", next(&self.response))
    }

    /// A conversation item id with the given prefix (`fc`, `item`, `msg`).
    pub(crate) fn item(&self, prefix: &str) -> String {
        format!("{prefix}_{}", next(&self.item))
    }

    fn attachment(&self) -> u64 {
        next(&self.attachment)
    }
}

/// The mutable part, behind one briefly held lock.
#[derive(Debug)]
pub(crate) struct State {
    /// The key every request must present as `Authorization: Bearer <key>`.
    pub(crate) api_key: String,
    pub(crate) calls: HashMap<String, CallState>,
    pub(crate) requests: Vec<RestRequest>,
    pub(crate) violations: Vec<Violation>,
    /// Statuses to answer instead of serving, per action, consumed front first.
    pub(crate) failures: HashMap<String, VecDeque<u16>>,
    /// Delays before answering, per action, consumed front first (the request is recorded at
    /// once): a client that gives up sooner sees no answer.
    pub(crate) stalls: HashMap<String, VecDeque<std::time::Duration>>,
    /// One `Notify` per call id someone waits on, so a wake-up reaches only that call's waiters.
    waiters: HashMap<String, Arc<Notify>>,
}

impl State {
    /// Wakes whoever waits on something about `call_id`.
    pub(crate) fn wake(&self, call_id: &str) {
        if let Some(notify) = self.waiters.get(call_id) {
            notify.notify_waiters();
        }
    }

    /// Records a protocol violation by the client.
    pub(crate) fn violation(&mut self, call_id: &str, message: String, event: &Value) {
        self.violations.push(Violation {
            call_id: call_id.to_owned(),
            message,
            event: event.clone(),
        });
    }

    /// The call's state, created as an incoming call if unknown (handles only exist for known calls).
    pub(crate) fn call_mut(&mut self, call_id: &str) -> &mut CallState {
        self.calls.entry(call_id.to_owned()).or_default()
    }
}

/// Where a call is in its life, as the simulated API sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CallStatus {
    #[default]
    Incoming,
    Accepted,
    Rejected,
    HungUp,
}

/// Everything remembered about one call, across all its WebSocket attachments.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    pub(crate) status: CallStatus,
    /// The accept body merged with every later `session.update`; `None` before accept.
    pub(crate) session: Option<Value>,
    /// Function call ids the model issued, for the exactly-once check on outputs.
    pub(crate) issued: HashSet<String>,
    /// Function call ids already answered with a `function_call_output`.
    pub(crate) answered: HashSet<String>,
    pub(crate) outputs: Vec<(String, String)>,
    pub(crate) response_creates: Vec<Value>,
    pub(crate) session_updates: Vec<Value>,
    pub(crate) active_response: Option<String>,
    pub(crate) responses: HashMap<String, ResponseRecord>,
    /// Attachments not yet handed to a test through `Simulator::model`.
    pub(crate) pending: VecDeque<Attachment>,
    /// Senders to every open connection task, so a hangup can close them.
    pub(crate) live: Vec<(u64, mpsc::UnboundedSender<Outbound>)>,
}

/// A response's output so far, and whether its `response.done` went out (it goes out once).
#[derive(Debug, Default)]
pub(crate) struct ResponseRecord {
    items: Vec<Value>,
    done: bool,
}

/// The test-facing ends of one WebSocket attachment's channels.
#[derive(Debug)]
pub(crate) struct Attachment {
    pub(crate) to_socket: mpsc::UnboundedSender<Outbound>,
    pub(crate) from_socket: mpsc::UnboundedReceiver<Value>,
}

/// The connection task's ends of a fresh attachment.
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) id: u64,
    pub(crate) outbound: mpsc::UnboundedReceiver<Outbound>,
    pub(crate) inbound: mpsc::UnboundedSender<Value>,
    pub(crate) session: Value,
}

impl CallState {
    /// Opens a response, makes it the active one, and returns its id and `response.created`.
    pub(crate) fn begin_response(&mut self, ids: &Ids) -> (String, Value) {
        let id = ids.response();
        self.responses.insert(id.clone(), ResponseRecord::default());
        self.active_response = Some(id.clone());
        let event = json!({
            "event_id": ids.event(),
            "type": "response.created",
            "response": {
                "object": "realtime.response",
                "id": id,
                "status": "in_progress",
                "status_details": null,
                "output": [],
            },
        });
        (id, event)
    }

    /// Records a function call the model issues in `response_id`; returns its output index.
    pub(crate) fn add_function_call(
        &mut self,
        response_id: &str,
        call_id: &str,
        item: Value,
    ) -> usize {
        self.issued.insert(call_id.to_owned());
        let record = self.responses.entry(response_id.to_owned()).or_default();
        record.items.push(item);
        record.items.len() - 1
    }

    /// Ends `response_id` with `status`, unless it already ended; returns its `response.done`.
    pub(crate) fn end_response(
        &mut self,
        ids: &Ids,
        response_id: &str,
        status: &str,
        status_details: Value,
    ) -> Option<Value> {
        let output = match self.responses.get_mut(response_id) {
            Some(record) if record.done => return None,
            Some(record) => {
                record.done = true;
                std::mem::take(&mut record.items)
            }
            None => Vec::new(),
        };
        if self.active_response.as_deref() == Some(response_id) {
            self.active_response = None;
        }
        Some(json!({
            "event_id": ids.event(),
            "type": "response.done",
            "response": {
                "object": "realtime.response",
                "id": response_id,
                "status": status,
                "status_details": status_details,
                "output": output,
            },
        }))
    }

    /// Hands out the oldest attachment not yet given to a test, skipping dead ones a newer
    /// attachment superseded (a client that reconnected before the test looked).
    pub(crate) fn take_pending(&mut self) -> Option<Attachment> {
        while let Some(attachment) = self.pending.pop_front() {
            if attachment.to_socket.is_closed() && !self.pending.is_empty() {
                continue;
            }
            return Some(attachment);
        }
        None
    }
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            state: Mutex::new(State {
                api_key: "sk-test".to_owned(),
                calls: HashMap::new(),
                requests: Vec::new(),
                violations: Vec::new(),
                failures: HashMap::new(),
                stalls: HashMap::new(),
                waiters: HashMap::new(),
            }),
            ids: Ids::default(),
            shutdown: watch::Sender::new(false),
            started: Instant::now(),
        }
    }

    /// Locks the state; a panic elsewhere while holding it must not wedge the simulator.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn ids(&self) -> &Ids {
        &self.ids
    }

    pub(crate) fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn stop(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves once the simulator is shut down.
    pub(crate) async fn stopped(&self) {
        let mut rx = self.shutdown.subscribe();
        // An error means the sender is gone, which only happens as everything is torn down.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Waits up to `timeout` until `check` finds something about `call_id`.
    pub(crate) async fn wait_for<T>(
        &self,
        call_id: &str,
        timeout: Duration,
        mut check: impl FnMut(&mut State) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        let notify = {
            let mut state = self.lock();
            Arc::clone(state.waiters.entry(call_id.to_owned()).or_default())
        };
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registering before checking means a wake-up between the check and the wait is kept.
            notified.as_mut().enable();
            let found = check(&mut self.lock());
            if found.is_some() {
                return found;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// Registers a new WebSocket attachment for an accepted call, or `None` if the call is not
    /// (or no longer) accepted.
    pub(crate) fn attach(&self, call_id: &str) -> Option<Attached> {
        let mut state = self.lock();
        let call = state.calls.get_mut(call_id)?;
        if call.status != CallStatus::Accepted {
            return None;
        }
        let id = self.ids.attachment();
        let (to_socket, outbound) = mpsc::unbounded_channel();
        let (inbound, from_socket) = mpsc::unbounded_channel();
        call.live.push((id, to_socket.clone()));
        call.pending.push_back(Attachment {
            to_socket,
            from_socket,
        });
        let session = call.session.clone().unwrap_or(Value::Null);
        state.wake(call_id);
        Some(Attached {
            id,
            outbound,
            inbound,
            session,
        })
    }

    /// Forgets a closed attachment.
    pub(crate) fn detach(&self, call_id: &str, attachment: u64) {
        let mut state = self.lock();
        if let Some(call) = state.calls.get_mut(call_id) {
            call.live.retain(|(id, _)| *id != attachment);
        }
    }
}
