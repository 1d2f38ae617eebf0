//! The executor: one invocation of one tool, run to its end. It always answers.
//!
//! It resolves the tool on the active agent, drives the core's step machine, performs each
//! effect (after asking the caller's [`Gate`], which checkpoints the run and may hold or drop a
//! terminal effect), and bounds the whole run by the tool's deadline. Every failure becomes an
//! [`Outcome`] with the matching error code; nothing is returned as an error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::context::FutureExt as _;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use switchboard_core::guards::Guards;
use switchboard_core::transfer::ReferConfig;
use switchboard_core::{
    Context, EffectOutcome, EffectRequest, ErrorCode, Outcome, RunInput, Step, Suspended, Tool,
    ToolError,
};

use crate::BoxFuture;
use crate::adaptive::LatencyBook;
use crate::effects::{CallAction, EffectScope, Effects, TransferLedger};
use crate::invocation::Invocation;
use crate::read_cache::{Lookup, ReadCache};
use crate::replay::{EffectExchange, RunTrace};
use crate::traces::Traces;

/// The answer for a run that broke in a way no tool definition can cause (a bug of ours).
pub(crate) const FAILED_UNEXPECTEDLY: &str =
    "The tool failed unexpectedly. Tell the caller it cannot be done right now.";

/// One tool as an agent has it: the pinned version, whether it is on, and its config.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub tool: Arc<Tool>,
    pub enabled: bool,
    /// The agent tool's `config` (the `config` scope).
    pub config: Arc<Value>,
    /// The agent tool's `sensitive_config` (the `secrets` scope); never shown.
    pub secrets: Arc<Value>,
}

impl ToolEntry {
    /// An enabled tool with empty config.
    pub fn new(tool: Arc<Tool>) -> Self {
        let empty = Arc::new(Value::Object(serde_json::Map::new()));
        ToolEntry {
            tool,
            enabled: true,
            config: Arc::clone(&empty),
            secrets: empty,
        }
    }
}

/// An agent's turn budget when it sets none: past about 700 ms of silence callers ask
/// whether anyone is there.
pub const DEFAULT_TURN_BUDGET_MS: u64 = 700;

/// Everything a call's tools may use, pinned when the call starts: later changes to tools or
/// config reach the next call, not this one.
#[derive(Debug, Clone, Default)]
pub struct CallConfig {
    pub tenant_id: String,
    /// Each agent's tools by name.
    pub agents: HashMap<String, HashMap<String, ToolEntry>>,
    pub refer: Option<Arc<ReferConfig>>,
    /// Standard Webhooks secret for `api_call` with `sign: true`.
    pub signing_secret: Option<SecretString>,
    /// Each agent's runaway guards where it overrides the defaults.
    pub guards: HashMap<String, Guards>,
    /// Each agent's turn budget (`turn_budget_ms`) where it overrides the default.
    pub turn_budgets: HashMap<String, u64>,
    /// Outcomes of `read` tools' effects kept for identical requests (`cache_ttl_s`).
    pub read_cache: Arc<ReadCache>,
    /// The node's observed latency of every tool (shared by all its calls, not pinned): the
    /// adaptive policy's input ([`crate::adaptive`]).
    pub latency: Arc<LatencyBook>,
    /// Each agent's `filler`: said for a slow tool that has no `messages.delayed`.
    pub fillers: HashMap<String, String>,
    /// Each agent's stored tools' versions as pinned (for spans; built-in and MCP tools have
    /// none).
    pub tool_versions: HashMap<String, HashMap<String, i64>>,
}

impl CallConfig {
    /// The runaway guards of an agent: its own, else the defaults.
    pub fn guards(&self, agent: &str) -> Guards {
        self.guards.get(agent).copied().unwrap_or_default()
    }

    /// What a span says of a tool the call has, by name on any agent: its pinned version (if
    /// a stored tool) and its side effect.
    pub fn tool_facts(&self, name: &str) -> Option<(Option<i64>, &'static str)> {
        self.agents.iter().find_map(|(agent, tools)| {
            let entry = tools.get(name)?;
            let version = self
                .tool_versions
                .get(agent)
                .and_then(|v| v.get(name))
                .copied();
            Some((version, entry.tool.side_effect().as_str()))
        })
    }

    /// The longest silence an agent's caller should hear while a tool runs: its own
    /// `turn_budget_ms`, else [`DEFAULT_TURN_BUDGET_MS`].
    pub fn turn_budget(&self, agent: &str) -> std::time::Duration {
        let ms = self
            .turn_budgets
            .get(agent)
            .copied()
            .unwrap_or(DEFAULT_TURN_BUDGET_MS);
        std::time::Duration::from_millis(ms)
    }

