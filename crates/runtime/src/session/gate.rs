//! The session's gate for a run: a checkpoint at each effect, and terminal effects held until
//! the response that asked for them completes.

use switchboard_core::{EffectRequest, Suspended};
use tokio::sync::oneshot;

use crate::BoxFuture;
use crate::executor::Gate;
use crate::journal::{Checkpoint, JournalEntry};

use super::{Cmd, SessionGate};

impl Gate for SessionGate {
    fn before_effect<'a>(
        &'a self,
        request: &'a EffectRequest,
        suspended: &'a Suspended,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match serde_json::to_value(suspended) {
                Ok(run) => {
                    let checkpoint = Checkpoint {
                        invocation: self.invocation.clone(),
                        request: request.clone(),
                        suspended: run,
                    };
                    let entry = JournalEntry::Checkpoint {
                        function_call_id: self.invocation.function_call_id.clone(),
                        checkpoint: Box::new(checkpoint),
                    };
                    match self.journal.append(&self.call_id, entry).await {
                        Ok(()) => {}
                        // Another node owns the call: it will resume this run; this node
                        // must not perform the effect.
                        Err(e) if e.is_fenced() => return false,
                        Err(e) => {
                            tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed")
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(name: "checkpoint_failed", error = %e, "checkpoint_failed")
                }
            }
            let (true, Some(response_id)) = (
                self.hold && request.is_terminal(),
                &self.invocation.response_id,
            ) else {
                return true;
            };
            let (reply, rx) = oneshot::channel();
            if self
                .tx
                .send(Cmd::HoldTerminal {
                    response_id: response_id.clone(),
                    reply,
                })
                .is_err()
            {
                return false;
            }
            rx.await.unwrap_or(false)
        })
    }
}
