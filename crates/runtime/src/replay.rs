//! Replay: a recorded invocation run again against another definition of its tool, with the
//! recorded effect outcomes, performing nothing.
//!
//! The interpreter is deterministic given its input, its context and its effect outcomes, so a
//! record that keeps those ([`RunTrace`]) can be run again against a draft: each effect the
//! draft asks for is matched with a recorded effect of the same request (what it sends, not
//! its timeouts or idempotency key) and answered with that effect's recorded outcome. A request
//! the recording has not is *diverged*: it is answered with a failure, never performed, and
//! reported. [`replay`] says what changed: the model's output, the context writes, the effects.
//!
//! Traces are redacted as records are (the call's secrets become `[redacted]`, and every string
//! of the agent tool's sensitive config too), so a replay renders `[redacted]` where the
//! recording did and a replay never sees or shows a secret.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::context::Write;
use switchboard_core::{
    Context, EffectOutcome, EffectRequest, ErrorCode, Outcome, RunInput, Tool, ToolError,
    run_to_end,
};

use crate::invocation::InvocationRecord;
use crate::redact::{REDACTED, Redactor};

/// What replaying an invocation needs, kept with its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTrace {
    /// The run's input: the agent tool's config, its sensitive config with every string
    /// replaced by `[redacted]`, the agents, the transfer destinations and the time it started.
    pub input: RunInput,
    /// The call's context as the tool saw it when it started.
    pub context: Context,
    /// Each effect the run asked for, in order, with what came back.
    pub effects: Vec<EffectExchange>,
    /// The context writes the run produced.
    #[serde(default)]
    pub writes: Vec<Write>,
}

/// One effect of a recorded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectExchange {
    pub request: EffectRequest,
    pub outcome: EffectOutcome,
    /// Answered from the call's cache of an identical earlier request (`cache_ttl_s`), not
    /// performed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

impl RunTrace {
    /// The trace of a run that started with `input` on `context`, before redaction.
    pub fn new(input: &RunInput, context: &Context) -> Self {
        let mut input = input.clone();
        input.secrets = Arc::new(mask(&input.secrets));
        RunTrace {
            input,
            context: context.clone(),
            effects: Vec::new(),
            writes: Vec::new(),
        }
    }

    /// The trace with the call's secrets replaced, as values, everywhere in it.
    pub fn redacted(&self, redactor: &Redactor) -> Option<RunTrace> {
        if redactor.is_empty() {
            return Some(self.clone());
        }
        let mut v = serde_json::to_value(self).ok()?;
        redactor.redact_value(&mut v);
        serde_json::from_value(v).ok()
    }
}

/// Every string of `v` replaced by `[redacted]`, its shape kept: a replay's templates find the
/// sensitive config's fields, and render `[redacted]` where the recorded run rendered a secret.
fn mask(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::String(REDACTED.to_owned()),
        Value::Array(a) => Value::Array(a.iter().map(mask).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), mask(x))).collect()),
        other => other.clone(),
    }
}

/// How a replayed invocation compares with its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Same output, same writes, same effects.
    Unchanged,
    /// Something differs, and it passed (or failed) as before.
    Changed,
    /// It succeeded when recorded and fails now.
    NewlyFailing,
    /// It failed when recorded and succeeds now.
    NewlyPassing,
    /// The record cannot be replayed (see `reason`).
    Skipped,
}

/// One effect the replay asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayedEffect {
    pub request: EffectRequest,
    /// `recorded`: the recording has this request and its outcome was reused; `diverged`: it
    /// has not, so nothing answered it but a failure.
    pub status: EffectStatus,
}

/// Whether a replayed effect was found in the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    Recorded,
    Diverged,
}

/// One recorded invocation, replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayedInvocation {
    pub call_id: String,
    pub function_call_id: String,
    pub verdict: Verdict,
    /// Why it was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The arguments, as recorded (redacted).
    pub arguments: Value,
    pub recorded_ok: bool,
    pub replayed_ok: bool,
    /// The model's output when recorded, and now.
    pub recorded_output: Value,
    pub replayed_output: Value,
    pub output_changed: bool,
    pub recorded_writes: Vec<Write>,
    pub replayed_writes: Vec<Write>,
    pub writes_changed: bool,
    /// The effects the replay asked for, in order.
    pub effects: Vec<ReplayedEffect>,
    /// Recorded effects the replay did not ask for.
    pub effects_not_requested: Vec<EffectRequest>,
    pub effects_changed: bool,
}

impl ReplayedInvocation {
    /// The invocation with `redactor`'s secrets replaced in every part of it. Records are
    /// redacted when they are kept; this is for reading back those kept before a secret (or a
    /// form of it) was known. A part that no longer reads as its type once redacted is dropped,
    /// and `reason` says so.
    pub fn redacted(self, redactor: &Redactor) -> ReplayedInvocation {
        let Ok(mut v) = serde_json::to_value(&self) else {
            return self;
        };
        if !redactor.redact_value(&mut v) {
            return self;
        }
        if let Ok(r) = serde_json::from_value::<ReplayedInvocation>(v.clone()) {
            return r;
        }
        let take = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
        ReplayedInvocation {
            call_id: redactor.redact(&self.call_id),
            function_call_id: redactor.redact(&self.function_call_id),
            reason: Some("parts of this invocation held a secret and are not shown".to_owned()),
            arguments: take("arguments"),
            recorded_output: take("recorded_output"),
            replayed_output: take("replayed_output"),
            recorded_writes: Vec::new(),
            replayed_writes: Vec::new(),
            effects: Vec::new(),
            effects_not_requested: Vec::new(),
            ..self
        }
    }
}

