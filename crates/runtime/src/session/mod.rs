//! The call session: one task per call that owns the call's context.
//!
//! Every door (the Realtime WebSocket, HTTP, MCP) hands function calls to a [`CallSession`]. It
//! ignores a `function_call_id` it has seen, runs tools that reach outside the call concurrently
//! in background tasks (bounded per call) and tools that only touch the call's own state at
//! once in its own task, commits each finished tool's writes to the context atomically, and
//! sends exactly one answer per function call to the [`OutputSink`], whatever happens: bad
//! arguments, an unknown tool, a timeout, a panic, an interruption, or the end of the call.
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
//!
//! This file holds the handle and the actor's state; `actor.rs` the actor's loop over commands,
//! `run.rs` a tool's run from its start to its settled answer, `runaway.rs` the runaway guards
//! (`loop_detected`, `already_done`), `conclude.rs` how a function call
//! ends (commit, journal, record, answer), `gate.rs` the checkpoint before each effect.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use switchboard_core::{CallInfo, Context, ErrorCode, Outcome, SideEffect, ToolError, ToolResult};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::{AbortHandle, JoinError};
use tracing::Instrument;

use crate::adaptive::Policy;
use crate::bookkeeping::{DedupeAnswers, DedupeKey, RecentRecords, Responses};
use crate::effects::{CallAction, TransferLedger};
use crate::executor::{CallConfig, Execution, Executor};
use crate::invocation::{Invocation, InvocationRecord, OutputSink};
use crate::journal::{CallJournal, Checkpoint, JournalEntry, JournalError};
use crate::records::RecordLimits;
use crate::redact::Redactor;
use crate::traces::{CallSpan, InvocationSpan, TraceParent};

mod actor;
mod conclude;
mod gate;
mod run;
mod runaway;

pub use runaway::MAX_REMEMBERED_CALLS;

