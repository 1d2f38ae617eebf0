//! The call session: one task per call that owns the call's context.
//!
//! Every door (the Realtime WebSocket, HTTP, MCP) hands function calls to a [`CallSession`]. It
//! ignores a `function_call_id` it has seen, runs tools concurrently in background tasks
//! (bounded per call), commits each finished tool's writes to the context atomically, and sends
//! exactly one answer per function call to the [`OutputSink`], whatever happens: bad arguments,
//! an unknown tool, a timeout, a panic, an interruption, or the end of the call.
//!
//! **Interruptions** follow the side-effect class of each tool: when the response that asked
//! for a tool is cancelled, a `read` tool is aborted and answered `cancelled`; a `write` tool
//! runs to its end and its real result is delivered; a `terminal` effect (transfer, hang-up)
//! waits for its response to complete and is dropped if it was interrupted.
//!
//! **Exactly-once writes**: a write tool called again with the same arguments within its
//! `dedupe_window_s` is not run again; the model gets the first result with `duplicate_of`.
//!
//! **Bounded memory**, however long the call (see [`SessionOptions`]): the session holds its
//! newest records only, and asks the journal about a function call id it no longer holds
//! before running it; ended responses and dedupe answers are capped; each record's fields are
//! cut ([`RecordLimits`]); metrics never take a label from a name the model made up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value, json};
use switchboard_core::{
    CallInfo, Context, EffectRequest, ErrorCode, Outcome, SideEffect, Suspended, ToolError,
    ToolResult,
};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::{AbortHandle, JoinError};
use tracing::Instrument;

use crate::BoxFuture;
use crate::bookkeeping::{
    Answered, DedupeAnswers, DedupeKey, RecentRecords, Responses, dedupe_digest,
};
use crate::commit::{CommitError, apply_outcome, refused_outcome, unsaved_outcome, with_retry};
use crate::effects::{CallAction, TransferLedger};
use crate::executor::{CallConfig, Execution, Executor, Gate};
use crate::invocation::{Delivery, Invocation, InvocationRecord, OutputSink};
use crate::journal::{CallJournal, Checkpoint, Claim, JournalEntry, JournalError};
use crate::records::RecordLimits;
use crate::redact::Redactor;

/// How a session behaves; the door decides.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Tools of one call running at once; more wait their turn.
    pub max_concurrent_tools: usize,
    /// Hold transfers and hang-ups until the response that asked for them completes (the
    /// Realtime door, which sees responses complete); otherwise perform them at once.
    pub hold_terminal_effects: bool,
    /// Handoffs in one call before a loop is assumed.
    pub max_handoffs: u32,
    /// Answer a read tool that changed nothing before its record is journaled, so the answer
    /// does not wait behind the disk (the Realtime door, whose client never reads records
    /// back). Otherwise every answer follows its journal entry (read-your-writes for the
    /// HTTP door's clients).
    pub answer_before_journal: bool,
    /// What the call keeps of its invocations (records in memory, fields of each record).
    pub records: RecordLimits,
    /// Ended (done or cancelled) model responses remembered, the newest first; one of them is
    /// kept longer while a tool of it runs. Default 1024.
    pub max_finished_responses: usize,
    /// Answers of successful write calls kept for their dedupe window, at most this many (the
    /// ones closest to expiring go first). Default 256.
    pub max_dedupe_answers: usize,
    /// How long a failed commit to the journal is retried (with backoff) before the tool is
    /// answered with an error and nothing of it is applied.
    pub commit_retry: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            max_concurrent_tools: 16,
            hold_terminal_effects: false,
            max_handoffs: 10,
            answer_before_journal: false,
            records: RecordLimits::default(),
            max_finished_responses: 1024,
            max_dedupe_answers: 256,
            commit_retry: Duration::from_secs(2),
        }
    }
}

/// The state of a call as a snapshot: its context, what ran, what is running.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSnapshot {
    pub call_id: String,
    pub context: Context,
    pub records: Vec<InvocationRecord>,
    pub pending: Vec<String>,
    pub ended: bool,
    /// Function calls whose runs were restored from the journal when the call was taken over
    /// (resumed at an effect, or run again): their answers reach the sink from this session,
    /// whether they are still pending or not. Not part of the call's recorded state.
    #[serde(skip)]
    pub restored: Vec<String>,
}

/// A handle to a call's session task; clones address the same session.
#[derive(Debug, Clone)]
pub struct CallSession {
    call_id: String,
    tx: mpsc::UnboundedSender<Cmd>,
    config: Arc<CallConfig>,
}

