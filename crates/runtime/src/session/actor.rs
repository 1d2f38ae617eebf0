//! The session's loop: what it does with each command — new function calls, their claims
//! and runs, cancelled responses, restored runs and the call's end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use switchboard_core::{ErrorCode, Outcome, SideEffect, Suspended, ToolError};
use tokio::sync::{mpsc, oneshot};

use crate::adaptive::{self, Policy};
use crate::bookkeeping::{DedupeKey, dedupe_digest};
use crate::commit::{CommitError, retry_until, with_retry};
use crate::invocation::{Invocation, InvocationRecord};
use crate::journal::{Checkpoint, Claim, JournalEntry, JournalError};
use crate::traces::TraceParent;

use super::run::Run;
use super::{Actor, Cmd, Conclusion, Lookup, Pending, SessionSizes, shown};

impl Actor {
    /// The session's loop. Each command's work is boxed: an idle call's task then holds only
    /// the loop's own state, not room for the largest command's (see docs/benchmarks.md).
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Submit(inv, arrived, parent, policy) => {
                    Box::pin(self.submit(*inv, true, arrived, parent, policy)).await
                }
                Cmd::Rerun(inv) => {
                    tracing::info!(name: "tool_run_restarted_from_claim", function_call_id = %inv.function_call_id, tool_name = %shown(&inv.name), "tool_run_restarted_from_claim");
                    Box::pin(self.submit(*inv, false, Instant::now(), None, None)).await
                }
                Cmd::Resume(cp) => Box::pin(self.resume(*cp)).await,
                Cmd::CancelResponse(id) => Box::pin(self.cancel_response(&id)).await,
                Cmd::ResponseDone(id) => self.response_done(&id),
                Cmd::HoldTerminal { response_id, reply } => self.hold_terminal(&response_id, reply),
                Cmd::Finished {
                    function_call_id,
                    result,
                } => Box::pin(self.finished(&function_call_id, *result)).await,
                Cmd::Snapshot(reply) => {
                    let _ = reply.send(self.snapshot(false));
                }
                Cmd::Lookup(fc, reply) => {
                    let found = if self.pending.contains_key(&fc)
                        || self.pending.values().any(|p| {
                            p.running
                                .followers
                                .iter()
                                .any(|(i, _, _)| i.function_call_id == fc)
                        }) {
                        Some(Lookup::Pending)
                    } else if let Some(r) = self.records.find(&fc) {
                        Some(Lookup::Done(Box::new(r.clone())))
                    } else {
                        Box::pin(self.forgotten_record(&fc)).await.map(Lookup::Done)
                    };
                    let _ = reply.send(found);
                }
                Cmd::Sizes(reply) => {
                    let _ = reply.send(SessionSizes {
                        records: self.records.len(),
                        responses: self.responses.len(),
                        dedupe_answers: self.dedupe.len(),
                        pending: self.pending.len(),
                    });
                }
                Cmd::End(reply) => {
                    Box::pin(self.end()).await;
                    let _ = reply.send(self.snapshot(true));
                    self.call_span.end("ended");
                    break;
                }
            }
            if self.released {
                self.call_span.end("released");
                break;
            }
        }
        metrics::gauge!("switchboard_active_calls").decrement(1.0);
    }

    /// Takes a function call: answered from what the call knows (a repeat, a duplicate write,
    /// an unknown tool) or run, claimed in the journal first when its tool can request an
    /// effect (`claim`; a rerun has its claim).
    async fn submit(
        &mut self,
        inv: Invocation,
        claim: bool,
        arrived: Instant,
        parent: Option<Box<TraceParent>>,
        policy: Option<Box<Policy>>,
    ) {
        let fc = inv.function_call_id.clone();
        if self.pending.contains_key(&fc) {
            tracing::info!(name: "tool_invocation_ignored_already_pending", function_call_id = %fc, tool_name = %shown(&inv.name), "tool_invocation_ignored_already_pending");
            return;
        }
        if self.records.contains(&fc) || self.recorded_in_journal(&fc).await {
            tracing::info!(name: "tool_invocation_ignored_already_executed", function_call_id = %fc, tool_name = %shown(&inv.name), "tool_invocation_ignored_already_executed");
            return;
        }
        let (started, started_at) = (arrived, crate::now_rfc3339());
        self.open_span(&inv, parent.as_deref(), started);
        let agent = self.ctx.active_agent().to_owned();
        let config = Arc::clone(&self.deps.config);
        let entry = match config.resolve(&agent, &inv.name) {
            Ok(entry) => entry,
            Err(e) => {
                if e.code == ErrorCode::ToolNotFound {
                    tracing::info!(name: "tool_not_found", tool_name = %shown(&inv.name), agent = %agent, "tool_not_found");
                }
                let name = shown(&inv.name).into_owned();
                let outcome = Outcome::failed(&name, e);
                let mut c = Conclusion::new(inv, name, outcome, started, started_at);
                c.unverified_tool = true;
                self.conclude(c).await;
                return;
            }
        };
        let tool = &entry.tool;
        // The runaway guards count every new function call (not a rerun after a takeover: it
        // was counted where it arrived) and refuse before anything else is decided.
        if claim {
            let guards = config.guards(&agent);
            let admitted = self.runaway.admit(
                &guards,
                tool.name(),
                tool.side_effect(),
                &inv.arguments_json,
                started,
            );
            if let Err(e) = admitted {
                tracing::warn!(name: "tool_invocation_refused_runaway", function_call_id = %fc, tool_name = %tool.name(), code = %e.code, "tool_invocation_refused_runaway");
                let outcome = Outcome::failed(tool.name(), e);
                let c = Conclusion::new(inv, tool.name().to_owned(), outcome, started, started_at);
                self.conclude(c).await;
                return;
            }
        }
        let window = Duration::from_secs(tool.dedupe_window_s());
        let dedupe_key = (tool.side_effect() == SideEffect::Write && !window.is_zero())
            .then(|| dedupe_key(&agent, &inv))
            .flatten();
        if let Some(key) = &dedupe_key {
            if let Some(first) = self.dedupe.get(key) {
                let (first_id, output) = (first.function_call_id.clone(), first.output.clone());
                tracing::info!(name: "tool_invocation_answered_as_duplicate", function_call_id = %fc, duplicate_of = %first_id, tool_name = %inv.name, "tool_invocation_answered_as_duplicate");
                self.conclude_duplicate(
                    inv,
                    tool.name().to_owned(),
                    &first_id,
                    &output,
                    None,
                    started,
                    started_at,
                )
                .await;
                return;
            }
            if self
                .pending
                .values()
                .any(|p| p.running.dedupe_key.as_ref() == Some(key))
                && self
                    .refused_as_busy(&inv, tool.name(), started, &started_at)
                    .await
            {
                return;
            }
            if let Some(first) = self
                .pending
                .values_mut()
                .find(|p| p.running.dedupe_key.as_ref() == Some(key))
            {
                tracing::info!(name: "tool_invocation_joined_identical_write", function_call_id = %fc, duplicate_of = %first.running.invocation.function_call_id, "tool_invocation_joined_identical_write");
                first.running.followers.push((inv, started, started_at));
                return;
            }
        }
        // A tool that can reach outside the call is claimed before it runs (a rerun has its
        // claim), and runs in a task of its own. One that cannot is claimed by its record: it
        // runs here, on the session's context, and its record, fenced, is the first and only
        // write of its run; its answer follows it (see `answer_run`).
        let claimed = !claim || tool.requests_effects() || tool.is_async();
        if !claimed {
            self.run_in_memory(inv, entry, dedupe_key, started, started_at)
                .await;
            return;
        }
        if self
            .refused_as_busy(&inv, tool.name(), started, &started_at)
            .await
        {
            return;
        }
        // What the door decided (it said the filler by it), else what the policy says now: its
        // deadline bounds the claim and the run alike.
        let policy = policy.map_or_else(|| adaptive::decide(&config, &agent, tool), |p| *p);
        let timeout = Duration::from_millis(policy.timeout_ms);
        if claim && !self.claim(&inv, tool, timeout, started, &started_at).await {
            return;
        }
        let run = Run {
            dedupe_key,
            resume_from: None,
            claimed,
            policy: Some(policy),
        };
        self.schedule(inv, Arc::clone(tool), run, started, started_at)
            .await;
    }

    /// Answers `inv` at once with `rate_limited`, nothing run, when the call already has
    /// `max_pending_tools` running or waiting for a slot (identical writes joined to them
    /// included): a model calling tools faster than they finish waits for their results rather
    /// than piling up the call's memory. `false` when there is room.
    async fn refused_as_busy(
        &mut self,
        inv: &Invocation,
        tool: &str,
        started: Instant,
        started_at: &str,
    ) -> bool {
        let max = self.deps.options.max_pending_tools.max(1);
        let waiting: usize = self
            .pending
            .values()
            .map(|p| 1 + p.running.followers.len())
            .sum();
        if waiting < max {
            return false;
        }
        tracing::warn!(name: "tool_invocation_refused_busy", function_call_id = %inv.function_call_id, tool_name = %tool, waiting, "tool_invocation_refused_busy");
        let err = ToolError::new(
            ErrorCode::RateLimited,
            format!(
                "{tool}: {waiting} tools are already running on this call, the most it takes, so nothing was done. Wait for their results, then call it again if it is still needed."
            ),
        );
        let outcome = Outcome::failed(tool, err);
        let c = Conclusion::new(
            inv.clone(),
            tool.to_owned(),
            outcome,
            started,
            started_at.to_owned(),
        );
        self.conclude(c).await;
        true
    }

    /// Claims a function call in the journal before it runs, so no other node ever runs it;
    /// `false` when it must not run here. A claim taken before is left to whoever holds it (a
    /// run resumed here after a takeover, or one answered already); a journal that keeps
    /// failing answers the call with an error, nothing run.
    async fn claim(
        &mut self,
        inv: &Invocation,
        tool: &switchboard_core::Tool,
        timeout: Duration,
        started: Instant,
        started_at: &str,
    ) -> bool {
        let journal = Arc::clone(&self.deps.journal);
        let call_id = self.call_id.clone();
        // Within the tool's deadline, which runs from the function call's arrival: the claim's
        // wait for the database is part of the time the caller waits. Failures are retried for
        // `commit_retry`; an attempt under way (a slow database) may take the whole deadline
        // (one that never answers leaves the run no time, and it is not started).
        let deadline = started + timeout;
        let errors_until = deadline.min(Instant::now() + self.deps.options.commit_retry);
        let claimed = retry_until(errors_until, deadline, || {
            let claim = journal.claim(&call_id, inv);
            async move { claim.await.map_err(CommitError::from) }
        })
        .await;
        match claimed {
            Ok(Claim::Claimed) => true,
            Ok(Claim::Taken) => {
                // Its run and its answer are another's: its span ends here, without an outcome.
                self.spans.remove(&inv.function_call_id);
                tracing::info!(name: "tool_invocation_ignored_claimed", function_call_id = %inv.function_call_id, tool_name = %tool.name(), "tool_invocation_ignored_claimed");
                false
            }
            Err(CommitError::Journal(e)) if e.is_fenced() => {
                self.release(&e);
                false
            }
            Err(e) => {
                let name = tool.name().to_owned();
                let err = ToolError::new(
                    ErrorCode::ToolExecutionFailed,
                    format!(
                        "{name}: could not be started (the call's storage did not answer), so nothing was done. Tell the caller it cannot be done right now."
                    ),
                );
                tracing::error!(name: "tool_claim_failed", function_call_id = %inv.function_call_id, error = %e, "tool_claim_failed");
                let outcome = Outcome::failed(&name, err);
                let c = Conclusion::new(inv.clone(), name, outcome, started, started_at.to_owned());
                self.conclude(c).await;
                false
            }
        }
    }

    /// Another node owns the call now: stop every run here without answering (their answers
    /// are the new owner's, from the journal), tell the door, and stop the session.
    pub(super) fn release(&mut self, why: &JournalError) {
        if self.released {
            return;
        }
        self.released = true;
        tracing::warn!(name: "call_released_to_new_owner", error = %why, running = self.pending.len(), "call_released_to_new_owner");
        for (_, p) in self.pending.drain() {
            p.abort.abort();
            metrics::gauge!("switchboard_pending_tools").decrement(1.0);
        }
        for state in self.responses.all_mut() {
            for held in state.held.drain(..) {
                let _ = held.send(false);
            }
        }
        self.deps.sink.released();
    }

    /// Whether the journal recorded this function call although the session no longer holds
    /// its record (see [`Actor::forgotten_record`]).
    async fn recorded_in_journal(&self, function_call_id: &str) -> bool {
        self.forgotten_record(function_call_id).await.is_some()
    }

    /// The journal's record of a function call the session no longer holds (it was dropped
    /// for the bound, or never loaded). Only asked when the session has let records go: it
    /// holds every other one. A journal that cannot say is logged and taken as "none".
    async fn forgotten_record(&self, function_call_id: &str) -> Option<Box<InvocationRecord>> {
        if !self.records.forgotten() {
            return None;
        }
        let read = self.deps.journal.recorded(&self.call_id, function_call_id);
        match tokio::time::timeout(self.deps.options.commit_retry, read).await {
            Ok(Ok(found)) => found.map(Box::new),
            Ok(Err(e)) => {
                tracing::error!(name: "journal_read_failed", error = %e, "journal_read_failed");
                None
            }
            Err(_) => {
                tracing::error!(name: "journal_read_failed", error = "the database did not answer in time", "journal_read_failed");
                None
            }
        }
    }

    async fn resume(&mut self, cp: Checkpoint) {
        let (started, started_at) = (Instant::now(), crate::now_rfc3339());
        let inv = cp.invocation.clone();
        match serde_json::from_value::<Suspended>(cp.suspended) {
            Ok(suspended) => {
                tracing::info!(name: "tool_run_resumed_from_checkpoint", function_call_id = %inv.function_call_id, tool_name = %inv.name, "tool_run_resumed_from_checkpoint");
                let tool = Arc::clone(suspended.tool());
                let run = Run {
                    dedupe_key: None,
                    resume_from: Some((cp.request, suspended)),
                    claimed: true,
                    policy: None,
                };
                self.schedule(inv, tool, run, started, started_at).await;
            }
            Err(e) => {
                let err = ToolError::new(
                    ErrorCode::ToolExecutionFailed,
                    format!("The tool could not be resumed after a restart ({e})."),
                );
                let name = shown(&inv.name).into_owned();
                let outcome = Outcome::failed(&name, err);
                let mut c = Conclusion::new(inv, name, outcome, started, started_at);
                c.unverified_tool = true;
                self.conclude(c).await;
            }
        }
    }

    async fn cancel_response(&mut self, response_id: &str) {
        self.response_ended(response_id);
        let state = self.responses.entry(response_id);
        state.cancelled = true;
        state.done = true;
        for held in state.held.drain(..) {
            let _ = held.send(false);
        }
        let aborted: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                p.running.invocation.response_id.as_deref() == Some(response_id)
                    && p.running.side_effect == SideEffect::Read
                    && !p.running.is_async
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &aborted {
            let Some(p) = self.pending.remove(id) else {
                continue;
            };
            p.abort.abort();
            metrics::gauge!("switchboard_pending_tools").decrement(1.0);
            tracing::info!(name: "tool_cancelled_for_response", response_id = %response_id, function_call_id = %id, tool_name = %p.running.tool, "tool_cancelled_for_response");
            let c = Conclusion::cancelled(
                p.running.invocation,
                &p.running.tool,
                p.running.started,
                p.running.started_at,
                "The caller interrupted; this request was cancelled.",
            );
            self.conclude(c).await;
        }
        tracing::info!(name: "tool_cancel_for_response_finished", response_id = %response_id, cancelled_count = aborted.len(), "tool_cancel_for_response_finished");
    }

    /// Remembers that a response ended, forgetting the oldest ended ones past the bound that
    /// no running tool belongs to.
    fn response_ended(&mut self, response_id: &str) {
        let pending = &self.pending;
        self.responses.ended(response_id, |id| {
            pending.values().any(|p| {
                p.running.invocation.response_id.as_deref() == Some(id)
                    || p.running
                        .followers
                        .iter()
                        .any(|(i, _, _)| i.response_id.as_deref() == Some(id))
            })
        });
    }

    fn response_done(&mut self, response_id: &str) {
        self.response_ended(response_id);
        let state = self.responses.entry(response_id);
        state.done = true;
        let release = !state.cancelled;
        for held in state.held.drain(..) {
            tracing::info!(name: "tool_terminal_released", response_id = %response_id, performed = release, "tool_terminal_released");
            let _ = held.send(release);
        }
    }

    fn hold_terminal(&mut self, response_id: &str, reply: oneshot::Sender<bool>) {
        let state = self.responses.entry(response_id);
        if state.cancelled {
            let _ = reply.send(false);
        } else if state.done {
            let _ = reply.send(true);
        } else {
            tracing::info!(name: "tool_terminal_held", response_id = %response_id, "tool_terminal_held");
            state.held.push(reply);
        }
    }

    async fn end(&mut self) {
        tracing::info!(name: "tool_cancel_all_started", cancellable_tasks = self.pending.len(), "tool_cancel_all_started");
        for state in self.responses.all_mut() {
            for held in state.held.drain(..) {
                let _ = held.send(false);
            }
        }
        let pending: Vec<(String, Pending)> = self.pending.drain().collect();
        let mut monitors = Vec::with_capacity(pending.len());
        for (_, p) in pending {
            p.abort.abort();
            monitors.push(p.monitor);
            metrics::gauge!("switchboard_pending_tools").decrement(1.0);
            const ENDED: &str = "The call ended before this finished.";
            self.conclude(Conclusion::cancelled(
                p.running.invocation,
                &p.running.tool,
                p.running.started,
                p.running.started_at,
                ENDED,
            ))
            .await;
            for (inv, started, started_at) in p.running.followers {
                self.conclude(Conclusion::cancelled(
                    inv,
                    &p.running.tool,
                    started,
                    started_at,
                    ENDED,
                ))
                .await;
            }
        }
        // Wait until every run has really stopped, so nothing acts for this call afterwards.
        for m in monitors {
            let _ = m.await;
        }
        let journal = Arc::clone(&self.deps.journal);
        let call_id = self.call_id.clone();
        let ended = with_retry(self.deps.options.commit_retry, || {
            let append = journal.append(&call_id, JournalEntry::Ended);
            async move { append.await.map_err(CommitError::from) }
        })
        .await;
        match ended {
            Ok(()) => {}
            // Stored after the call's other waiting entries, once the database answers.
            Err(CommitError::Journal(e)) if !e.is_fenced() => {
                if let Err(full) = journal.defer(&call_id, JournalEntry::Ended) {
                    tracing::error!(name: "journal_write_failed", error = %e, reason = %full, "journal_write_failed");
                }
            }
            Err(e) => {
                tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed")
            }
        }
        tracing::info!(name: "tool_cancel_all_finished", remaining_tasks = self.pending.len(), "tool_cancel_all_finished");
    }
}

/// The dedupe key of a write call: the agent, the tool, and the arguments in canonical form.
fn dedupe_key(agent: &str, inv: &Invocation) -> Option<DedupeKey> {
    let args: Value = serde_json::from_str(if inv.arguments_json.trim().is_empty() {
        "{}"
    } else {
        &inv.arguments_json
    })
    .ok()?;
    Some(dedupe_digest(&format!(
        "{agent}\u{0}{}\u{0}{}",
        inv.name,
        canonical(&args)
    )))
}

/// JSON with object keys sorted at every level, so equal arguments give equal text.
pub(super) fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}
