//! The HTTP door's live calls: one `CallSession` per call, and a sink that hands each answer to
//! the HTTP request waiting for it; a phone call's sink that splits answers between its line and
//! the requests of its MCP endpoint.

mod answers;
mod lifecycle;
mod view;

pub use answers::InvocationResult;
pub(crate) use answers::{Via, submit_and_wait};
pub use lifecycle::{CallStarted, NewCall};
pub(crate) use lifecycle::{Serving, live, locate, pinned_config, served_elsewhere, start_call};
pub use view::CallView;
pub(crate) use view::{recent_invocations, view, view_record, view_redactor};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use switchboard_runtime::{BoxFuture, CallSession, Delivery, OutputSink};
use tokio::sync::oneshot;

/// Routes a call's answers to the requests waiting for them, by function call id.
#[derive(Debug, Default)]
pub struct HttpSink {
    /// Several requests may wait for one function call (a client retrying while it runs).
    waiters: Mutex<HashMap<String, Vec<oneshot::Sender<Delivery>>>>,
    /// On a phone call: the function calls submitted through requests and not answered yet,
    /// whose answers go to requests and never to the line (see [`PhoneSink`]).
    submitted: Mutex<HashSet<String>>,
}

impl HttpSink {
    /// Registers interest in one function call's answer, before it is submitted.
    pub fn wait_for(&self, function_call_id: &str) -> oneshot::Receiver<Delivery> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(function_call_id.to_owned())
            .or_default()
            .push(tx);
        rx
    }

    /// Marks a function call as submitted through a request, before it is submitted: on a phone
    /// call its answer then goes to requests, never to the line (also when the request has
    /// given up by then). The mark goes with the answer.
    pub fn submitted_here(&self, function_call_id: &str) {
        self.submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(function_call_id.to_owned());
    }

    /// Whether this answer belongs to a request (and no longer marked as pending).
    fn takes(&self, delivery: &Delivery) -> bool {
        !delivery.async_completion
            && self
                .submitted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&delivery.result.function_call_id)
    }

    /// Drops interest (the request gave up); the answer still lands in the call's record.
    pub fn forget(&self, function_call_id: &str) {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(function_call_id);
    }
}

impl OutputSink for HttpSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        // An async tool's completion has no waiter (its request got "started"): it is in the
        // call's record.
        let waiters = if delivery.async_completion {
            None
        } else {
            self.waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&delivery.result.function_call_id)
        };
        match waiters {
            Some(list) => {
                for tx in list {
                    let _ = tx.send(delivery.clone());
                }
            }
            None => {
                tracing::debug!(name: "delivery_without_waiter", function_call_id = %delivery.result.function_call_id, "delivery_without_waiter")
            }
        }
        Box::pin(async {})
    }

    fn released(&self) {
        // Dropping the senders tells each waiting request that the call moved.
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// A phone call's sink: the model's function calls from the line are answered on the line; those
/// that came through the call's MCP endpoint (OpenAI calling the call's tools over MCP, or a
/// client) are answered to their requests, and a handoff among them still brings the line's
/// model the new agent's instructions and tools.
pub struct PhoneSink {
    pub requests: Arc<HttpSink>,
    pub line: Arc<dyn OutputSink>,
}

impl std::fmt::Debug for PhoneSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhoneSink")
            .field("requests", &self.requests)
            .finish_non_exhaustive()
    }
}

impl OutputSink for PhoneSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        if self.requests.takes(&delivery) {
            if let Some(h) = &delivery.handoff {
                self.line.handed_off(&h.agent);
            }
            self.line
                .answered_elsewhere(&delivery.result.function_call_id);
            return self.requests.deliver(delivery);
        }
        self.line.deliver(delivery)
    }

    fn released(&self) {
        self.requests.released();
        self.line.released();
    }

    fn handed_off(&self, agent: &str) {
        self.line.handed_off(agent);
    }
}

/// A call this node is serving.
#[derive(Debug)]
pub struct LiveCall {
    pub tenant_id: String,
    pub session: CallSession,
    pub sink: Arc<HttpSink>,
    /// Served by the Realtime door: its answers go to the call's WebSocket, not to requests.
    pub realtime: bool,
    /// When the call was last used: an HTTP-door call idle too long ends (`crate::expiry`).
    pub activity: crate::expiry::Activity,
}

/// The calls this node serves, by tenant and id: two tenants may use one call id.
#[derive(Debug, Default)]
pub struct Registry {
    calls: Mutex<HashMap<(String, String), Arc<LiveCall>>>,
    /// Held while a call started elsewhere is picked up (see `lifecycle::locate`).
    pickup: tokio::sync::Mutex<()>,
}

fn key(tenant_id: &str, call_id: &str) -> (String, String) {
    (tenant_id.to_owned(), call_id.to_owned())
}

impl Registry {
    /// Waits for the node's pick-up turn.
    pub async fn pickup(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.pickup.lock().await
    }

    pub fn get(&self, tenant_id: &str, call_id: &str) -> Option<Arc<LiveCall>> {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.get(&key(tenant_id, call_id)).cloned()
    }

    pub fn insert(&self, call: Arc<LiveCall>) {
        let id = key(&call.tenant_id, call.session.call_id());
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, call);
    }

    pub fn remove(&self, tenant_id: &str, call_id: &str) -> Option<Arc<LiveCall>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key(tenant_id, call_id))
    }

    /// Live calls of one tenant, for the per-tenant cap.
    pub fn count(&self, tenant_id: &str) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .filter(|(t, _)| t == tenant_id)
            .count()
    }

    /// Every call this node serves now.
    pub fn all(&self) -> Vec<Arc<LiveCall>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Live calls of all tenants.
    pub fn total(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Every live call, for a graceful shutdown.
    pub fn drain(&self) -> Vec<Arc<LiveCall>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, c)| c)
            .collect()
    }
}