/// A session's command. The invocations are boxed so that the command is small: the session's
/// channel allocates room for 32 of them up front, for every call.
enum Cmd {
    Submit(Box<Invocation>),
    /// A function call claimed before the call changed owner whose run never reached an
    /// effect: it runs again from the start, under the claim it has.
    Rerun(Box<Invocation>),
    Resume(Box<Checkpoint>),
    CancelResponse(String),
    ResponseDone(String),
    HoldTerminal {
        response_id: String,
        reply: oneshot::Sender<bool>,
    },
    Finished {
        function_call_id: String,
        result: Box<Result<Execution, JoinError>>,
    },
    Snapshot(oneshot::Sender<SessionSnapshot>),
    Lookup(String, oneshot::Sender<Option<Lookup>>),
    Sizes(oneshot::Sender<SessionSizes>),
    End(oneshot::Sender<SessionSnapshot>),
}

/// How much a session holds now: each is bounded by its [`SessionOptions`], however long the
/// call (for tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionSizes {
    /// Invocation records in memory.
    pub records: usize,
    /// Model responses remembered.
    pub responses: usize,
    /// Write answers kept for deduplication.
    pub dedupe_answers: usize,
    /// Tools running or waiting their turn.
    pub pending: usize,
}

/// Where one function call stands in a session.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Running (or waiting its turn).
    Pending,
    /// Answered; the record holds the answer.
    Done(Box<InvocationRecord>),
}

/// Everything a session needs from its deployment.
#[derive(Clone)]
pub struct SessionDeps {
    pub config: Arc<CallConfig>,
    pub executor: Executor,
    pub sink: Arc<dyn OutputSink>,
    pub journal: Arc<dyn CallJournal>,
    pub options: SessionOptions,
}

impl std::fmt::Debug for SessionDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionDeps")
            .field("tenant", &self.config.tenant_id)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl CallSession {
    /// Starts the session of a new call.
    pub async fn start(
        call: CallInfo,
        user: Value,
        deps: SessionDeps,
    ) -> Result<CallSession, JournalError> {
        let ctx = Context::new(&call, user);
        Self::start_with_context(call, ctx, deps).await
    }

    /// [`CallSession::start`] with a context made by the door (e.g. holding the caller's
    /// profile from memory), journaled as the call's first state.
    pub async fn start_with_context(
        call: CallInfo,
        ctx: Context,
        deps: SessionDeps,
    ) -> Result<CallSession, JournalError> {
        deps.journal
            .append(
                &call.id,
                JournalEntry::Started {
                    call: call.clone(),
                    context: ctx.clone(),
                },
            )
            .await?;
        Ok(Self::spawn(
            call.id.clone(),
            ctx,
            Vec::new(),
            0,
            Vec::new(),
            deps,
        ))
    }

    /// Rebuilds a call from its journal (after a restart) and resumes every run that was waiting
    /// at an effect. `None` when the journal has no such call, or it has ended.
    pub async fn restore(
        call_id: &str,
        deps: SessionDeps,
    ) -> Result<Option<CallSession>, JournalError> {
        let max_records = deps.options.records.records();
        let Some(state) = deps.journal.load_recent(call_id, max_records).await? else {
            return Ok(None);
        };
        let (Some(ctx), false) = (state.context, state.ended) else {
            return Ok(None);
        };
        let restored = state
            .checkpoints
            .keys()
            .chain(state.claimed.keys())
            .cloned()
            .collect();
        let session = Self::spawn(
            call_id.to_owned(),
            ctx,
            state.records,
            state.handoffs,
            restored,
            deps,
        );
        for (_, checkpoint) in state.checkpoints {
            let _ = session.tx.send(Cmd::Resume(Box::new(checkpoint)));
        }
        for (_, invocation) in state.claimed {
            let _ = session.tx.send(Cmd::Rerun(Box::new(invocation)));
        }
        Ok(Some(session))
    }

    fn spawn(
        call_id: String,
        ctx: Context,
        records: Vec<InvocationRecord>,
        handoffs: u32,
        restored: Vec<String>,
        deps: SessionDeps,
    ) -> CallSession {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = Arc::clone(&deps.config);
        let redactor = call_redactor(&deps.config, &ctx);
        let records = RecentRecords::new(records, deps.options.records.records());
        let responses = Responses::new(deps.options.max_finished_responses);
        let dedupe = DedupeAnswers::new(deps.options.max_dedupe_answers);
        let actor = Actor {
            call_id: call_id.clone(),
            tx: tx.clone(),
            semaphore: Arc::new(Semaphore::new(deps.options.max_concurrent_tools.max(1))),
            deps,
            ctx,
            redactor,
            pending: HashMap::new(),
            responses,
            dedupe,
            records,
            handoffs,
            transfers: Arc::new(TransferLedger::default()),
            released: false,
            restored,
        };
        // A root span: the call outlives the request that started it.
        let span = tracing::info_span!(parent: None, "call", call_id = %call_id, tenant_id = %actor.deps.config.tenant_id);
        metrics::gauge!("switchboard_active_calls").increment(1.0);
        tokio::spawn(actor.run(rx).instrument(span));
        CallSession {
            call_id,
            tx,
            config,
        }
    }

    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Whether the session has stopped (ended, or released to another node): it takes no
    /// more function calls.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// What the call may use, as pinned when it started.
    pub fn config(&self) -> Arc<CallConfig> {
        Arc::clone(&self.config)
    }

    /// Hands a function call to the session; its answer goes to the sink.
    pub fn submit(&self, invocation: Invocation) {
        let _ = self.tx.send(Cmd::Submit(Box::new(invocation)));
    }

    /// The caller interrupted this response: apply the interruption policy to its tools.
    pub fn cancel_response(&self, response_id: &str) {
        let _ = self.tx.send(Cmd::CancelResponse(response_id.to_owned()));
    }

    /// This response completed: terminal effects it asked for may go ahead.
    pub fn response_done(&self, response_id: &str) {
        let _ = self.tx.send(Cmd::ResponseDone(response_id.to_owned()));
    }

    /// The call's context and invocation records now; `None` once the session has ended.
    pub async fn snapshot(&self) -> Option<SessionSnapshot> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Cmd::Snapshot(reply)).ok()?;
        rx.await.ok()
    }

    /// Where a function call stands: `None` when neither the session nor, once it has let old
    /// records go, its journal has seen it.
    pub async fn lookup(&self, function_call_id: &str) -> Option<Lookup> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Lookup(function_call_id.to_owned(), reply))
            .ok()?;
        rx.await.ok().flatten()
    }

    /// How much the session holds now; `None` once it has ended.
    pub async fn sizes(&self) -> Option<SessionSizes> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Cmd::Sizes(reply)).ok()?;
        rx.await.ok()
    }

    /// Ends the call: cancels what is still running (each gets its answer), records the end,
    /// and returns the final state. `None` if it had ended already.
    pub async fn end(&self) -> Option<SessionSnapshot> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Cmd::End(reply)).ok()?;
        rx.await.ok()
    }
}

