//! How a function call ends: its writes committed and journaled, its record kept, its one
//! answer delivered.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use switchboard_core::{ErrorCode, Outcome, ToolResult};

use crate::commit::{CommitError, apply_outcome, refused_outcome, retry_until, unsaved_outcome};
use crate::invocation::{Delivery, Invocation, InvocationRecord};
use crate::journal::JournalEntry;

use super::{Actor, Conclusion, SessionSnapshot, UNKNOWN_TOOL_LABEL};

impl Actor {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn conclude_duplicate(
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
    pub(super) async fn conclude(&mut self, mut c: Conclusion) -> ToolResult {
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
            match self.commit(&record, &mut c).await {
                Err(CommitError::Journal(e)) if e.is_fenced() => self.release(&e),
                Err(e) => {
                    tracing::error!(name: "journal_write_failed", error = %e, "journal_write_failed")
                }
                Ok(()) => {}
            }
            return result;
        }
        let (mut result, mut record) = self.settle(&c);
        match self.commit(&record, &mut c).await {
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
                match self.commit(&record, &mut c).await {
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
                // The record of the answer given (it changed nothing), stored with the call's
                // other waiting entries once the database answers. Should the given-up write
                // land after all, it is recorded first and this one is ignored.
                let entry = JournalEntry::Finished {
                    record: Box::new(record.clone()),
                    context: None,
                    handoffs: self.handoffs,
                };
                if let Err(full) = self.deps.journal.defer(&self.call_id, entry) {
                    tracing::error!(name: "journal_write_failed", error = %e, reason = %full, "journal_write_failed");
                }
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
            policy: c.policy.clone().map(Box::new),
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
        self.close_span(&record);
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
    /// `commit_retry`; if it still fails, a run that may have reached an effect
    /// (`Conclusion::deferrable`) is handed to the journal to store later and counts as
    /// committed; any other leaves this session's context as it was, as the journal has it.
    async fn commit(
        &mut self,
        record: &InvocationRecord,
        c: &mut Conclusion,
    ) -> Result<(), CommitError> {
        let writes = c.outcome.writes.len();
        let next = apply_outcome(&self.ctx, &mut c.outcome, c.max_context_bytes)
            .map_err(CommitError::Refused)?;
        let handoff = c.outcome.handoff.as_ref().map(|h| h.agent.as_str());
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
        // Failures are retried for `commit_retry`. An entry that may be stored late then waits
        // in the outbox; one that may not lets an attempt still under way (a slow database) go
        // on as long as its answer may take: the tool's deadline, then `commit_retry` more.
        let retry = self.deps.options.commit_retry;
        let errors_until = Instant::now() + retry;
        let until = match c.deadline.filter(|_| !c.deferrable) {
            Some(deadline) => deadline.max(Instant::now()) + retry,
            None => errors_until,
        };
        let stored = retry_until(errors_until, until, || {
            let append = journal.append(&call_id, entry.clone());
            async move { append.await.map_err(CommitError::from) }
        })
        .await;
        match stored {
            Ok(()) => {}
            // The run may have changed the world: its entry waits on this node and is stored
            // once the database answers; the call goes on as if it were (see `outbox`).
            Err(CommitError::Journal(e)) if !e.is_fenced() && c.deferrable => {
                let function_call_id = &c.invocation.function_call_id;
                match journal.defer(&call_id, entry) {
                    Ok(()) => {
                        tracing::warn!(name: "journal_commit_deferred", function_call_id = %function_call_id, error = %e, "journal_commit_deferred")
                    }
                    // The node keeps as many as it may: the answer is still the run's, and the
                    // call's next stored commit carries its changes; its record is lost.
                    Err(full) => {
                        tracing::error!(name: "journal_commit_dropped", function_call_id = %function_call_id, error = %e, reason = %full, "journal_commit_dropped")
                    }
                }
            }
            Err(e) => return Err(e),
        }
        let changed = next.is_some();
        if let Some(ctx) = next {
            self.ctx = ctx;
        }
        self.handoffs = handoffs;
        if let Some(agent) = handoff {
            tracing::info!(name: "agent_handoff", agent = %agent, handoffs = self.handoffs, "agent_handoff");
        }
        if changed {
            tracing::debug!(name: "context_committed", writes, "context_committed");
        }
        Ok(())
    }

    pub(super) fn snapshot(&self, ended: bool) -> SessionSnapshot {
        SessionSnapshot {
            call_id: self.call_id.clone(),
            context: self.ctx.clone(),
            records: self.records.to_vec(),
            pending: self.pending.keys().cloned().collect(),
            ended,
            restored: self.restored.clone(),
            newest_stored: self.newest_stored,
        }
    }
}
