//! How a finished tool's changes land on the call's context: all together or not at all.
//!
//! Every path that changes a call's context — a tool's writes, `on_failure`'s writes, a
//! handoff — goes through [`apply_all`], against the context as it is at commit time (which
//! other tools may have changed since the run read it). A write that no longer fits (another
//! tool made `profile` a string, this one sets `profile.name`) or a context grown past
//! `max_context_bytes` refuses the whole commit: nothing is applied, and the session answers the
//! tool with an error naming the path or the size. Appends are operations, so two tools
//! appending to one list both land.
//!
//! [`with_retry`] retries a journal write that failed (a database that is briefly unavailable)
//! with backoff, for a bounded time.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_core::context::{Write, WriteError};
use switchboard_core::{Context, ErrorCode, Outcome, ToolError};

use crate::journal::JournalError;

/// Why a commit's changes cannot land; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A write no longer fits the context as it is now.
    #[error("{0}")]
    Conflict(WriteError),
    /// The context would grow past the limit.
    #[error(
        "the call's context would hold about {size} bytes, over the limit of {limit} (max_context_bytes)"
    )]
    TooLarge { size: usize, limit: usize },
}

/// Commits a finished run onto `ctx`, as [`apply_all`] does with its writes and handoff. When
/// `ctx` is still the context the run started from (no other tool committed meanwhile), the
/// run's own copy, which already holds the writes the run read back, is the starting point and
/// only the rest are applied: the same context, without copying and applying those again.
///
/// The writes are taken out of `outcome` and their values moved into the new context rather
/// than copied: a commit is their last use (the journal keeps the context, not the writes). A
/// refused commit leaves `outcome` without writes; its caller answers with
/// [`refused_outcome`] instead.
pub fn apply_outcome(
    ctx: &Context,
    outcome: &mut Outcome,
    limit: usize,
) -> Result<Option<Context>, Refusal> {
    let writes = std::mem::take(&mut outcome.writes);
    let handoff = outcome.handoff.as_ref().map(|h| h.agent.as_str());
    if writes.is_empty() && handoff.is_none() {
        return Ok(None);
    }
    let (mut next, holds, bound) = match outcome.applied.onto(ctx) {
        Some(o) if o.holds <= writes.len() => (o.context.clone(), o.holds, Some(o.size_bound)),
        _ => (ctx.clone(), 0, None),
    };
    // A context the run bounds within the limit is not measured again.
    let measure = !writes.is_empty() && bound.is_none_or(|b| b > limit);
    for w in writes.into_iter().skip(holds) {
        next.apply_owned(w).map_err(Refusal::Conflict)?;
    }
    finish(ctx, next, handoff, measure, limit)
}

/// Applies `writes` and `handoff` to a copy of `ctx`, all or nothing: `Ok(Some(new))` when the
/// context changed, `Ok(None)` when there was nothing to change. A context may not grow past
/// `limit` (one already over it may still shrink).
pub fn apply_all(
    ctx: &Context,
    writes: &[Write],
    handoff: Option<&str>,
    limit: usize,
) -> Result<Option<Context>, Refusal> {
    if writes.is_empty() && handoff.is_none() {
        return Ok(None);
    }
    let mut next = ctx.clone();
    for w in writes {
        next.apply(w).map_err(Refusal::Conflict)?;
    }
    finish(ctx, next, handoff, !writes.is_empty(), limit)
}

/// The handoff and the size check (when `measure`) every commit ends with.
fn finish(
    ctx: &Context,
    mut next: Context,
    handoff: Option<&str>,
    measure: bool,
    limit: usize,
) -> Result<Option<Context>, Refusal> {
    if let Some(agent) = handoff {
        next.set_active_agent(agent);
    }
    if measure {
        let size = next.approx_size();
        if size > limit && size > ctx.approx_size() {
            return Err(Refusal::TooLarge { size, limit });
        }
    }
    Ok(Some(next))
}