struct Pending {
    invocation: Invocation,
    tool: String,
    side_effect: SideEffect,
    is_async: bool,
    abort: AbortHandle,
    /// Finishes once the run's task has stopped, whether it ended or was aborted.
    monitor: tokio::task::JoinHandle<()>,
    started: Instant,
    started_at: String,
    dedupe_key: Option<DedupeKey>,
    /// How long this write's answer is kept for identical calls.
    dedupe_window: Duration,
    /// The tool's `max_context_bytes`, which its commit may not exceed.
    max_context_bytes: usize,
    /// Identical write calls waiting for this one's result.
    followers: Vec<(Invocation, Instant, String)>,
}

struct Actor {
    call_id: String,
    tx: mpsc::UnboundedSender<Cmd>,
    semaphore: Arc<Semaphore>,
    deps: SessionDeps,
    ctx: Context,
    redactor: Redactor,
    pending: HashMap<String, Pending>,
    responses: Responses,
    dedupe: DedupeAnswers,
    /// The newest records; the journal has the rest.
    records: RecentRecords,
    handoffs: u32,
    transfers: Arc<TransferLedger>,
    /// Another node owns the call now: the session stops (see [`Actor::release`]).
    released: bool,
    /// See [`SessionSnapshot::restored`].
    restored: Vec<String>,
}

/// The secrets of every tool the call may use, and the user's tokens.
fn call_redactor(config: &CallConfig, ctx: &Context) -> Redactor {
    Redactor::for_call(config, &ctx.user)
}