    /// The tools of one agent.
    pub fn tools(&self, agent: &str) -> Option<&HashMap<String, ToolEntry>> {
        self.agents.get(agent)
    }

    /// Finds a tool by name on an agent.
    pub fn resolve(&self, agent: &str, name: &str) -> Result<&ToolEntry, ToolError> {
        let tools = self.agents.get(agent);
        match tools.and_then(|t| t.get(name)) {
            Some(e) if e.enabled => Ok(e),
            Some(_) => Err(ToolError::new(
                ErrorCode::ToolDisabled,
                "This tool is turned off for now. Help the caller without it.",
            )),
            None => {
                let mut available: Vec<&String> = tools
                    .map(|t| {
                        t.iter()
                            .filter(|(_, e)| e.enabled)
                            .map(|(n, _)| n)
                            .collect()
                    })
                    .unwrap_or_default();
                available.sort();
                Err(
                    ToolError::new(ErrorCode::ToolNotFound, "Requested tool is not available.")
                        .with_details(json!({"available_tools": available})),
                )
            }
        }
    }
}

/// The caller's say over each effect: it checkpoints the run and may drop a terminal effect
/// (the caller interrupted the response that asked for it).
pub trait Gate: Send + Sync {
    /// Called before each effect; `false` means: do not perform it.
    fn before_effect<'a>(
        &'a self,
        request: &'a EffectRequest,
        suspended: &'a Suspended,
    ) -> BoxFuture<'a, bool>;
}

/// A gate that lets every effect through and keeps no checkpoint.
#[derive(Debug, Default)]
pub struct OpenGate;

impl Gate for OpenGate {
    fn before_effect<'a>(&'a self, _: &'a EffectRequest, _: &'a Suspended) -> BoxFuture<'a, bool> {
        Box::pin(async { true })
    }
}

/// How one invocation ended.
#[derive(Debug)]
pub struct Execution {
    pub outcome: Outcome,
    /// The tool that ran, when it was found.
    pub tool: Option<Arc<Tool>>,
    /// Transfers and hang-ups for the client to carry out.
    pub call_actions: Vec<CallAction>,
    pub elapsed: Duration,
    /// What replaying the run needs (not yet redacted); absent for a resumed run, whose start
    /// this process did not see.
    pub trace: Option<Box<RunTrace>>,
}

/// Runs invocations against a deployment's effect handlers.
#[derive(Debug, Clone)]
pub struct Executor {
    effects: Arc<Effects>,
    /// Where the spans of calls, invocations and effects go (nowhere by default).
    traces: Traces,
}

impl Executor {
    pub fn new(effects: Arc<Effects>) -> Self {
        Executor {
            effects,
            traces: Traces::off(),
        }
    }

    /// The executor with its runs' spans made by `traces`.
    #[must_use]
    pub fn with_traces(mut self, traces: Traces) -> Self {
        self.traces = traces;
        self
    }

    /// Where the spans of this executor's runs go.
    pub fn traces(&self) -> &Traces {
        &self.traces
    }

    /// Opens connections, in the background, to the origins `agent`'s enabled tools name
    /// literally (see [`crate::http::warm`]), so the call's first tool call pays no handshake.
    pub fn warm_upstreams(&self, call: &CallConfig, agent: &str) {
        let Some(tools) = call.tools(agent) else {
            return;
        };
        let mut origins: Vec<String> = Vec::new();
        for entry in tools.values().filter(|e| e.enabled) {
            for o in entry.tool.upstream_origins() {
                if !origins.contains(o) {
                    origins.push(o.clone());
                }
            }
        }
        // The same origins whatever order the map holds the tools in.
        origins.sort();
        self.effects.http.warm(&call.tenant_id, origins);
    }

    /// Runs one invocation to its end on the context `ctx` (a snapshot of the call's).
    pub async fn execute(
        &self,
        call: &CallConfig,
        ctx: &Context,
        invocation: &Invocation,
        gate: &dyn Gate,
        transfers: &TransferLedger,
    ) -> Execution {
        self.execute_from(Instant::now(), None, call, ctx, invocation, gate, transfers)
            .await
    }