/// The outcome a refused commit answers with: an error naming what did not fit, no writes, no
/// handoff. A run that had failed already keeps its first error in the message.
pub fn refused_outcome(outcome: &Outcome, refusal: &Refusal) -> Outcome {
    let tool = &outcome.tool;
    let (why, details) = match refusal {
        Refusal::Conflict(e) => (
            format!(
                "cannot write {}: {} (another tool changed the call's context meanwhile)",
                e.path, e.reason
            ),
            json!({"path": e.path, "reason": e.reason}),
        ),
        Refusal::TooLarge { size, limit } => (
            refusal.to_string(),
            json!({"context_bytes": size, "limit": limit}),
        ),
    };
    let fix = match refusal {
        Refusal::Conflict(_) => "Check the call's current state and try again.",
        Refusal::TooLarge { .. } => {
            "Keep less in the call's context (delete what the call no longer needs)."
        }
    };
    let message = match &outcome.error {
        None => format!("{tool}: its changes were not saved: {why}. Nothing was changed. {fix}"),
        Some(first) => format!(
            "{tool} failed ({}), and its on_failure changes were not saved either: {why}. Nothing was changed.",
            first.message
        ),
    };
    let mut logs = outcome.logs.clone();
    logs.push(switchboard_core::result::LogEntry {
        level: switchboard_core::result::LogLevel::Error,
        message: format!("nothing was committed: {why}"),
        action: "".into(),
    });
    Outcome {
        logs,
        ..Outcome::failed(
            tool,
            ToolError::new(ErrorCode::ToolExecutionFailed, message).with_details(details),
        )
    }
}

/// The outcome of a tool whose commit could not be stored: nothing changed — or, when the
/// database never answered (the write may still land), not known to have.
pub fn unsaved_outcome(outcome: &Outcome, error: &JournalError) -> Outcome {
    let tool = &outcome.tool;
    let mut logs = outcome.logs.clone();
    let (logged, message, saved) = if error.is_unanswered() {
        (
            format!("not known to be committed: {error}"),
            format!(
                "{tool}: the call's storage did not answer in time, so it is not known whether this was saved. Tell the caller it cannot be confirmed right now, and do not repeat it unasked."
            ),
            "unknown",
        )
    } else {
        (
            format!("nothing was committed: {error}"),
            format!(
                "{tool}: its result could not be saved (the call's storage did not answer), so nothing was changed. Tell the caller it cannot be done right now."
            ),
            "no",
        )
    };
    logs.push(switchboard_core::result::LogEntry {
        level: switchboard_core::result::LogLevel::Error,
        message: logged,
        action: "".into(),
    });
    Outcome {
        logs,
        ..Outcome::failed(
            tool,
            ToolError::new(ErrorCode::ToolExecutionFailed, message)
                .with_details(json!({"saved": saved})),
        )
    }
}

/// Runs `attempt` until it succeeds, returns a refusal, or `budget` is spent, sleeping with
/// exponential backoff (and jitter) between journal failures. The last failure is returned.
/// See [`retry_until`].
pub async fn with_retry<T, F, Fut>(budget: Duration, attempt: F) -> Result<T, CommitError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CommitError>>,
{
    let until = Instant::now() + budget;
    retry_until(until, until, attempt).await
}

