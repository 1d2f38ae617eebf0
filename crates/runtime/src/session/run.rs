//! A tool's run, from its start to the moment its answer is settled: in the session's own
//! task for a tool that cannot reach outside the call, in a task of its own (with a monitor
//! that reports how it ended) for every other.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::context::FutureExt as _;
use serde_json::json;
use switchboard_core::{
    EffectRequest, ErrorCode, Outcome, SideEffect, Suspended, Tool, ToolError, ToolResult,
};
use tokio::task::JoinError;
use tracing::Instrument;

use crate::adaptive::Policy;
use crate::bookkeeping::{Answered, DedupeKey};
use crate::executor::{Execution, FAILED_UNEXPECTEDLY, ToolEntry};
use crate::invocation::{Delivery, Invocation};

use super::{Actor, Cmd, Conclusion, Pending, Running, SessionGate};

/// How a scheduled run starts.
pub(super) struct Run {
    /// A write's key for identical calls in its dedupe window.
    pub(super) dedupe_key: Option<DedupeKey>,
    /// The effect and suspended run of a checkpoint, when resumed from one.
    pub(super) resume_from: Option<(EffectRequest, Suspended)>,
    /// Whether the journal holds a claim or checkpoint of it; if not, its record is its claim.
    pub(super) claimed: bool,
    /// What the adaptive policy decided for it (none for a run resumed at an effect).
    pub(super) policy: Option<Policy>,
}

/// A run that stopped without ending: its tool panicked, or its task was stopped.
struct Broken {
    panicked: bool,
}