    /// [`Executor::execute`] with the tool's deadline counted from `started` (when the function
    /// call arrived) rather than from now, and `deadline` the one the call's adaptive policy
    /// decided when the function call came (none: the tool's deadline as the call's figures
    /// give it now, see [`crate::adaptive::run_timeout`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn execute_from(
        &self,
        started: Instant,
        deadline: Option<Duration>,
        call: &CallConfig,
        ctx: &Context,
        invocation: &Invocation,
        gate: &dyn Gate,
        transfers: &TransferLedger,
    ) -> Execution {
        log_start(invocation);
        let entry = match call.resolve(ctx.active_agent(), &invocation.name) {
            Ok(e) => e,
            Err(e) => {
                if e.code == ErrorCode::ToolNotFound {
                    tracing::info!(name: "tool_not_found", tool_name = %invocation.name, agent = %ctx.active_agent(), "tool_not_found");
                }
                return Execution {
                    outcome: Outcome::failed(&invocation.name, e),
                    tool: None,
                    call_actions: Vec::new(),
                    elapsed: started.elapsed(),
                    trace: None,
                };
            }
        };
        let (step, trace) = begin(call, entry, ctx, invocation);
        let entry = entry.clone();
        let (mut exec, effects) = self
            .drive(
                call, &entry, invocation, step, gate, transfers, started, deadline,
            )
            .await;
        exec.trace = Some(Box::new(RunTrace {
            effects,
            writes: exec.outcome.writes.clone(),
            ..trace
        }));
        exec
    }

    /// Runs an invocation of a tool that cannot ask for an effect (see
    /// [`Tool::requests_effects`]) to its end, here and now: such a run never waits, so it
    /// needs neither a task nor a deadline timer of its own. `entry` is the tool as `call`
    /// resolves it on the context's active agent.
    pub fn execute_in_memory(
        &self,
        call: &CallConfig,
        entry: &ToolEntry,
        ctx: &Context,
        invocation: &Invocation,
    ) -> Execution {
        let started = Instant::now();
        log_start(invocation);
        let (step, trace) = begin(call, entry, ctx, invocation);
        let outcome = match step {
            Step::Done(outcome) => outcome,
            // Not reached: the tool was parsed without an action that asks for one.
            Step::Effect(..) => {
                tracing::error!(name: "tool_effect_unexpected", tool_name = %entry.tool.name(), "tool_effect_unexpected");
                Outcome::failed(
                    entry.tool.name(),
                    ToolError::new(ErrorCode::ToolExecutionFailed, FAILED_UNEXPECTEDLY),
                )
            }
        };
        let mut exec = ended(&entry.tool, invocation, outcome, Vec::new(), started);
        exec.trace = Some(Box::new(RunTrace {
            effects: Vec::new(),
            writes: exec.outcome.writes.clone(),
            ..trace
        }));
        exec
    }

    /// Continues a checkpointed run: performs the effect it stopped at, then runs on.
    pub async fn resume(
        &self,
        call: &CallConfig,
        invocation: &Invocation,
        request: EffectRequest,
        suspended: Suspended,
        gate: &dyn Gate,
        transfers: &TransferLedger,
    ) -> Execution {
        let tool = Arc::clone(suspended.tool());
        // The agent tool's config as pinned for the call; the tool itself as checkpointed.
        let entry = match call
            .tools(&suspended.active_agent())
            .and_then(|t| t.get(tool.name()))
        {
            Some(e) => ToolEntry { tool, ..e.clone() },
            None => ToolEntry::new(tool),
        };
        let (exec, _) = self
            .drive(
                call,
                &entry,
                invocation,
                Step::Effect(request, suspended),
                gate,
                transfers,
                Instant::now(),
                None,
            )
            .await;
        // The run started elsewhere: its input and context are not known here, so no trace.
        exec
    }

    /// Drives a run to its end; returns how it ended and each effect with its outcome.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        call: &CallConfig,
        entry: &ToolEntry,
        invocation: &Invocation,
        mut step: Step,
        gate: &dyn Gate,
        transfers: &TransferLedger,
        started: Instant,
        deadline: Option<Duration>,
    ) -> (Execution, Vec<EffectExchange>) {
        let tool = &entry.tool;
        let caller = ctx_caller(&step);
        let deadline = deadline.unwrap_or_else(|| crate::adaptive::run_timeout(call, tool));
        let mut actions = Vec::new();
        let mut exchanges: Vec<EffectExchange> = Vec::new();
        let secret = call
            .signing_secret
            .as_ref()
            .map(|s| s.expose_secret().to_owned());
        let run = async {
            loop {
                match step {
                    Step::Done(outcome) => return outcome,
                    Step::Effect(request, suspended) => {
                        let key = match call.read_cache.lookup(tool, &request) {
                            Lookup::Hit(outcome) => {
                                tracing::debug!(name: "tool_effect_cached", tool_name = %tool.name(), function_call_id = %invocation.function_call_id, "tool_effect_cached");
                                metrics::counter!("switchboard_effects_cached_total").increment(1);
                                exchanges.push(EffectExchange {
                                    request,
                                    outcome: outcome.clone(),
                                    cached: true,
                                });
                                step = suspended.resume(outcome);
                                continue;
                            }
                            Lookup::Miss(key) => Some(key),
                            Lookup::Uncached => None,
                        };
                        let outcome = if gate.before_effect(&request, &suspended).await {
                            let scope = EffectScope {
                                tenant_id: &call.tenant_id,
                                call_id: &invocation.call_id,
                                function_call_id: &invocation.function_call_id,
                                signing_secret: secret.as_deref(),
                                transfers,
                                remaining: deadline.saturating_sub(started.elapsed()),
                                caller: caller.as_deref(),
                                tool_config: &entry.config,
                                tool_secrets: &entry.secrets,
                            };
                            let perform = self.effects.perform(&scope, &request, &mut actions);
                            match self.traces.effect(&request) {
                                Some(cx) => {
                                    let outcome = perform.with_context(cx.clone()).await;
                                    crate::traces::end_effect(&cx, &outcome);
                                    outcome
                                }
                                None => perform.await,
                            }
                        } else {
                            EffectOutcome::Failed(interrupted(&request))
                        };
                        if let Some(key) = key {
                            call.read_cache.store(tool, key, &outcome);
                        }
                        exchanges.push(EffectExchange {
                            request,
                            outcome: outcome.clone(),
                            cached: false,
                        });
                        step = suspended.resume(outcome);
                    }
                }
            }
        };
        let outcome = match tokio::time::timeout(deadline.saturating_sub(started.elapsed()), run)
            .await
        {
            Ok(o) => o,
            Err(_) => Outcome::failed(
                tool.name(),
                ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{} did not finish within {} s. Tell the caller it is taking too long and offer to try again.",
                        tool.name(),
                        deadline.as_secs_f64()
                    ),
                ),
            ),
        };
        let exec = ended(tool, invocation, outcome, actions, started);
        (exec, exchanges)
    }
}