/// How many replayed invocations fell in each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySummary {
    pub total: usize,
    pub unchanged: usize,
    pub changed: usize,
    pub newly_failing: usize,
    pub newly_passing: usize,
    pub skipped: usize,
}

impl ReplaySummary {
    /// The summary of a list of replayed invocations.
    pub fn of(runs: &[ReplayedInvocation]) -> Self {
        let mut s = ReplaySummary {
            total: runs.len(),
            ..Default::default()
        };
        for r in runs {
            match r.verdict {
                Verdict::Unchanged => s.unchanged += 1,
                Verdict::Changed => s.changed += 1,
                Verdict::NewlyFailing => s.newly_failing += 1,
                Verdict::NewlyPassing => s.newly_passing += 1,
                Verdict::Skipped => s.skipped += 1,
            }
        }
        s
    }
}

/// Replays one recorded invocation of call `call_id` against `tool`. Performs nothing.
pub fn replay(tool: &Arc<Tool>, call_id: &str, record: &InvocationRecord) -> ReplayedInvocation {
    let arguments = parse_or_text(&record.arguments);
    let recorded_output = parse_or_text(&record.output);
    let skipped = |reason: String| ReplayedInvocation {
        call_id: call_id.to_owned(),
        function_call_id: record.function_call_id.clone(),
        verdict: Verdict::Skipped,
        reason: Some(reason),
        arguments: arguments.clone(),
        recorded_ok: record.ok,
        replayed_ok: record.ok,
        recorded_output: recorded_output.clone(),
        replayed_output: Value::Null,
        output_changed: false,
        recorded_writes: Vec::new(),
        replayed_writes: Vec::new(),
        writes_changed: false,
        effects: Vec::new(),
        effects_not_requested: Vec::new(),
        effects_changed: false,
    };
    if let Some(first) = &record.duplicate_of {
        return skipped(format!(
            "it repeated function call `{first}` and was answered from it; replay that one"
        ));
    }
    let Some(trace) = &record.trace else {
        let why = match record.trace_bytes {
            Some(n) => format!(
                "its replay trace took {n} bytes, over max_record_field_bytes; raise that limit (serve --limits) to replay such calls"
            ),
            None => "it was recorded without a replay trace (before replay was recorded, or resumed after a restart)".to_owned(),
        };
        return skipped(why);
    };
    if is_truncated(&arguments) {
        return skipped(
            "its arguments were over max_record_field_bytes and were not kept whole".to_owned(),
        );
    }

    let mut used = vec![false; trace.effects.len()];
    let mut effects = Vec::new();
    let outcome: Outcome = run_to_end(
        tool,
        trace.input.clone(),
        &record.arguments,
        &trace.context,
        |request| {
            let wanted = comparable(request);
            let found = trace
                .effects
                .iter()
                .enumerate()
                .find(|(i, e)| !used[*i] && comparable(&e.request) == wanted);
            match found {
                Some((i, e)) => {
                    used[i] = true;
                    effects.push(ReplayedEffect {
                        request: request.clone(),
                        status: EffectStatus::Recorded,
                    });
                    e.outcome.clone()
                }
                None => {
                    effects.push(ReplayedEffect {
                        request: request.clone(),
                        status: EffectStatus::Diverged,
                    });
                    EffectOutcome::Failed(ToolError::new(
                        ErrorCode::UpstreamUnavailable,
                        "replay: the recorded call made no such request, so it was not answered (nothing is performed in a replay)",
                    ))
                }
            }
        },
    );
    let effects_not_requested: Vec<EffectRequest> = trace
        .effects
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| e.request.clone())
        .collect();
    let replayed_output = outcome.output();
    let output_changed = replayed_output != recorded_output;
    let writes_changed = outcome.writes != trace.writes;
    let effects_changed = !effects_not_requested.is_empty()
        || effects.iter().any(|e| e.status == EffectStatus::Diverged);
    let replayed_ok = outcome.ok();
    let verdict = match (record.ok, replayed_ok) {
        (true, false) => Verdict::NewlyFailing,
        (false, true) => Verdict::NewlyPassing,
        _ if output_changed || writes_changed || effects_changed => Verdict::Changed,
        _ => Verdict::Unchanged,
    };
    ReplayedInvocation {
        call_id: call_id.to_owned(),
        function_call_id: record.function_call_id.clone(),
        verdict,
        reason: None,
        arguments,
        recorded_ok: record.ok,
        replayed_ok,
        recorded_output,
        replayed_output,
        output_changed,
        recorded_writes: trace.writes.clone(),
        replayed_writes: outcome.writes,
        writes_changed,
        effects,
        effects_not_requested,
        effects_changed,
    }
}

fn parse_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn is_truncated(v: &Value) -> bool {
    v.get("truncated") == Some(&Value::Bool(true)) && v.get("preview").is_some()
}

/// What a request sends, for matching a replay's request with a recorded one: its timeouts,
/// retries, bounds and idempotency key (which holds the action's index) are left out, so a
/// draft that only adds an action or changes a timeout still meets its recorded effects.
pub(crate) fn comparable(request: &EffectRequest) -> Value {
    let mut v = serde_json::to_value(request).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        for k in [
            "idempotency_key",
            "timeout_ms",
            "retry_count",
            "retry_delay_ms",
            "max_body_bytes",
            "max_json_depth",
        ] {
            m.remove(k);
        }
    }
    v
}