/// [`with_retry`] with two bounds: failures are retried until `errors_until`, and an attempt
/// still waiting for the database may go on until `until` (not before `errors_until`). A slow
/// database is waited for that long; one that does not answer at all (cut off, not refusing)
/// would hold a statement until TCP gives up, minutes later, so an attempt still waiting at
/// `until` is dropped. A dropped attempt may still land afterwards, so when one was dropped and
/// none succeeded the failure is [`JournalError::Unanswered`]: whether it was stored is not
/// known. The journal's writes are idempotent (a function call is recorded once, a claim or
/// checkpoint never lands after its record), so writing it again later is safe.
pub async fn retry_until<T, F, Fut>(
    errors_until: Instant,
    until: Instant,
    mut attempt: F,
) -> Result<T, CommitError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CommitError>>,
{
    let started = Instant::now();
    let mut delay = Duration::from_millis(50);
    let mut tries = 0u32;
    let mut dropped = false;
    let until = until.max(errors_until);
    loop {
        tries += 1;
        let left = until.saturating_duration_since(Instant::now());
        let answered = match tokio::time::timeout(left, attempt()).await {
            Ok(answered) => answered,
            Err(_) => {
                dropped = true;
                Err(CommitError::Journal(JournalError::Unanswered(format!(
                    "the database did not answer within {} ms",
                    started.elapsed().as_millis()
                ))))
            }
        };
        match answered {
            Err(CommitError::Journal(e)) if !e.is_fenced() => {
                let now = Instant::now();
                if now >= errors_until {
                    let e = match e {
                        JournalError::Failed(m) if dropped => JournalError::Unanswered(m),
                        e => e,
                    };
                    tracing::error!(name: "journal_commit_failed", error = %e, tries, "journal_commit_failed");
                    return Err(CommitError::Journal(e));
                }
                tracing::warn!(name: "journal_commit_retry", error = %e, tries, "journal_commit_retry");
                let jittered = delay.mul_f64(0.5 + fastrand::f64() * 0.5);
                tokio::time::sleep(jittered.min(errors_until - now)).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// Why a commit did not land.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The changes do not fit the context as it is now; nothing was written.
    #[error("commit refused: {0}")]
    Refused(Refusal),
    /// The journal could not record it.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;
    use switchboard_core::context::Scope;
    use switchboard_core::{CallInfo, Limits, RunInput, Tool, run_to_end};

    fn ctx() -> Context {
        let call = CallInfo {
            id: "c1".into(),
            tenant_id: "t".into(),
            agent: "a".into(),
            from: None,
            to: None,
            started_at: "2026-01-01T00:00:00Z".into(),
        };
        Context::new(&call, json!({}))
    }

    fn set(keys: &[&str], value: serde_json::Value) -> Write {
        Write::Set {
            scope: Scope::Workflow,
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            value,
        }
    }

    #[test]
    fn a_write_that_no_longer_fits_refuses_the_whole_commit() {
        let mut live = ctx();
        live.apply(&set(&["profile"], json!("a string"))).unwrap();
        let writes = [
            set(&["order_confirmed"], json!(true)),
            set(&["profile", "name"], json!("Ada")),
        ];
        let e = apply_all(&live, &writes, Some("billing"), 1 << 20).unwrap_err();
        let Refusal::Conflict(e) = e else {
            panic!("{e:?}")
        };
        assert_eq!(e.path, "workflow.profile.name");
        // Nothing landed: not the first write, not the handoff.
        assert!(live.workflow.get("order_confirmed").is_none());
        assert_eq!(live.active_agent(), "a");
    }

    #[test]
    fn the_limit_holds_but_an_oversized_context_may_shrink() {
        let live = ctx();
        let big = set(&["blob"], json!("x".repeat(500)));
        let e = apply_all(&live, std::slice::from_ref(&big), None, 100).unwrap_err();
        assert!(matches!(e, Refusal::TooLarge { limit: 100, .. }), "{e:?}");
        let grown = apply_all(&live, &[big], None, 1 << 20).unwrap().unwrap();
        let shrink = Write::Delete {
            scope: Scope::Workflow,
            keys: vec!["blob".into()].into(),
        };
        assert!(apply_all(&grown, &[shrink], None, 100).is_ok());
        assert_eq!(apply_all(&live, &[], None, 100), Ok(None));
    }

    /// A run's own copy is committed onto the context it read, and is what its writes make
    /// there; onto a context another tool changed meanwhile, its writes are applied to that
    /// one instead, so neither tool's change is lost; the limit holds either way.
    #[test]
    fn a_run_commits_its_copy_onto_an_unchanged_context_and_its_writes_onto_a_changed_one() {
        let def = json!({
            "name": "note", "description": "Note what the caller said",
            "parameters": [{"name": "text", "type": "string", "required": true}],
            "actions": [
                {"type": "context.set", "data": {"notes[+]": "{{params.text}}"}},
                {"type": "flag.set", "flags": ["noted"]},
                {"type": "handoff", "agent": "billing"}
            ]
        });
        let tool = Arc::new(Tool::parse(&def, &Limits::default()).unwrap());
        let live = ctx();
        let outcome = run_to_end(
            &tool,
            RunInput::new("fc_1"),
            r#"{"text":"hi"}"#,
            &live,
            |r| panic!("no effect expected: {r:?}"),
        );
        assert!(outcome.ok(), "{outcome:?}");
        assert!(outcome.applied.onto(&live).is_some());

        let taken = apply_outcome(&live, &mut outcome.clone(), 1 << 20)
            .unwrap()
            .unwrap();
        let applied = apply_all(&live, &outcome.writes, Some("billing"), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(taken, applied);
        assert_eq!(taken.workflow["notes"], json!(["hi"]));
        assert_eq!(taken.active_agent(), "billing");

        let mut changed = live.clone();
        changed
            .apply(&Write::Append {
                scope: Scope::Workflow,
                keys: vec!["notes".into()].into(),
                value: json!("earlier"),
            })
            .unwrap();
        assert!(outcome.applied.onto(&changed).is_none());
        let next = apply_outcome(&changed, &mut outcome.clone(), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(next.workflow["notes"], json!(["earlier", "hi"]));
        assert_eq!(next.flags["noted"], json!(true));
        assert_eq!(next.active_agent(), "billing");

        let mut refused = outcome.clone();
        let e = apply_outcome(&live, &mut refused, 10).unwrap_err();
        assert!(refused.writes.is_empty(), "a commit takes the writes");
        assert!(matches!(e, Refusal::TooLarge { limit: 10, .. }), "{e:?}");
    }
}