fn log_start(invocation: &Invocation) {
    tracing::debug!(
        name: "tool_executor_execute_started",
        tool_name = %invocation.name,
        function_call_id = %invocation.function_call_id,
        response_id = invocation.response_id.as_deref().unwrap_or_default(),
        "tool_executor_execute_started"
    );
}

/// A run's first step, and what replaying it will need: its input and the context it met.
fn begin(
    call: &CallConfig,
    entry: &ToolEntry,
    ctx: &Context,
    invocation: &Invocation,
) -> (Step, RunTrace) {
    let input = RunInput {
        function_call_id: invocation.function_call_id.clone(),
        config: Arc::clone(&entry.config),
        secrets: Arc::clone(&entry.secrets),
        agents: Some(call.agents.keys().cloned().collect()),
        refer: call.refer.clone(),
        now: Arc::new(Value::String(crate::now_rfc3339())),
    };
    let trace = RunTrace::new(&input, ctx);
    let step = switchboard_core::start(&entry.tool, input, &invocation.arguments_json, ctx);
    (step, trace)
}

/// How a run ended, logged as the one line of its end.
fn ended(
    tool: &Arc<Tool>,
    invocation: &Invocation,
    outcome: Outcome,
    call_actions: Vec<CallAction>,
    started: Instant,
) -> Execution {
    let elapsed = started.elapsed();
    tracing::info!(
        name: "tool_executor_execute_finished",
        tool_name = %tool.name(),
        function_call_id = %invocation.function_call_id,
        ok = outcome.ok(),
        error = outcome.code().map(|c| c.as_str()).unwrap_or_default(),
        elapsed_ms = elapsed.as_secs_f64() * 1000.0,
        "tool_executor_execute_finished"
    );
    Execution {
        outcome,
        tool: Some(Arc::clone(tool)),
        call_actions,
        elapsed,
        trace: None,
    }
}

/// The caller's number, for per-caller toolkits: read from the suspended run's context.
fn ctx_caller(step: &Step) -> Option<String> {
    match step {
        Step::Effect(_, s) => s.caller(),
        Step::Done(_) => None,
    }
}

/// The answer for a terminal effect the caller's interruption stopped.
fn interrupted(request: &EffectRequest) -> ToolError {
    let what = match request {
        EffectRequest::Transfer(_) => "The caller interrupted; the call was not transferred.",
        EffectRequest::EndCall(_) => "The caller interrupted; the call was not ended.",
        _ => "The caller interrupted; this was not done.",
    };
    ToolError::new(ErrorCode::Cancelled, what)
}