/// How a session behaves; the door decides.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Tools of one call that reach outside it (effects, `async`) running at once; more wait
    /// their turn. A tool that only touches the call's state takes no slot: it never waits.
    pub max_concurrent_tools: usize,
    /// Tools of one call running or waiting for a slot, identical writes joined to them
    /// included; a function call past it is answered at once with `rate_limited` and not run.
    /// Default 64.
    pub max_pending_tools: usize,
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
    /// Open connections to the origins the agent's tools name when the call starts
    /// ([`crate::Executor::warm_upstreams`]). Off by default; the server turns it on.
    pub warm_upstreams: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            max_concurrent_tools: 16,
            max_pending_tools: 64,
            hold_terminal_effects: false,
            max_handoffs: 10,
            answer_before_journal: false,
            records: RecordLimits::default(),
            max_finished_responses: 1024,
            max_dedupe_answers: 256,
            commit_retry: Duration::from_secs(2),
            warm_upstreams: false,
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
    /// When the newest record the journal held was stored, by this process's monotonic clock,
    /// as the journal's own clock told its age when the call was restored here (a database's,
    /// which every node shares); `None` for a call started here, or a journal that cannot say.
    #[serde(skip)]
    pub newest_stored: Option<Instant>,
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
    /// A function call, when it arrived (its tool's deadline counts from then), and the
    /// caller's span when the door received one.
    Submit(
        Box<Invocation>,
        Instant,
        Option<Box<TraceParent>>,
        Option<Box<Policy>>,
    ),
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
        Self::start_traced(call, ctx, deps, None).await
    }

    /// [`CallSession::start_with_context`] for a call whose start request carried the
    /// caller's span (`traceparent`): the call's span is its child.
    pub async fn start_traced(
        call: CallInfo,
        ctx: Context,
        deps: SessionDeps,
        parent: Option<TraceParent>,
    ) -> Result<CallSession, JournalError> {
        if deps.options.warm_upstreams {
            // While the start is journaled: the connections are ready by the first tool call.
            deps.executor
                .warm_upstreams(&deps.config, ctx.active_agent());
        }
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
            (Vec::new(), None),
            deps,
            parent.as_ref(),
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
        let newest_stored = state
            .newest_record_age
            .and_then(|age| Instant::now().checked_sub(age));
        let session = Self::spawn(
            call_id.to_owned(),
            ctx,
            state.records,
            state.handoffs,
            (restored, newest_stored),
            deps,
            None,
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
        (restored, newest_stored): (Vec<String>, Option<Instant>),
        deps: SessionDeps,
        parent: Option<&TraceParent>,
    ) -> CallSession {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = Arc::clone(&deps.config);
        let redactor = call_redactor(&deps.config, &ctx);
        let runaway = runaway::Runaway::restore(&records, newest_stored, &deps.config);
        let records = RecentRecords::new(records, deps.options.records.records());
        let responses = Responses::new(deps.options.max_finished_responses);
        let dedupe = DedupeAnswers::new(deps.options.max_dedupe_answers);
        let call_span = deps
            .executor
            .traces()
            .call(&deps.config.tenant_id, &call_id, parent);
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
            runaway,
            released: false,
            restored,
            newest_stored,
            call_span,
            spans: HashMap::new(),
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
        self.submit_at(invocation, Instant::now());
    }

    /// [`CallSession::submit`] for a function call that arrived at `arrived` (a request that
    /// waited for its credential and its call first): its tool's deadline counts from then.
    pub fn submit_at(&self, invocation: Invocation, arrived: Instant) {
        self.submit_traced(invocation, arrived, None);
    }

    /// [`CallSession::submit_at`] for a function call whose request carried the caller's span
    /// (`traceparent`): the invocation's span is its child.
    pub fn submit_traced(
        &self,
        invocation: Invocation,
        arrived: Instant,
        parent: Option<TraceParent>,
    ) {
        let _ = self.tx.send(Cmd::Submit(
            Box::new(invocation),
            arrived,
            parent.map(Box::new),
            None,
        ));
    }

    /// [`CallSession::submit`] for a function call whose door acted on the adaptive policy
    /// already (it scheduled the filler by `policy`): the run follows the same decision, and its
    /// record keeps it.
    pub fn submit_decided(&self, invocation: Invocation, policy: Policy) {
        let _ = self.tx.send(Cmd::Submit(
            Box::new(invocation),
            Instant::now(),
            None,
            Some(Box::new(policy)),
        ));
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

/// A tool call running (or waiting its turn) in a task of its own.
struct Pending {
    running: Running,
    abort: AbortHandle,
    /// Finishes once the run's task has stopped, whether it ended or was aborted.
    monitor: tokio::task::JoinHandle<()>,
}

/// A tool call between its start and its answer: what answering it needs.
struct Running {
    invocation: Invocation,
    tool: String,
    side_effect: SideEffect,
    is_async: bool,
    started: Instant,
    started_at: String,
    dedupe_key: Option<DedupeKey>,
    /// Whether the journal held a claim of it before it ran (see `Actor::submit`).
    claimed: bool,
    /// How long this write's answer is kept for identical calls.
    dedupe_window: Duration,
    /// The tool's `max_context_bytes`, which its commit may not exceed.
    max_context_bytes: usize,
    /// The tool's `timeout`, counted from `started`.
    timeout: Duration,
    /// Identical write calls waiting for this one's result.
    followers: Vec<(Invocation, Instant, String)>,
    /// What the adaptive policy decided for it.
    policy: Option<Policy>,
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
    /// The runaway guards' memory of the call (see `runaway.rs`).
    runaway: runaway::Runaway,
    /// Another node owns the call now: the session stops (see [`Actor::release`]).
    released: bool,
    /// See [`SessionSnapshot::restored`].
    restored: Vec<String>,
    /// See [`SessionSnapshot::newest_stored`].
    newest_stored: Option<Instant>,
    /// The call's span (empty when traces are off).
    call_span: CallSpan,
    /// The spans of function calls between their arrival and their answer, by function call
    /// id (empty when traces are off): each is ended, and removed, when its call is answered.
    spans: HashMap<String, InvocationSpan>,
}

impl Actor {
    /// Opens the span of a function call that arrived at `arrived` (nothing when traces are off).
    fn open_span(&mut self, inv: &Invocation, parent: Option<&TraceParent>, arrived: Instant) {
        let traces = self.deps.executor.traces();
        if !traces.is_on() {
            return;
        }
        let span = traces.invocation(
            &self.call_span,
            &self.deps.config.tenant_id,
            inv,
            &shown(&inv.name),
            parent,
            arrived,
        );
        self.spans.insert(inv.function_call_id.clone(), span);
    }

    /// The span of a function call about to run: the one opened at its arrival, else (a run
    /// resumed from a checkpoint) one opened now.
    fn run_span(&mut self, inv: &Invocation, started: Instant) -> InvocationSpan {
        if !self.spans.contains_key(&inv.function_call_id) {
            self.open_span(inv, None, started);
        }
        self.spans
            .get(&inv.function_call_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Ends the span of an answered function call with what its record says.
    fn close_span(&mut self, record: &InvocationRecord) {
        if let Some(span) = self.spans.remove(&record.function_call_id) {
            span.end(record, self.deps.config.tool_facts(&record.tool));
        }
    }
}

/// The secrets of every tool the call may use, and the user's tokens.
fn call_redactor(config: &CallConfig, ctx: &Context) -> Redactor {
    Redactor::for_call(config, &ctx.user)
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
    /// Whether its journal entry may be stored late when the database does not take it in
    /// time. Not for a run of a tool without effects: its record is what fences it (a node
    /// cut off from the call must not answer it), so it is answered only once stored.
    deferrable: bool,
    /// The tool's deadline (its `timeout` from the function call's arrival): an entry that may
    /// not be stored late waits for the database until then, and `commit_retry` more.
    deadline: Option<Instant>,
    /// What the adaptive policy decided for its run.
    policy: Option<Policy>,
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
            deferrable: true,
            deadline: None,
            policy: None,
        }
    }
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

/// The session's gate for a run: checkpoints it at each effect and holds terminal effects until
/// the response that asked for them completes.
struct SessionGate {
    call_id: String,
    invocation: Invocation,
    hold: bool,
    tx: mpsc::UnboundedSender<Cmd>,
    journal: Arc<dyn CallJournal>,
}
