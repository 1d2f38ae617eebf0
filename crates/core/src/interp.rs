//! The interpreter: a step machine over a tool's actions.
//!
//! [`start`] validates the model's arguments and runs actions until the tool is done or needs
//! the world: then it returns [`Step::Effect`] with the request and a [`Suspended`] run.
//! [`Suspended::resume`] feeds the effect's outcome back and runs on. A `Suspended` serialises
//! (it carries its tool's definition), so a run can be checkpointed at any effect, resumed in
//! another process, and replayed with recorded outcomes to the same result: nothing here reads a
//! clock, a random source or the network.
//!
//! Writes are transactional: the run works on its own copy of the context and records each
//! [`Write`]; the outcome carries them for the call session to commit. If an action fails, the
//! run's writes are dropped and `on_failure` runs on the context as it was; `on_failure`'s own
//! writes are kept.

use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::actions::{ACTIONS, Action, BlockId, Exec, Flow, ON_FAILURE, ON_SUCCESS};
use crate::context::{Context, Write};
use crate::effect::{EffectOutcome, EffectRequest};
use crate::error::{ErrorCode, ToolError};
use crate::json_bounds;
use crate::result::{Applied, Handoff, LogEntry, LogLevel, Outcome};
use crate::tool::{SharedTool, Tool};
use crate::transfer::ReferConfig;

/// What a run needs besides the tool, the arguments and the context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    /// The model's id for this function call; part of every idempotency key.
    pub function_call_id: String,
    /// The agent tool's config (`config` scope).
    #[serde(default = "empty_object")]
    pub config: Arc<Value>,
    /// The agent tool's sensitive config (`secrets` scope); never in outputs or logs.
    #[serde(default = "empty_object")]
    pub secrets: Arc<Value>,
    /// Agents a `handoff` may name; `None` accepts any.
    #[serde(default)]
    pub agents: Option<Vec<String>>,
    /// The tenant's transfer destinations, for `transfer` with a `destination`.
    #[serde(default)]
    pub refer: Option<Arc<ReferConfig>>,
    /// The time the run starts (RFC 3339), the `now` scope: passed in, so runs replay exactly.
    #[serde(default)]
    pub now: Arc<Value>,
}

/// One empty object shared by every run's empty scopes; a run that writes one copies it first.
static EMPTY_OBJECT: LazyLock<Arc<Value>> = LazyLock::new(|| Arc::new(Value::Object(Map::new())));

fn empty_object() -> Arc<Value> {
    Arc::clone(&EMPTY_OBJECT)
}

/// One `null` shared by every run that has had no effect's response yet.
static NULL: LazyLock<Arc<Value>> = LazyLock::new(|| Arc::new(Value::Null));

impl RunInput {
    /// Input for a function call, with empty config.
    pub fn new(function_call_id: impl Into<String>) -> Self {
        RunInput {
            function_call_id: function_call_id.into(),
            config: empty_object(),
            secrets: empty_object(),
            agents: None,
            refer: None,
            now: Arc::clone(&NULL),
        }
    }
}

/// Where a run stands after a step.
#[derive(Debug)]
pub enum Step {
    Done(Outcome),
    /// The run waits for this effect; resume the `Suspended` with its outcome.
    Effect(EffectRequest, Suspended),
}

/// Which list of actions is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    Actions,
    OnSuccess,
    OnFailure,
}

/// A position in a block: the next action to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Frame {
    block: BlockId,
    next: u32,
}

/// Everything a run has done so far; what a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunState {
    pub(crate) input: RunInput,
    pub(crate) params: Arc<Value>,
    /// The context as the run found it, for `on_failure` after a failed action.
    base: Context,
    /// The run's own copy, with its writes applied.
    pub(crate) ctx: Context,
    pub(crate) writes: Vec<Write>,
    /// Writes from this index on are recorded but not yet applied to `ctx`.
    #[serde(default)]
    pub(crate) pending: usize,
    /// A recorded write that its copy of the context refused when it was applied (checks make
    /// this unexpected); the run's copy then differs from a commit's, so it is not offered.
    #[serde(default)]
    unapplied: bool,
    pub(crate) result: Arc<Value>,
    pub(crate) response: Arc<Value>,
    pub(crate) message: Option<String>,
    pub(crate) logs: Vec<LogEntry>,
    pub(crate) handoff: Option<Handoff>,
    frames: Vec<Frame>,
    phase: Phase,
    failure: Option<ToolError>,
    /// The action waiting for an effect's outcome.
    awaiting: Option<u32>,
    /// The REFERs of this run's `transfer` that failed, each `{destination_id, target_uri,
    /// error}`: the first one's destination may name a `fallback`, tried once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) transfer_attempts: Vec<Value>,
}

impl RunState {
    /// Applies the recorded writes to the run's copy of the context, so reads see them.
    pub(crate) fn materialize(&mut self) {
        for w in &self.writes[self.pending..] {
            // Each write was checked when it was recorded; the copy should not refuse it now.
            if self.ctx.apply(w).is_err() {
                self.unapplied = true;
            }
        }
        self.pending = self.writes.len();
    }
}

