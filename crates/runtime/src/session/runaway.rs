//! Runaway guards: a model stuck in a loop is answered at once, nothing run.
//!
//! Three guards, decided here once for every door, before a new function call is
//! deduplicated, claimed or run:
//! - the same tool with the same arguments more than `identical_calls.max` times within
//!   `identical_calls.window_s` → `loop_detected`;
//! - more than `calls_per_minute` function calls in the last 60 s → `loop_detected`;
//! - a terminal tool (a transfer, a hang-up) called again after it succeeded in the call →
//!   `already_done` (another terminal tool may still run: a hang-up after a transfer the
//!   client carries out, say).
//!
//! Every function call the guards see counts, refused ones too, so a model that keeps calling
//! stays refused until it stops for the window. The state is derived, not stored: every
//! function call leaves a record in the call's journal (the refused ones too), so a node that
//! takes the call over rebuilds it from the newest records ([`Runaway::restore`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use switchboard_core::guards::Guards;
use switchboard_core::{ErrorCode, SideEffect, ToolError};

use crate::bookkeeping::{DedupeKey, dedupe_digest};
use crate::executor::CallConfig;
use crate::invocation::InvocationRecord;

/// Function calls the guards remember, the newest; past it the oldest are forgotten (a call
/// making more than this many in an identical window is refused by its per-minute budget long
/// before).
pub const MAX_REMEMBERED_CALLS: usize = 4_096;

/// The budget's window.
const MINUTE: Duration = Duration::from_secs(60);

/// What the guards know of a call.
#[derive(Debug, Default)]
pub(super) struct Runaway {
    /// When each recent function call arrived, and its tool and arguments' digest; oldest first.
    recent: VecDeque<(Instant, DedupeKey)>,
    /// Each terminal tool that succeeded, with its first successful function call; only
    /// configured tools' names, so as many as the call's config has terminal tools.
    terminal: Vec<(String, String)>,
}

impl Runaway {
    /// Counts a function call of `tool` (of side effect `side_effect`) with `arguments_json`
    /// arriving at `now`, and says whether a guard refuses it.
    pub(super) fn admit(
        &mut self,
        guards: &Guards,
        tool: &str,
        side_effect: SideEffect,
        arguments_json: &str,
        now: Instant,
    ) -> Result<(), ToolError> {
        let key = key_of(tool, arguments_json);
        let window = Duration::from_secs(u64::from(guards.identical_calls.window_s));
        let keep = window.max(MINUTE);
        while self
            .recent
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > keep)
        {
            self.recent.pop_front();
        }
        let verdict = self.verdict(guards, tool, side_effect, &key, window, now);
        if self.recent.len() >= MAX_REMEMBERED_CALLS {
            self.recent.pop_front();
        }
        self.recent.push_back((now, key));
        verdict
    }

    fn verdict(
        &self,
        guards: &Guards,
        tool: &str,
        side_effect: SideEffect,
        key: &DedupeKey,
        window: Duration,
        now: Instant,
    ) -> Result<(), ToolError> {
        if side_effect == SideEffect::Terminal
            && let Some((first_tool, first)) = self.terminal.iter().find(|(t, _)| t == tool)
        {
            return Err(ToolError::new(
                ErrorCode::AlreadyDone,
                format!(
                    "{tool} already ran in this call (the call is being transferred or ended), so nothing was done again. Do not call it again; tell the caller what is happening."
                ),
            )
            .with_details(json!({"guard": "terminal", "function_call_id": first, "tool": first_tool})));
        }
        let within = |span: Duration| {
            self.recent
                .iter()
                .filter(move |(at, _)| now.saturating_duration_since(*at) <= span)
        };
        let identical = within(window).filter(|(_, k)| k == key).count();
        let max = guards.identical_calls.max;
        if identical >= max as usize {
            return Err(ToolError::new(
                ErrorCode::LoopDetected,
                format!(
                    "{tool} was already called {identical} times with these same arguments in the last {} seconds, so it was not run again. Use the answers you have, or ask the caller how to go on.",
                    window.as_secs()
                ),
            )
            .with_details(json!({"guard": "identical_calls", "calls": identical, "max": max, "window_s": window.as_secs()})));
        }
        let calls = within(MINUTE).count();
        let budget = guards.calls_per_minute;
        if calls >= budget as usize {
            return Err(ToolError::new(
                ErrorCode::LoopDetected,
                format!(
                    "This call already made {calls} tool calls in the last minute, the most it may, so {tool} was not run. Talk with the caller, and call it again only if it is still needed."
                ),
            )
            .with_details(json!({"guard": "calls_per_minute", "calls": calls, "max": budget})));
        }
        Ok(())
    }

    /// A terminal tool's run succeeded: every later call of it is `already_done`.
    pub(super) fn terminal_done(&mut self, function_call_id: &str, tool: &str) {
        if !self.terminal.iter().any(|(t, _)| t == tool) {
            self.terminal
                .push((tool.to_owned(), function_call_id.to_owned()));
        }
    }

    /// The guards' state of a call taken over, from its newest records (oldest first): each
    /// record's arrival is placed by its distance from the newest record's, which arrived at
    /// `newest` on this node's clock (the journal's own clock says how long ago it was stored;
    /// `None`: now, which counts every record as recent as it can be). No two nodes' clocks are
    /// compared: the records' stamps all come from the node that wrote them.
    pub(super) fn restore(
        records: &[InvocationRecord],
        newest: Option<Instant>,
        config: &CallConfig,
    ) -> Runaway {
        let mut r = Runaway::default();
        let stamp = |rec: &InvocationRecord| {
            humantime::parse_rfc3339_weak(&rec.started_at)
                .ok()
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        let latest = records.iter().map(stamp).max();
        let anchor = newest.unwrap_or_else(Instant::now);
        for rec in records {
            let before = latest
                .and_then(|l| l.duration_since(stamp(rec)).ok())
                .unwrap_or_default();
            let Some(at) = anchor.checked_sub(before) else {
                continue;
            };
            if anchor.saturating_duration_since(at)
                > Duration::from_secs(u64::from(switchboard_core::guards::MAX_IDENTICAL_WINDOW_S))
            {
                continue;
            }
            if r.recent.len() >= MAX_REMEMBERED_CALLS {
                r.recent.pop_front();
            }
            r.recent.push_back((at, key_of(&rec.tool, &rec.arguments)));
            if rec.ok && rec.duplicate_of.is_none() && is_terminal(config, &rec.tool) {
                r.terminal_done(&rec.function_call_id, &rec.tool);
            }
        }
        r.recent.make_contiguous().sort_by_key(|(at, _)| *at);
        r
    }
}

/// Whether any agent of the call has `tool` as a terminal tool.
fn is_terminal(config: &CallConfig, tool: &str) -> bool {
    config
        .agents
        .values()
        .filter_map(|tools| tools.get(tool))
        .any(|e| e.tool.side_effect() == SideEffect::Terminal)
}

/// The tool and its arguments in canonical form (keys sorted), as one digest; arguments that
/// are not JSON count as their text.
fn key_of(tool: &str, arguments_json: &str) -> DedupeKey {
    let text = if arguments_json.trim().is_empty() {
        "{}"
    } else {
        arguments_json
    };
    let args = match serde_json::from_str::<Value>(text) {
        Ok(v) => super::actor::canonical(&v).to_string(),
        Err(_) => text.to_owned(),
    };
    dedupe_digest(&format!("{tool}\u{0}{args}"))
}