impl Actor {
    /// Runs a tool that cannot reach outside the call (no effect, not async) here, in the
    /// session's task, and answers it: such a run only reads and changes the call's own
    /// state in memory and never waits, so a task of its own would cost two spawns, a monitor
    /// and a message back for nothing. Nothing else of the call happens while it runs, so no
    /// interruption or identical call can meet it half-way; a panic is caught and answered as
    /// the monitor of a task would.
    pub(super) async fn run_in_memory(
        &mut self,
        inv: Invocation,
        entry: &ToolEntry,
        dedupe_key: Option<DedupeKey>,
        started: Instant,
        started_at: String,
    ) {
        let tool = &entry.tool;
        log_scheduled(&inv, tool, self.pending.len());
        let span = tracing::info_span!("invocation", function_call_id = %inv.function_call_id, tool = %tool.name());
        let result = span.in_scope(|| {
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.deps
                    .executor
                    .execute_in_memory(&self.deps.config, entry, &self.ctx, &inv)
            }))
        });
        let running = Running::of(inv, tool, dedupe_key, false, started, started_at);
        let fc = running.invocation.function_call_id.clone();
        self.answer_run(&fc, running, result.map_err(|_| Broken { panicked: true }))
            .await;
    }

    /// Starts a tool's run in its own task, with a monitor that reports how it ended.
    pub(super) async fn schedule(
        &mut self,
        inv: Invocation,
        tool: Arc<Tool>,
        run: Run,
        started: Instant,
        started_at: String,
    ) {
        let Run {
            dedupe_key,
            resume_from,
            claimed,
            policy,
        } = run;
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
        let run_cx = self.run_span(&inv, started).context_for_run(&self.redactor);
        let span = tracing::info_span!("invocation", function_call_id = %fc, tool = %tool.name());
        // The deadline decided when the function call came: the claim waited within it, the
        // record keeps it, and the run ends by it.
        let deadline = policy.as_ref().map(|p| Duration::from_millis(p.timeout_ms));
        let run = async move {
            // The semaphore is never closed, so acquiring only waits for a free slot.
            let _permit = semaphore.acquire_owned().await;
            match resume_from {
                // The deadline runs from the function call's arrival: its claim and its
                // wait for a slot are time the caller waits too.
                None => {
                    executor
                        .execute_from(
                            started, deadline, &config, &ctx, &run_inv, &gate, &transfers,
                        )
                        .await
                }
                Some((request, suspended)) => {
                    executor
                        .resume(&config, &run_inv, request, suspended, &gate, &transfers)
                        .await
                }
            }
        }
        .instrument(span);
        // The invocation's span is the current OpenTelemetry context while the run's task runs,
        // so its effects' spans are its children.
        let task = match run_cx {
            Some(cx) => tokio::spawn(run.with_context(cx)),
            None => tokio::spawn(run),
        };
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
        let background = policy.as_ref().is_some_and(|p| p.background);
        let is_async = tool.is_async() || background;
        let mut running = Running::of(inv.clone(), &tool, dedupe_key, claimed, started, started_at);
        running.is_async = is_async;
        if let Some(p) = &policy {
            running.timeout = Duration::from_millis(p.timeout_ms);
        }
        running.policy = policy;
        self.pending.insert(
            fc.clone(),
            Pending {
                running,
                abort,
                monitor,
            },
        );
        metrics::gauge!("switchboard_pending_tools").increment(1.0);
        log_scheduled(&inv, &tool, self.pending.len());
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

    /// A run's task ended: answers it, unless it was answered already (aborted by an
    /// interruption or by the call's end).
    pub(super) async fn finished(&mut self, fc: &str, result: Result<Execution, JoinError>) {
        let Some(p) = self.pending.remove(fc) else {
            return;
        };
        metrics::gauge!("switchboard_pending_tools").decrement(1.0);
        let result = result.map_err(|e| Broken {
            panicked: e.is_panic(),
        });
        self.answer_run(fc, p.running, result).await;
    }

    /// Answers a run that ended (commit, journal, record, answer), then the identical calls
    /// that waited for it.
    async fn answer_run(&mut self, fc: &str, p: Running, result: Result<Execution, Broken>) {
        let (mut outcome, actions, trace) = match result {
            Ok(exec) => (exec.outcome, exec.call_actions, exec.trace),
            Err(e) => {
                tracing::error!(name: "tool_run_panicked", function_call_id = %fc, tool_name = %p.tool, panicked = e.panicked, "tool_run_panicked");
                let err = ToolError::new(ErrorCode::ToolExecutionFailed, FAILED_UNEXPECTEDLY);
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
        // An unclaimed run's record is what fences it: answered only once that has landed.
        c.answer_first = self.deps.options.answer_before_journal
            && p.claimed
            && p.side_effect == SideEffect::Read
            && c.outcome.writes.is_empty()
            && c.outcome.handoff.is_none();
        c.actions = actions;
        c.trace = trace;
        c.max_context_bytes = p.max_context_bytes;
        c.deferrable = p.claimed;
        c.deadline = Some(p.started + p.timeout);
        c.policy = p.policy;
        if !c.interrupted && c.duplicate_of.is_none() {
            // What the caller waited for this tool: the adaptive policy's input.
            self.deps.config.latency.observe(
                &self.deps.config.tenant_id,
                &c.tool,
                p.started.elapsed(),
            );
        }
        let first_id = fc.to_owned();
        let answered = self.conclude(c).await;
        if p.side_effect == SideEffect::Terminal && answered.ok && !self.released {
            self.runaway.terminal_done(&first_id, &p.tool);
        }
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
}

/// One line at `info` per tool call is its end (`tool_executor_execute_finished`); the steps
/// before it, this one included, are `debug`, so a busy node's log is not three lines per call.
fn log_scheduled(inv: &Invocation, tool: &Tool, pending_tool_calls: usize) {
    tracing::debug!(
        name: "tool_invocation_scheduled",
        function_call_id = %inv.function_call_id,
        tool_name = %tool.name(),
        response_id = inv.response_id.as_deref().unwrap_or_default(),
        side_effect = ?tool.side_effect(),
        pending_tool_calls,
        "tool_invocation_scheduled"
    );
}

impl Running {
    fn of(
        invocation: Invocation,
        tool: &Tool,
        dedupe_key: Option<DedupeKey>,
        claimed: bool,
        started: Instant,
        started_at: String,
    ) -> Running {
        Running {
            invocation,
            tool: tool.name().to_owned(),
            side_effect: tool.side_effect(),
            is_async: tool.is_async(),
            started,
            started_at,
            dedupe_key,
            claimed,
            dedupe_window: Duration::from_secs(tool.dedupe_window_s()),
            max_context_bytes: tool.limits().max_context_bytes,
            timeout: Duration::from_millis(tool.timeout_ms()),
            followers: Vec::new(),
            policy: None,
        }
    }
}