/// A run stopped at an effect. Serialisable: it carries its tool's definition and its state.
#[derive(Debug, Serialize, Deserialize)]
pub struct Suspended {
    tool: SharedTool,
    state: Box<RunState>,
}

impl Suspended {
    /// Continues the run with the outcome of the effect it asked for.
    pub fn resume(self, outcome: EffectOutcome) -> Step {
        let Suspended { tool, mut state } = self;
        let Some(id) = state.awaiting.take() else {
            return Step::Done(internal_failure(
                &tool.0,
                "the run was resumed but was not waiting for an effect",
            ));
        };
        let Some(action) = tool.0.blocks.iter().flatten().find(|a| a.id == id) else {
            return Step::Done(internal_failure(
                &tool.0,
                "the run waits for an action its tool does not have",
            ));
        };
        let flow = action.resume(
            &mut Exec {
                tool: &tool.0,
                st: &mut state,
                at: action,
            },
            outcome,
        );
        match apply(flow, action, &mut state) {
            Some(request) => Step::Effect(request, Suspended { tool, state }),
            None => drive(tool, state),
        }
    }

    /// The tool this run belongs to.
    pub fn tool(&self) -> &Arc<Tool> {
        &self.tool.0
    }

    /// The agent that was active when the run started.
    pub fn active_agent(&self) -> String {
        self.state.base.active_agent().to_owned()
    }

    /// Who is calling, for per-caller toolkits: the caller's number (`call.from`), else
    /// `user.id` (a string or a number), if the call has either.
    pub fn caller(&self) -> Option<String> {
        crate::context::caller_of(&self.state.base.call, &self.state.base.user)
    }
}

fn internal_failure(tool: &Tool, message: &str) -> Outcome {
    Outcome::failed(
        tool.name(),
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!("{}: {message}", tool.name()),
        ),
    )
}

/// Starts a run: validates `arguments_json`, then runs until done or until an effect is needed.
pub fn start(tool: &Arc<Tool>, input: RunInput, arguments_json: &str, context: &Context) -> Step {
    // Every door's arguments pass here: too deep, they are refused before they are parsed.
    let max = tool.limits.json_depth();
    if let Some(depth) = json_bounds::text_deeper_than(arguments_json.as_bytes(), max) {
        let e = ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "The arguments for {} nest {depth} levels deep, over the limit of {max}. Send them as a flatter JSON object.",
                tool.name()
            ),
        );
        return Step::Done(Outcome::failed(tool.name(), e));
    }
    let params = match tool.arguments().validate(tool.name(), arguments_json) {
        Ok(p) => p,
        Err(e) => return Step::Done(Outcome::failed(tool.name(), e)),
    };
    let state = RunState {
        input,
        params: Arc::new(params),
        base: context.clone(),
        ctx: context.clone(),
        writes: Vec::new(),
        pending: 0,
        unapplied: false,
        result: empty_object(),
        response: Arc::clone(&NULL),
        message: None,
        logs: Vec::new(),
        handoff: None,
        frames: first_frames(),
        phase: Phase::Actions,
        failure: None,
        awaiting: None,
        transfer_attempts: Vec::new(),
    };
    drive(SharedTool(Arc::clone(tool)), Box::new(state))
}

/// The frames of a run that starts: its actions, with room for a few nested blocks
/// (`conditional`, `on_success`) so entering them does not grow the list.
fn first_frames() -> Vec<Frame> {
    let mut frames = Vec::with_capacity(4);
    frames.push(Frame {
        block: ACTIONS,
        next: 0,
    });
    frames
}

/// Runs actions until the tool is done or suspends.
fn drive(tool: SharedTool, mut st: Box<RunState>) -> Step {
    loop {
        let Some(frame) = st.frames.last_mut() else {
            match st.phase {
                Phase::Actions => {
                    st.phase = Phase::OnSuccess;
                    st.frames.push(Frame {
                        block: ON_SUCCESS,
                        next: 0,
                    });
                    continue;
                }
                Phase::OnSuccess => match finish_success(&tool.0, &mut st) {
                    Some(outcome) => return Step::Done(outcome),
                    None => continue,
                },
                Phase::OnFailure => return Step::Done(finish_failure(&tool.0, *st)),
            }
        };
        let Some(action) = tool.0.block(frame.block).get(frame.next as usize) else {
            st.frames.pop();
            continue;
        };
        frame.next += 1;
        if action.reads_context && st.pending < st.writes.len() {
            st.materialize();
        }
        let flow = action.run(&mut Exec {
            tool: &tool.0,
            st: &mut st,
            at: action,
        });
        if let Some(request) = apply(flow, action, &mut st) {
            return Step::Effect(request, Suspended { tool, state: st });
        }
    }
}

/// Applies an action's flow to the run; returns the effect to suspend on, if any.
fn apply(flow: Flow, action: &Action, st: &mut RunState) -> Option<EffectRequest> {
    match flow {
        Flow::Next => None,
        Flow::Enter(block) => {
            st.frames.push(Frame { block, next: 0 });
            None
        }
        Flow::Suspend(request) => {
            st.awaiting = Some(action.id);
            Some(request)
        }
        Flow::Fail(error) => {
            fail(st, error, &action.ptr);
            None
        }
    }
}