impl Actor {
    /// The session's loop. Each command's work is boxed: an idle call's task then holds only
    /// the loop's own state, not room for the largest command's (see docs/benchmarks.md).
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Submit(inv) => Box::pin(self.submit(*inv, true)).await,
                Cmd::Rerun(inv) => {
                    tracing::info!(name: "tool_run_restarted_from_claim", function_call_id = %inv.function_call_id, tool_name = %shown(&inv.name), "tool_run_restarted_from_claim");
                    Box::pin(self.submit(*inv, false)).await
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
                        || self
                            .pending
                            .values()
                            .any(|p| p.followers.iter().any(|(i, _, _)| i.function_call_id == fc))
                    {
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
                    break;
                }
            }
            if self.released {
                break;
            }
        }
        metrics::gauge!("switchboard_active_calls").decrement(1.0);
    }

    /// Takes a function call: answered from what the call knows (a repeat, a duplicate write,
    /// an unknown tool) or claimed in the journal (`claim`; a rerun has its claim) and run.
    async fn submit(&mut self, inv: Invocation, claim: bool) {
        let fc = inv.function_call_id.clone();
        if self.pending.contains_key(&fc) {
            tracing::info!(name: "tool_invocation_ignored_already_pending", function_call_id = %fc, tool_name = %shown(&inv.name), "tool_invocation_ignored_already_pending");
            return;
        }
        if self.records.contains(&fc) || self.recorded_in_journal(&fc).await {
            tracing::info!(name: "tool_invocation_ignored_already_executed", function_call_id = %fc, tool_name = %shown(&inv.name), "tool_invocation_ignored_already_executed");
            return;
        }
        let (started, started_at) = (Instant::now(), crate::now_rfc3339());
        let agent = self.ctx.active_agent().to_owned();
        let tool = match self.deps.config.resolve(&agent, &inv.name) {
            Ok(entry) => Arc::clone(&entry.tool),
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
            if let Some(first) = self
                .pending
                .values_mut()
                .find(|p| p.dedupe_key.as_ref() == Some(key))
            {
                tracing::info!(name: "tool_invocation_joined_identical_write", function_call_id = %fc, duplicate_of = %first.invocation.function_call_id, "tool_invocation_joined_identical_write");
                first.followers.push((inv, started, started_at));
                return;
            }
        }
        if claim && !self.claim(&inv, &tool, started, &started_at).await {
            return;
        }
        self.schedule(inv, tool, dedupe_key, None, started, started_at)
            .await;
    }

    /// Claims a function call in the journal before it runs, so no other node ever runs it;
    /// `false` when it must not run here. A claim taken before is left to whoever holds it (a
    /// run resumed here after a takeover, or one answered already); a journal that keeps
    /// failing answers the call with an error, nothing run.
    async fn claim(
        &mut self,
        inv: &Invocation,
        tool: &switchboard_core::Tool,
        started: Instant,
        started_at: &str,
    ) -> bool {
        let journal = Arc::clone(&self.deps.journal);
        let call_id = self.call_id.clone();
        let claimed = with_retry(self.deps.options.commit_retry, || {
            let claim = journal.claim(&call_id, inv);
            async move { claim.await.map_err(CommitError::from) }
        })
        .await;
        match claimed {
            Ok(Claim::Claimed) => true,
            Ok(Claim::Taken) => {
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
    fn release(&mut self, why: &JournalError) {
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
        match self
            .deps
            .journal
            .recorded(&self.call_id, function_call_id)
            .await
        {
            Ok(found) => found.map(Box::new),
            Err(e) => {
                tracing::error!(name: "journal_read_failed", error = %e, "journal_read_failed");
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
                self.schedule(
                    inv,
                    tool,
                    None,
                    Some((cp.request, suspended)),
                    started,
                    started_at,
                )
                .await;
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

    /// Starts a tool's run in its own task, with a monitor that reports how it ended.
    async fn schedule(
        &mut self,
        inv: Invocation,
        tool: Arc<switchboard_core::Tool>,
        dedupe_key: Option<DedupeKey>,
        resume_from: Option<(EffectRequest, Suspended)>,
        started: Instant,
        started_at: String,
    ) {
        let fc = inv.function_call_id.clone();
        let gate = SessionGate {
            call_id: self.call_id.clone(),
            invocation: inv.clone(),
            hold: self.deps.options.hold_terminal_effects && inv.response_id.is_some(),
            tx: self.tx.clone(),
            journal: Arc::clone(&self.deps.journal),
        };
        let (config, executor, transfers, semaphore) = (
            Arc::clone(&self.deps.config),
            self.deps.executor.clone(),
            Arc::clone(&self.transfers),
            Arc::clone(&self.semaphore),
        );
        let ctx = self.ctx.clone();
        let run_inv = inv.clone();
        let span = tracing::info_span!("invocation", function_call_id = %fc, tool = %tool.name());
        let task = tokio::spawn(
            async move {
                // The semaphore is never closed, so acquiring only waits for a free slot.
                let _permit = semaphore.acquire_owned().await;
                match resume_from {
                    None => {
                        executor
                            .execute(&config, &ctx, &run_inv, &gate, &transfers)
                            .await
                    }
                    Some((request, suspended)) => {
                        executor
                            .resume(&config, &run_inv, request, suspended, &gate, &transfers)
                            .await
                    }
                }
            }
            .instrument(span),
        );
        let abort = task.abort_handle();
        let tx = self.tx.clone();
        let id = fc.clone();
        let monitor = tokio::spawn(async move {
            let result = task.await;
            let _ = tx.send(Cmd::Finished {
                function_call_id: id,
                result: Box::new(result),
            });
        });
        let is_async = tool.is_async();
        self.pending.insert(
            fc.clone(),
            Pending {
                invocation: inv.clone(),
                tool: tool.name().to_owned(),
                side_effect: tool.side_effect(),
                is_async,
                abort,
                monitor,
                started,
                started_at,
                dedupe_key,
                dedupe_window: Duration::from_secs(tool.dedupe_window_s()),
                max_context_bytes: tool.limits().max_context_bytes,
                followers: Vec::new(),
            },
        );
        metrics::gauge!("switchboard_pending_tools").increment(1.0);
        tracing::info!(
            name: "tool_invocation_scheduled",
            function_call_id = %fc,
            tool_name = %tool.name(),
            response_id = inv.response_id.as_deref().unwrap_or_default(),
            side_effect = ?tool.side_effect(),
            pending_tool_calls = self.pending.len(),
            "tool_invocation_scheduled"
        );
        if is_async {
            // Answered at once; the outcome follows as news when the run ends.
            let result = ToolResult {
                function_call_id: fc,
                ok: true,
                error: None,
                output: json!({"ok": true, "message": "started"}).to_string(),
            };
            let delivery = Delivery {
                result,
                tool: tool.name().to_owned(),
                response_id: inv.response_id,
                interrupted: false,
                async_completion: false,
                handoff: None,
                duplicate_of: None,
                actions: Vec::new(),
            };
            self.deps.sink.deliver(delivery).await;
        }
    }

    async fn finished(&mut self, fc: &str, result: Result<Execution, JoinError>) {
        // Absent when it was answered already: aborted by an interruption or by the call's end.
        let Some(p) = self.pending.remove(fc) else {
            return;
        };
        metrics::gauge!("switchboard_pending_tools").decrement(1.0);
        let (mut outcome, actions, trace) = match result {
            Ok(exec) => (exec.outcome, exec.call_actions, exec.trace),
            Err(e) => {
                tracing::error!(name: "tool_run_panicked", function_call_id = %fc, tool_name = %p.tool, panicked = e.is_panic(), "tool_run_panicked");
                let err = ToolError::new(
                    ErrorCode::ToolExecutionFailed,
                    "The tool failed unexpectedly. Tell the caller it cannot be done right now.",
                );
                (Outcome::failed(&p.tool, err), Vec::new(), None)
            }
        };
        if outcome.ok()
            && outcome.handoff.is_some()
            && self.handoffs >= self.deps.options.max_handoffs
        {
            tracing::warn!(name: "agent_handoff_refused_loop", handoffs = self.handoffs, "agent_handoff_refused_loop");
            outcome = Outcome::failed(
                &p.tool,
                ToolError::new(
                    ErrorCode::HandoffFailed,
                    "This call has been handed over too many times. Go on helping the caller yourself.",
                ),
            );
        }
        let interrupted = self.interrupted(&p.invocation);
        let mut c = Conclusion::new(
            p.invocation,
            p.tool.clone(),
            outcome,
            p.started,
            p.started_at,
        );
        c.interrupted = interrupted;
        c.async_completion = p.is_async;
        c.answer_first = self.deps.options.answer_before_journal
            && p.side_effect == SideEffect::Read
            && c.outcome.writes.is_empty()
            && c.outcome.handoff.is_none();
        c.actions = actions;
        c.trace = trace;
        c.max_context_bytes = p.max_context_bytes;
        let first_id = fc.to_owned();
        let answered = self.conclude(c).await;
        let (output, error) = (answered.output, answered.error);
        if let (None, Some(key)) = (error, p.dedupe_key) {
            let answered = Answered {
                function_call_id: first_id.clone(),
                output: output.clone(),
                expires: Instant::now() + p.dedupe_window,
            };
            self.dedupe.insert(key, answered);
        }
        for (inv, started, started_at) in p.followers {
            self.conclude_duplicate(
                inv,
                p.tool.clone(),
                &first_id,
                &output,
                error,
                started,
                started_at,
            )
            .await;
        }
    }

    fn interrupted(&self, inv: &Invocation) -> bool {
        inv.response_id
            .as_ref()
            .and_then(|r| self.responses.get(r))
            .is_some_and(|r| r.cancelled)
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
                p.invocation.response_id.as_deref() == Some(response_id)
                    && p.side_effect == SideEffect::Read
                    && !p.is_async
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &aborted {
            let Some(p) = self.pending.remove(id) else {
                continue;
            };
            p.abort.abort();
            metrics::gauge!("switchboard_pending_tools").decrement(1.0);
            tracing::info!(name: "tool_cancelled_for_response", response_id = %response_id, function_call_id = %id, tool_name = %p.tool, "tool_cancelled_for_response");
            let c = Conclusion::cancelled(
                p.invocation,
                &p.tool,
                p.started,
                p.started_at,
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
                p.invocation.response_id.as_deref() == Some(id)
                    || p.followers
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
                p.invocation,
                &p.tool,
                p.started,
                p.started_at,
                ENDED,
            ))
            .await;
            for (inv, started, started_at) in p.followers {
                self.conclude(Conclusion::cancelled(
                    inv, &p.tool, started, started_at, ENDED,
                ))
                .await;
            }
        }
        // Wait until every run has really stopped, so nothing acts for this call afterwards.
        for m in monitors {
            let _ = m.await;
        }
        if let Err(e) = self
            .deps
            .journal
            .append(&self.call_id, JournalEntry::Ended)
            .await
        {
            tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed");
        }
        tracing::info!(name: "tool_cancel_all_finished", remaining_tasks = self.pending.len(), "tool_cancel_all_finished");
    }

    #[allow(clippy::too_many_arguments)]
    async fn conclude_duplicate(
        &mut self,
        inv: Invocation,
        tool: String,
        first_id: &str,
        output: &str,
        error: Option<ErrorCode>,
        started: Instant,
        started_at: String,
    ) {
        let ok = error.is_none();
        let mut out: Value = serde_json::from_str(output).unwrap_or_else(|_| json!({"ok": ok}));
        if let Value::Object(m) = &mut out {
            m.insert("duplicate_of".into(), json!(first_id));
        }
        let fc = inv.function_call_id.clone();
        let result = ToolResult {
            function_call_id: fc,
            ok,
            error,
            output: out.to_string(),
        };
        // Nothing ran: no writes, no logs, no handoff; the answer is the first call's.
        let nothing = Outcome {
            tool: tool.clone(),
            error: None,
            message: None,
            data: Map::new(),
            writes: Vec::new(),
            handoff: None,
            logs: Vec::new(),
            applied: Default::default(),
        };
        let mut c = Conclusion::new(inv, tool, nothing, started, started_at);
        c.result_override = Some(result);
        c.duplicate_of = Some(first_id.to_owned());
        self.conclude(c).await;
    }

    /// Records an invocation's end, commits and journals it, and delivers its one answer.
    /// Returns the answer as delivered: a commit that was refused (a write that no longer fits,
    /// a context over its limit) or that could not be stored answers with an error instead, and
    /// then nothing of the tool's changes is applied, here or in the journal.
    async fn conclude(&mut self, mut c: Conclusion) -> ToolResult {
        // An answer is held until the journal has it when the call depends on it being durable
        // (its context changed, the agent changed, or a write tool's record guards against
        // running it twice). Where the door allows it, a read tool that changed nothing is
        // answered first: its answer does not wait behind the disk.
        if self.released {
            return self.settle(&c).0;
        }
        if c.answer_first {
            let (result, record) = self.settle(&c);
            self.account(&c, &result, record.clone());
            self.deliver(&c, result.clone()).await;
            match self.commit(&record, &c).await {
                Err(CommitError::Journal(e)) if e.is_fenced() => self.release(&e),
                Err(e) => {
                    tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed")
                }
                Ok(()) => {}
            }
            return result;
        }
        let (mut result, mut record) = self.settle(&c);
        match self.commit(&record, &c).await {
            Ok(()) => {}
            Err(CommitError::Journal(e)) if e.is_fenced() => {
                // Not answered here: the new owner resumes or reruns it from the journal.
                self.release(&e);
                return result;
            }
            Err(CommitError::Refused(refusal)) => {
                tracing::warn!(name: "context_commit_refused", tool_name = %c.tool, reason = %refusal, "context_commit_refused");
                c.outcome = refused_outcome(&c.outcome, &refusal);
                c.result_override = None;
                (result, record) = self.settle(&c);
                // The record of the refusal; the context stays as it is.
                match self.commit(&record, &c).await {
                    Err(CommitError::Journal(e)) if e.is_fenced() => {
                        self.release(&e);
                        return result;
                    }
                    Err(e) => {
                        tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed")
                    }
                    Ok(()) => {}
                }
            }
            Err(CommitError::Journal(e)) => {
                c.outcome = unsaved_outcome(&c.outcome, &e);
                c.result_override = None;
                (result, record) = self.settle(&c);
            }
        }
        self.account(&c, &result, record);
        self.deliver(&c, result.clone()).await;
        result
    }

    /// The answer and the record of a conclusion, secrets redacted.
    fn settle(&self, c: &Conclusion) -> (ToolResult, InvocationRecord) {
        let fc = &c.invocation.function_call_id;
        let mut result = c
            .result_override
            .clone()
            .unwrap_or_else(|| ToolResult::from_outcome(fc, &c.outcome));
        result.output = self.redactor.redact_json(&result.output);
        let logs = c
            .outcome
            .logs
            .iter()
            .map(|l| switchboard_core::result::LogEntry {
                message: self.redactor.redact(&l.message),
                ..l.clone()
            })
            .collect();
        let record = InvocationRecord {
            function_call_id: fc.clone(),
            tool: c.tool.clone(),
            arguments: self.redactor.redact_json(&c.invocation.arguments_json),
            ok: result.ok,
            error: result.error,
            output: result.output.clone(),
            latency_ms: c.started.elapsed().as_secs_f64() * 1000.0,
            started_at: c.started_at.clone(),
            finished_at: crate::now_rfc3339(),
            response_id: c.invocation.response_id.clone(),
            interrupted: c.interrupted,
            duplicate_of: c.duplicate_of.clone(),
            logs,
            trace: c
                .trace
                .as_ref()
                .and_then(|t| t.redacted(&self.redactor))
                .map(Box::new),
            trace_bytes: None,
        };
        let record = self.deps.options.records.bound(record);
        (result, record)
    }

    /// Counts the answer in the metrics and keeps its record.
    fn account(&mut self, c: &Conclusion, result: &ToolResult, record: InvocationRecord) {
        let tenant = self.deps.config.tenant_id.clone();
        let label = result.error.map_or("ok", |e| e.as_str());
        // A label names only what the tenant configured: a name the model made up is one
        // series, not one each.
        let tool_label = if c.unverified_tool {
            UNKNOWN_TOOL_LABEL.to_owned()
        } else {
            c.tool.clone()
        };
        metrics::counter!("switchboard_invocations_total", "tenant" => tenant.clone(), "tool" => tool_label.clone(), "outcome" => label).increment(1);
        metrics::histogram!("switchboard_invocation_duration_seconds", "tenant" => tenant.clone(), "tool" => tool_label).record(c.started.elapsed().as_secs_f64());
        if let Some(code) = result.error {
            metrics::counter!("switchboard_tool_errors_total", "tenant" => tenant, "code" => code.as_str()).increment(1);
        }
        self.records.push(record);
    }

    async fn deliver(&self, c: &Conclusion, result: ToolResult) {
        let delivery = Delivery {
            result,
            tool: c.tool.clone(),
            response_id: c.invocation.response_id.clone(),
            interrupted: c.interrupted,
            async_completion: c.async_completion,
            handoff: c.outcome.handoff.clone().map(|h| self.redact_handoff(h)),
            duplicate_of: c.duplicate_of.clone(),
            actions: c.actions.clone(),
        };
        self.deps.sink.deliver(delivery).await;
    }

    /// The handoff's words for the model, with the call's secrets replaced.
    fn redact_handoff(
        &self,
        mut h: switchboard_core::result::Handoff,
    ) -> switchboard_core::result::Handoff {
        h.reason = h.reason.map(|r| self.redactor.redact(&r));
        h.message = h.message.map(|m| self.redactor.redact(&m));
        h
    }

    /// Commits an invocation's writes and handoff, all or nothing, to this session's context
    /// and then, with its record, to the journal. A journal that fails is retried for
    /// `commit_retry`; if it still fails, this session's context stays as it was, as the
    /// journal has it.
    async fn commit(
        &mut self,
        record: &InvocationRecord,
        c: &Conclusion,
    ) -> Result<(), CommitError> {
        let writes = &c.outcome.writes;
        let handoff = c.outcome.handoff.as_ref().map(|h| h.agent.as_str());
        let next = apply_outcome(&self.ctx, &c.outcome, c.max_context_bytes)
            .map_err(CommitError::Refused)?;
        let handoffs = match handoff {
            Some(_) => self.handoffs.saturating_add(1),
            None => self.handoffs,
        };
        let entry = JournalEntry::Finished {
            record: Box::new(record.clone()),
            context: next.clone(),
            handoffs,
        };
        let journal = Arc::clone(&self.deps.journal);
        let call_id = self.call_id.clone();
        with_retry(self.deps.options.commit_retry, || {
            let append = journal.append(&call_id, entry.clone());
            async move { append.await.map_err(CommitError::from) }
        })
        .await?;
        let changed = next.is_some();
        if let Some(ctx) = next {
            self.ctx = ctx;
        }
        self.handoffs = handoffs;
        if let Some(agent) = handoff {
            tracing::info!(name: "agent_handoff", agent = %agent, handoffs = self.handoffs, "agent_handoff");
        }
        if changed {
            tracing::info!(name: "context_committed", writes = writes.len(), "context_committed");
        }
        Ok(())
    }

    fn snapshot(&self, ended: bool) -> SessionSnapshot {
        SessionSnapshot {
            call_id: self.call_id.clone(),
            context: self.ctx.clone(),
            records: self.records.to_vec(),
            pending: self.pending.keys().cloned().collect(),
            ended,
            restored: self.restored.clone(),
        }
    }
}

/// An invocation's end, on its way to the record, the journal and the sink.
struct Conclusion {
    invocation: Invocation,
    tool: String,
    outcome: Outcome,
    started: Instant,
    started_at: String,
    interrupted: bool,
    async_completion: bool,
    duplicate_of: Option<String>,
    actions: Vec<CallAction>,
    result_override: Option<ToolResult>,
    /// Deliver before journaling (see `conclude`).
    answer_first: bool,
    /// `tool` is a name from the model that the call does not have (metrics label it
    /// [`UNKNOWN_TOOL_LABEL`]).
    unverified_tool: bool,
    /// The tool's `max_context_bytes`, which its commit may not exceed.
    max_context_bytes: usize,
    /// What replaying the run needs, when it ran here from its start.
    trace: Option<Box<crate::replay::RunTrace>>,
}

impl Conclusion {
    /// An invocation answered `cancelled` without its run finishing (interrupted, or the call ended).
    fn cancelled(
        invocation: Invocation,
        tool: &str,
        started: Instant,
        started_at: String,
        message: &str,
    ) -> Self {
        let outcome = Outcome::failed(tool, ToolError::new(ErrorCode::Cancelled, message));
        let mut c = Conclusion::new(invocation, tool.to_owned(), outcome, started, started_at);
        c.interrupted = true;
        c
    }

    fn new(
        invocation: Invocation,
        tool: String,
        outcome: Outcome,
        started: Instant,
        started_at: String,
    ) -> Self {
        Conclusion {
            invocation,
            tool,
            outcome,
            started,
            started_at,
            interrupted: false,
            async_completion: false,
            duplicate_of: None,
            actions: Vec::new(),
            result_override: None,
            answer_first: false,
            unverified_tool: false,
            max_context_bytes: switchboard_core::Limits::default().max_context_bytes,
            trace: None,
        }
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

/// The metrics label of an invocation whose tool name is not one the call has.
pub const UNKNOWN_TOOL_LABEL: &str = "unknown";

/// Longest tool name a log line or record shows of a name the model sent unverified.
const SHOWN_NAME_BYTES: usize = 128;

/// A name from the model as logs and records show it: cut to [`SHOWN_NAME_BYTES`].
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= SHOWN_NAME_BYTES {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut cut = SHOWN_NAME_BYTES;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &name[..cut]))
}

/// JSON with object keys sorted at every level, so equal arguments give equal text.
fn canonical(v: &Value) -> Value {
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

/// The session's gate for a run: checkpoints it at each effect and holds terminal effects until
/// the response that asked for them completes.
struct SessionGate {
    call_id: String,
    invocation: Invocation,
    hold: bool,
    tx: mpsc::UnboundedSender<Cmd>,
    journal: Arc<dyn CallJournal>,
}

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