/// An action failed: drop the run's writes and run `on_failure` on the context as it was.
/// A failure inside `on_failure` ends it; the first failure is the one the model hears of.
fn fail(st: &mut RunState, error: ToolError, at: &str) {
    match st.phase {
        Phase::Actions | Phase::OnSuccess => {
            st.logs.push(LogEntry {
                level: LogLevel::Warn,
                message: error.to_string(),
                action: at.into(),
            });
            st.failure = Some(error);
            st.phase = Phase::OnFailure;
            st.writes.clear();
            st.pending = 0;
            st.unapplied = false;
            st.ctx = st.base.clone();
            st.message = None;
            st.handoff = None;
            st.frames = vec![Frame {
                block: ON_FAILURE,
                next: 0,
            }];
        }
        Phase::OnFailure => {
            st.logs.push(LogEntry {
                level: LogLevel::Error,
                message: format!("on_failure stopped: {error}"),
                action: at.into(),
            });
            st.frames.clear();
        }
    }
}

/// How big the run's context would be with its writes: about (the size the limit judges) and at
/// most (so that a commit of the run's copy may skip measuring it).
struct Sizes {
    approx: usize,
    bound: usize,
}

fn sizes(st: &RunState) -> Sizes {
    if st.writes.is_empty() {
        return Sizes {
            approx: 0,
            bound: 0,
        };
    }
    let base = st.ctx.approx_size();
    st.writes[st.pending..].iter().map(Write::size).fold(
        Sizes {
            approx: base,
            bound: base,
        },
        |s, w| Sizes {
            approx: s.approx.saturating_add(w.approx),
            bound: s.bound.saturating_add(w.bound),
        },
    )
}

/// The size and the limit, when the context would grow past the tool's limit.
fn over_limit(tool: &Tool, sizes: &Sizes) -> Option<(usize, usize)> {
    let limit = tool.limits.max_context_bytes;
    (sizes.approx > limit).then_some((sizes.approx, limit))
}

/// The run's copy of the context, offered to the commit with the writes it already holds (the
/// ones the run read back); the rest are applied only by a commit that takes the copy.
fn offered(st: &RunState, sizes: &Sizes) -> Applied {
    if st.writes.is_empty() || st.unapplied {
        return Applied::default();
    }
    Applied::new(st.base.clone(), st.ctx.clone(), st.pending, sizes.bound)
}

/// The success outcome, or `None` after turning an over-limit context into a failure.
fn finish_success(tool: &Tool, st: &mut RunState) -> Option<Outcome> {
    let sizes = sizes(st);
    if let Some((size, limit)) = over_limit(tool, &sizes) {
        let e = ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!(
                "{}: the call's context would hold about {size} bytes, over the limit of {limit} (max_context_bytes); nothing was saved",
                tool.name()
            ),
        );
        fail(st, e, "");
        return None;
    }
    let applied = offered(st, &sizes);
    let data = match Arc::unwrap_or_clone(std::mem::replace(&mut st.result, Arc::clone(&NULL))) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Some(Outcome {
        tool: tool.name().to_owned(),
        error: None,
        message: st.message.take(),
        data,
        writes: std::mem::take(&mut st.writes),
        handoff: st.handoff.take(),
        logs: std::mem::take(&mut st.logs),
        applied,
    })
}

/// The failure outcome. `on_failure`'s writes are held to the same context limit as the
/// tool's: over it, none of them is kept, and the error says so.
fn finish_failure(tool: &Tool, mut st: RunState) -> Outcome {
    let sizes = sizes(&st);
    if let Some((size, limit)) = over_limit(tool, &sizes) {
        let why = format!(
            "the call's context would hold about {size} bytes, over the limit of {limit} (max_context_bytes)"
        );
        st.logs.push(LogEntry {
            level: LogLevel::Error,
            message: format!("on_failure's changes were not saved: {why}"),
            action: "".into(),
        });
        st.writes.clear();
        st.handoff = None;
        st.message = None;
        if let Some(e) = &mut st.failure {
            e.message = format!(
                "{} (its on_failure changes were not saved either: {why})",
                e.message
            );
        }
    }
    let applied = offered(&st, &sizes);
    Outcome {
        tool: tool.name().to_owned(),
        error: st.failure,
        message: st.message,
        data: Map::new(),
        writes: st.writes,
        handoff: st.handoff,
        logs: st.logs,
        applied,
    }
}

/// Runs a tool to its end, answering every effect with `perform`; for tests, `switchboard run
/// --dry-run` and any caller whose effects are synchronous.
pub fn run_to_end(
    tool: &Arc<Tool>,
    input: RunInput,
    arguments_json: &str,
    context: &Context,
    mut perform: impl FnMut(&EffectRequest) -> EffectOutcome,
) -> Outcome {
    let mut step = start(tool, input, arguments_json, context);
    loop {
        match step {
            Step::Done(outcome) => return outcome,
            Step::Effect(request, suspended) => {
                let outcome = perform(&request);
                step = suspended.resume(outcome);
            }
        }
    }
}
