//! The action types of a tool's pipeline, one file each: its fields, how it is parsed, and what
//! it does when it runs (a small pure function over the run's state).

use std::sync::Arc;

use serde_json::Value;

use crate::context::{ReadPath, Scope, Target, Write, WritePath, set_in};
use crate::diag::{Sink, child, did_you_mean};
use crate::effect::{EffectOutcome, EffectRequest};
use crate::error::{ErrorCode, ToolError};
use crate::interp::RunState;
use crate::json_bounds;
use crate::limits::Limits;
use crate::reader::{Obj, list, type_name};
use crate::result::{LogEntry, LogLevel};
use crate::template::{EvalError, Expr, RunScopes, StrTemplate, ValueTemplate, VarRef, Vars};
use crate::tool::Tool;

mod api_call;
mod conditional;
mod context_delete;
mod context_get;
mod context_set;
mod end_call;
mod flags;
mod handoff;
mod log;
mod mcp_call;
mod respond;
mod toolkit;
mod transfer;
mod transform;
mod validate;

/// Index of a block (a list of actions) in a tool's block arena.
pub(crate) type BlockId = u32;
/// The tool's `actions`.
pub(crate) const ACTIONS: BlockId = 0;
/// The tool's `on_success`.
pub(crate) const ON_SUCCESS: BlockId = 1;
/// The tool's `on_failure`.
pub(crate) const ON_FAILURE: BlockId = 2;

/// Every action type a tool may use.
pub const ACTION_TYPES: &[&str] = &[
    "context.set",
    "context.get",
    "context.delete",
    "api_call",
    "handoff",
    "respond",
    "flag.set",
    "flag.clear",
    "conditional",
    "validate",
    "transform",
    "log",
    "transfer",
    "end_call",
    "mcp.call",
    "email.send",
    "calendar.list_events",
    "calendar.create_event",
    "calendar.check_availability",
    "calendar.find_bookings",
    "calendar.cancel_event",
    "calendar.reschedule_event",
    "calendar.find_free_slots",
    "memory.search",
    "memory.create",
    "memory.traverse",
];

/// Whether a toolkit action type changes the world (for effect classification).
pub(crate) fn toolkit_is_write(action: &str) -> bool {
    toolkit::is_write(action)
}

/// Scopes a template may read.
const SCOPES: &[&str] = &[
    "params", "user", "workflow", "agents", "agent", "flags", "call", "config", "secrets",
    "response", "result", "now",
];
/// Functions the template engine provides, which look like variables to its analysis.
const ENGINE_GLOBALS: &[&str] = &["range", "dict", "namespace", "debug"];

/// One parsed action, with its place in the definition.
#[derive(Debug)]
pub(crate) struct Action {
    /// Pre-order number in the tool, stable across versions of the same shape; used in
    /// idempotency keys.
    pub(crate) id: u32,
    /// JSON Pointer in the definition, for messages.
    pub(crate) ptr: Arc<str>,
    pub(crate) kind: ActionKind,
    /// Whether its templates read the call's context (`workflow`, `agent(s)`, `flags`): the
    /// run's pending writes are applied to its copy before such an action runs.
    pub(crate) reads_context: bool,
}

/// The closed set of action types.
#[derive(Debug)]
pub(crate) enum ActionKind {
    ContextSet(context_set::ContextSet),
    ContextGet(context_get::ContextGet),
    ContextDelete(context_delete::ContextDelete),
    ApiCall(Box<api_call::ApiCall>),
    Handoff(handoff::Handoff),
    Respond(respond::Respond),
    FlagSet(flags::Flags),
    FlagClear(flags::Flags),
    Conditional(conditional::Conditional),
    Validate(validate::Validate),
    Transform(Box<transform::Transform>),
    Log(log::Log),
    Transfer(transfer::Transfer),
    EndCall(end_call::EndCall),
    McpCall(mcp_call::McpCall),
    Toolkit(toolkit::ToolkitCall),
}

impl ActionKind {
    /// Whether the action changes the world outside the call (DESIGN.md's inference rule).
    pub(crate) fn is_write(&self) -> bool {
        match self {
            ActionKind::ApiCall(a) => a.is_write(),
            ActionKind::McpCall(_) => true,
            ActionKind::Toolkit(t) => t.spec.write,
            _ => false,
        }
    }

    /// Whether the action can suspend the run for an [`EffectRequest`].
    pub(crate) fn requests_effect(&self) -> bool {
        match self {
            ActionKind::ApiCall(_)
            | ActionKind::McpCall(_)
            | ActionKind::Toolkit(_)
            | ActionKind::Transfer(_)
            | ActionKind::EndCall(_) => true,
            ActionKind::ContextSet(_)
            | ActionKind::ContextGet(_)
            | ActionKind::ContextDelete(_)
            | ActionKind::Handoff(_)
            | ActionKind::Respond(_)
            | ActionKind::FlagSet(_)
            | ActionKind::FlagClear(_)
            | ActionKind::Conditional(_)
            | ActionKind::Validate(_)
            | ActionKind::Transform(_)
            | ActionKind::Log(_) => false,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            ActionKind::ContextSet(_) => "context.set",
            ActionKind::ContextGet(_) => "context.get",
            ActionKind::ContextDelete(_) => "context.delete",
            ActionKind::ApiCall(_) => "api_call",
            ActionKind::Handoff(_) => "handoff",
            ActionKind::Respond(_) => "respond",
            ActionKind::FlagSet(_) => "flag.set",
            ActionKind::FlagClear(_) => "flag.clear",
            ActionKind::Conditional(_) => "conditional",
            ActionKind::Validate(_) => "validate",
            ActionKind::Transform(_) => "transform",
            ActionKind::Log(_) => "log",
            ActionKind::Transfer(_) => "transfer",
            ActionKind::EndCall(_) => "end_call",
            ActionKind::McpCall(_) => "mcp.call",
            ActionKind::Toolkit(t) => t.spec.action,
        }
    }
}

/// What happens after an action ran.
#[derive(Debug)]
pub(crate) enum Flow {
    Next,
    /// Run a nested block (a `conditional` branch), then continue after this action.
    Enter(BlockId),
    /// Suspend until the effect's outcome is known; the action's `resume` handles it.
    Suspend(EffectRequest),
    Fail(ToolError),
}

impl Action {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match &self.kind {
            ActionKind::ContextSet(a) => a.run(x),
            ActionKind::ContextGet(a) => a.run(x),
            ActionKind::ContextDelete(a) => a.run(x),
            ActionKind::ApiCall(a) => a.run(x),
            ActionKind::Handoff(a) => a.run(x),
            ActionKind::Respond(a) => a.run(x),
            ActionKind::FlagSet(a) => a.run(x, true),
            ActionKind::FlagClear(a) => a.run(x, false),
            ActionKind::Conditional(a) => a.run(x),
            ActionKind::Validate(a) => a.run(x),
            ActionKind::Transform(a) => a.run(x),
            ActionKind::Log(a) => a.run(x),
            ActionKind::Transfer(a) => a.run(x),
            ActionKind::EndCall(a) => a.run(x),
            ActionKind::McpCall(a) => a.run(x),
            ActionKind::Toolkit(a) => a.run(x),
        }
    }

    /// Feeds an effect's outcome back to the action that asked for it.
    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        match &self.kind {
            ActionKind::ApiCall(a) => a.resume(x, outcome),
            ActionKind::Transfer(a) => a.resume(x, outcome),
            ActionKind::EndCall(a) => a.resume(x, outcome),
            ActionKind::McpCall(a) => a.resume(x, outcome),
            ActionKind::Toolkit(a) => a.resume(x, outcome),
            _ => Flow::Fail(x.internal(format!(
                "{} does not wait for effects",
                self.kind.type_name()
            ))),
        }
    }
}

/// State while a definition's actions are parsed: the block arena and the template checks.
pub(crate) struct ParseCx<'s> {
    pub(crate) sink: &'s mut Sink,
    pub(crate) limits: &'s Limits,
    params: Option<Vec<String>>,
    blocks: Vec<Vec<Action>>,
    next_id: u32,
    /// Whether the action being parsed reads a context scope.
    reads_context: bool,
    /// Template holes and expressions so far: compiled, or counted past `max_template_holes`.
    holes: usize,
    /// Of those compiled, the ones the template engine compiled.
    engine_exprs: usize,
}

/// Scopes backed by the call's context (as opposed to params, config, response, …).
const CONTEXT_SCOPES: &[&str] = &["workflow", "agents", "agent", "flags"];

impl<'s> ParseCx<'s> {
    pub(crate) fn new(sink: &'s mut Sink, limits: &'s Limits, params: Option<Vec<String>>) -> Self {
        ParseCx {
            sink,
            limits,
            params,
            blocks: vec![Vec::new(), Vec::new(), Vec::new()],
            next_id: 0,
            reads_context: false,
            holes: 0,
            engine_exprs: 0,
        }
    }

    /// Notes that the action being parsed reads scope `root`.
    pub(crate) fn mark_read(&mut self, root: &str) {
        if CONTEXT_SCOPES.contains(&root) {
            self.reads_context = true;
        }
    }

    pub(crate) fn field_of<'v>(&self, obj: &Obj<'v>, key: &str) -> Option<&'v Value> {
        obj.get(key)
    }

    pub(crate) fn action_count(&self) -> usize {
        self.next_id as usize
    }

    /// Template holes and expressions in the tool (see `max_template_holes`).
    pub(crate) fn template_holes(&self) -> usize {
        self.holes
    }

    /// Compiled expressions the template engine holds.
    pub(crate) fn engine_expressions(&self) -> usize {
        self.engine_exprs
    }

    /// Whether `n` more holes fit within `max_template_holes`. Past it they are counted, not
    /// compiled: the tool is refused whatever they hold, and compiling is what the limit bounds.
    fn admit(&mut self, n: usize) -> bool {
        if self.holes.saturating_add(n) > self.limits.max_template_holes {
            self.holes = self.holes.saturating_add(n);
            return false;
        }
        true
    }

    /// Counts a compiled expression and checks the names it reads.
    fn compiled(&mut self, e: &Expr, ptr: &str, extra: &[&str]) {
        self.holes = self.holes.saturating_add(1);
        if e.uses_engine() {
            self.engine_exprs = self.engine_exprs.saturating_add(1);
        }
        self.check_vars(e, ptr, extra);
    }

    pub(crate) fn finish(self) -> Vec<Vec<Action>> {
        self.blocks
    }

    /// Parses a list of actions into block `id`.
    pub(crate) fn fill_block(&mut self, id: BlockId, v: &Value, ptr: &str, depth: usize) {
        let Value::Array(items) = v else {
            self.sink.error_fix(
                ptr,
                format!("must be a list of actions, found {}", type_name(v)),
                "write `[{\"type\": \"respond\", \"message\": \"…\"}]`",
            );
            return;
        };
        let mut actions = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(a) = self.parse_action(item, &child(ptr, i), depth) {
                actions.push(a);
            }
        }
        if let Some(slot) = self.blocks.get_mut(id as usize) {
            *slot = actions;
        }
    }

    /// Parses a nested list of actions (a branch) into a new block.
    pub(crate) fn nested_block(&mut self, v: &Value, ptr: &str, depth: usize) -> BlockId {
        let id = self.blocks.len() as BlockId;
        self.blocks.push(Vec::new());
        if depth > self.limits.max_depth {
            self.sink.error_fix(
                ptr,
                format!(
                    "branches nest {depth} deep, over the limit of {}",
                    self.limits.max_depth
                ),
                "flatten the conditions, e.g. with `and`",
            );
            return id;
        }
        self.fill_block(id, v, ptr, depth);
        id
    }

    fn parse_action(&mut self, v: &Value, ptr: &str, depth: usize) -> Option<Action> {
        let ty = match v.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => {
                self.sink.error(
                    &child(ptr, "type"),
                    format!(
                        "an action's `type` must be a string, found {}",
                        type_name(other)
                    ),
                );
                return None;
            }
            None if v.is_object() => {
                self.sink.error_fix(
                    ptr,
                    "the action has no `type`",
                    format!("add `\"type\"`: one of {}", list(ACTION_TYPES)),
                );
                return None;
            }
            None => {
                self.sink.error(
                    ptr,
                    format!("an action must be an object, found {}", type_name(v)),
                );
                return None;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let outer_reads = std::mem::replace(&mut self.reads_context, false);
        let kind = self.parse_kind(v, ptr, ty, depth);
        let reads_context = std::mem::replace(&mut self.reads_context, outer_reads);
        Some(Action {
            id,
            ptr: ptr.into(),
            kind: kind?,
            reads_context,
        })
    }

    fn parse_kind(&mut self, v: &Value, ptr: &str, ty: &str, depth: usize) -> Option<ActionKind> {
        let what = format!("action `{ty}`");
        macro_rules! parse {
            ($module:ident, $variant:expr) => {{
                let obj = Obj::new(v, ptr, &what, $module::FIELDS, self.sink)?;
                let parsed = $module::parse(self, &obj, depth);
                obj.finish(self.sink);
                parsed.map($variant)
            }};
        }
        match ty {
            "context.set" => parse!(context_set, ActionKind::ContextSet),
            "context.get" => parse!(context_get, ActionKind::ContextGet),
            "context.delete" => parse!(context_delete, ActionKind::ContextDelete),
            "api_call" => parse!(api_call, |a| ActionKind::ApiCall(Box::new(a))),
            "handoff" => parse!(handoff, ActionKind::Handoff),
            "respond" => parse!(respond, ActionKind::Respond),
            "flag.set" => parse!(flags, ActionKind::FlagSet),
            "flag.clear" => parse!(flags, ActionKind::FlagClear),
            "conditional" => parse!(conditional, ActionKind::Conditional),
            "validate" => parse!(validate, ActionKind::Validate),
            "transform" => parse!(transform, |a| ActionKind::Transform(Box::new(a))),
            "log" => parse!(log, ActionKind::Log),
            "transfer" => parse!(transfer, ActionKind::Transfer),
            "end_call" => parse!(end_call, ActionKind::EndCall),
            "mcp.call" => parse!(mcp_call, ActionKind::McpCall),
            other if toolkit::spec(other).is_some() => {
                let spec = toolkit::spec(other)?;
                let obj = Obj::new(v, ptr, &what, spec.fields, self.sink)?;
                let parsed = toolkit::parse(self, &obj, spec);
                obj.finish(self.sink);
                parsed.map(ActionKind::Toolkit)
            }
            other => {
                let fix = match did_you_mean(other, ACTION_TYPES.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of {}", list(ACTION_TYPES)),
                };
                self.sink.error_fix(
                    &child(ptr, "type"),
                    format!("unknown action type `{other}`"),
                    fix,
                );
                None
            }
        }
    }

    /// A required or optional template field.
    pub(crate) fn template(
        &mut self,
        obj: &Obj<'_>,
        key: &str,
        required: bool,
    ) -> Option<StrTemplate> {
        let src = if required {
            obj.req_str(key, self.sink)?
        } else {
            obj.str(key, self.sink)?
        };
        self.compile_template(src, &obj.at(key))
    }

    pub(crate) fn compile_template(&mut self, src: &str, ptr: &str) -> Option<StrTemplate> {
        if !self.admit(crate::template::hole_count(src)) {
            return None;
        }
        match StrTemplate::compile(src) {
            Ok(t) => {
                for e in t.exprs() {
                    self.compiled(e, ptr, &[]);
                }
                Some(t)
            }
            Err(e) => {
                self.sink.push(ptr, e.message, e.fix);
                None
            }
        }
    }

    /// A JSON value with templates in its strings.
    pub(crate) fn value_template(&mut self, v: &Value, ptr: &str) -> ValueTemplate {
        if !self.admit(crate::template::value_hole_count(v)) {
            return ValueTemplate::Literal(v.clone());
        }
        let mut errors = Vec::new();
        let t = ValueTemplate::compile(v, &mut |at, e| errors.push((format!("{ptr}{at}"), e)));
        for (at, e) in errors {
            self.sink.push(&at, e.message, e.fix);
        }
        for e in t.exprs() {
            self.compiled(e, ptr, &[]);
        }
        t
    }

    /// An expression written bare or as one `{{ }}`; `extra` names scopes it may also read.
    pub(crate) fn expr(&mut self, src: &str, ptr: &str, extra: &[&str]) -> Option<Expr> {
        if !self.admit(1) {
            return None;
        }
        match Expr::compile_condition(src) {
            Ok(e) => {
                self.compiled(&e, ptr, extra);
                Some(e)
            }
            Err(e) => {
                self.sink.push(ptr, e.message, e.fix);
                None
            }
        }
    }

    pub(crate) fn write_path(&mut self, src: &str, ptr: &str) -> Option<WritePath> {
        match WritePath::parse(src) {
            Ok(p) => Some(p),
            Err(e) => {
                self.sink.push(ptr, e.message, Some(e.fix));
                None
            }
        }
    }

    /// Undefined scope roots and unknown parameters are found here, when the tool is saved.
    fn check_vars(&mut self, e: &Expr, ptr: &str, extra: &[&str]) {
        for var in e.variables() {
            let (root, sub) = match var.split_once('.') {
                Some((r, s)) => (r, Some(s)),
                None => (var.as_str(), None),
            };
            self.mark_read(root);
            if SCOPES.contains(&root) || extra.contains(&root) || ENGINE_GLOBALS.contains(&root) {
                if let (Some(sub), Some(names), "params") = (sub, &self.params, root)
                    && !names.iter().any(|n| n == sub)
                {
                    let fix = match did_you_mean(sub, names.iter().map(String::as_str)) {
                        Some(s) => format!("did you mean `params.{s}`?"),
                        None => format!(
                            "declare a parameter `{sub}`, or read one of {}",
                            list(&names.iter().map(String::as_str).collect::<Vec<_>>())
                        ),
                    };
                    self.sink.error_fix(
                        ptr,
                        format!(
                            "{}`params.{sub}` is not a parameter of this tool",
                            reads(e, &var)
                        ),
                        fix,
                    );
                }
                continue;
            }
            let scopes: Vec<&str> = SCOPES.iter().chain(extra.iter()).copied().collect();
            let fix = match did_you_mean(root, scopes.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!(
                    "names start with a scope ({}); for workflow state write `workflow.{root}`",
                    list(&scopes)
                ),
            };
            self.sink.error_fix(
                ptr,
                format!("{}`{root}` is not a scope", reads(e, root)),
                fix,
            );
        }
    }
}

/// "`expr` reads " when the expression is more than the name itself, for messages.
fn reads(e: &Expr, name: &str) -> String {
    let src = e.source();
    if src == name {
        String::new()
    } else {
        format!("`{src}` reads `{name}`: ")
    }
}

/// One action executing against the run's state.
pub(crate) struct Exec<'a> {
    pub(crate) tool: &'a Tool,
    pub(crate) st: &'a mut RunState,
    pub(crate) at: &'a Action,
}

impl Exec<'_> {
    /// Runs `f` with the run's scopes bound, plus `extra` (a transform's `item` and `acc`).
    pub(crate) fn with_vars<R>(
        &self,
        extra: &[(&'static str, VarRef<'_>)],
        f: impl FnOnce(&Vars<'_>) -> R,
    ) -> R {
        let st = &*self.st;
        let scopes = RunScopes {
            params: &st.params,
            context: &st.ctx,
            config: &st.input.config,
            secrets: &st.input.secrets,
            response: &st.response,
            result: &st.result,
            now: &st.input.now,
        };
        f(&Vars::resolved(&scopes, extra))
    }

    fn limit(&self) -> usize {
        self.tool.limits.max_template_output
    }

    /// Renders a JSON value with templates.
    pub(crate) fn eval(&self, t: &ValueTemplate) -> Result<Value, ToolError> {
        let limit = self.limit();
        self.with_vars(&[], |v| t.eval(v, limit))
            .map_err(|e| self.eval_error(e))
    }

    /// Renders a template string to text.
    pub(crate) fn render(&self, t: &StrTemplate) -> Result<String, ToolError> {
        let limit = self.limit();
        self.with_vars(&[], |v| t.render(v, limit))
            .map_err(|e| self.eval_error(e))
    }

    /// Evaluates a condition.
    pub(crate) fn truth(&self, e: &Expr) -> Result<bool, ToolError> {
        self.with_vars(&[], |v| e.eval_bool(v))
            .map_err(|err| self.eval_error(err))
    }

    /// A template failure: a defect of the tool, reported with its place.
    pub(crate) fn eval_error(&self, e: EvalError) -> ToolError {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!(
                "{} failed at {} ({}): {e}",
                self.tool.name(),
                self.at.ptr,
                self.at.kind.type_name()
            ),
        )
    }

    /// An internal inconsistency (a resumed run that does not match its tool).
    pub(crate) fn internal(&self, message: String) -> ToolError {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            format!("{} failed at {}: {message}", self.tool.name(), self.at.ptr),
        )
    }

    /// Checks that a value nests at most `max_json_depth` levels; `what` names it for the error.
    pub(crate) fn check_depth(
        &self,
        what: impl FnOnce() -> String,
        v: &Value,
    ) -> Result<(), ToolError> {
        let max = self.tool.limits.json_depth();
        json_bounds::check_depth(v, max).map_err(|_| {
            self.internal(format!(
                "{} nests deeper than {max} levels (the max_json_depth limit); keep it flatter",
                what()
            ))
        })
    }

    /// Writes a value to a path: `result.*` goes to the model, the rest to the call's context.
    /// Nothing deeper than `max_json_depth` is written, so whatever is kept can be read back.
    pub(crate) fn write(&mut self, path: &WritePath, value: Value) -> Result<(), ToolError> {
        self.check_depth(|| format!("the value for `{path}`"), &value)?;
        let scope = match &path.target {
            Target::Result => {
                return set_in(
                    Arc::make_mut(&mut self.st.result),
                    "result",
                    &path.keys,
                    value,
                    path.append,
                )
                .map_err(|e| self.internal(e.to_string()));
            }
            Target::Workflow => Scope::Workflow,
            Target::ActiveAgent => Scope::Agent(self.st.ctx.active_agent().to_owned()),
            Target::Agent(a) => Scope::Agent(a.clone()),
        };
        let keys = path.keys.clone();
        let w = if path.append {
            Write::Append { scope, keys, value }
        } else {
            Write::Set { scope, keys, value }
        };
        self.record(w)
    }

    /// Records a write after checking it against the run's view of the context. The write is
    /// applied to the run's copy only when something reads the context (see `materialize`), so
    /// a tool that writes without reading back never copies the call's state.
    fn record(&mut self, w: Write) -> Result<(), ToolError> {
        if self.st.writes[self.st.pending..]
            .iter()
            .any(|p| p.overlaps(&w))
        {
            self.st.materialize();
        }
        self.st
            .ctx
            .check(&w)
            .map_err(|e| self.internal(e.to_string()))?;
        self.st.writes.push(w);
        Ok(())
    }

    /// Deletes the value at a path; a missing one is fine.
    pub(crate) fn delete(&mut self, path: &WritePath) {
        let scope = match &path.target {
            Target::Result => {
                crate::context::delete_in(Arc::make_mut(&mut self.st.result), &path.keys);
                return;
            }
            Target::Workflow => Scope::Workflow,
            Target::ActiveAgent => Scope::Agent(self.st.ctx.active_agent().to_owned()),
            Target::Agent(a) => Scope::Agent(a.clone()),
        };
        // Deleting cannot fail; the write is kept so the live context drops the value too.
        let _ = self.record(Write::Delete {
            scope,
            keys: path.keys.clone(),
        });
    }

    /// Applies pending writes to the run's copy if this action reads the context.
    pub(crate) fn sync(&mut self) {
        if self.at.reads_context && self.st.pending < self.st.writes.len() {
            self.st.materialize();
        }
    }

    /// An effect's result: kept in `response`, and written to `into` when the action has one.
    pub(crate) fn keep_result(&mut self, value: Value, into: Option<&WritePath>) -> Flow {
        if let Err(e) = self.check_depth(|| "what the effect returned".to_owned(), &value) {
            return Flow::Fail(e);
        }
        self.st.response = Arc::new(value.clone());
        match into.map(|path| self.write(path, value)) {
            Some(Err(e)) => Flow::Fail(e),
            _ => Flow::Next,
        }
    }

    /// Records a flag change.
    pub(crate) fn flag(&mut self, name: &Arc<str>, set: bool) {
        let name = Arc::clone(name);
        let w = if set {
            Write::SetFlag { name }
        } else {
            Write::ClearFlag { name }
        };
        let _ = self.record(w);
    }

    /// Reads a path; a missing one is `null`.
    pub(crate) fn read(&self, path: &ReadPath) -> Value {
        self.with_vars(&[], |vars| {
            let mut node = vars.get(&path.root);
            for k in &path.keys {
                node = node.and_then(|n| n.get(k.as_str()));
            }
            node.cloned().unwrap_or(Value::Null)
        })
    }

    pub(crate) fn log(&mut self, level: LogLevel, message: String) {
        self.st.logs.push(LogEntry {
            level,
            message,
            action: self.at.ptr.clone(),
        });
    }

    /// The idempotency key of this action's effect: `{call_id}-{function_call_id}-{action index}`.
    pub(crate) fn idempotency_key(&self) -> String {
        let call_id = self
            .st
            .ctx
            .call
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        format!(
            "{call_id}-{}-{}",
            self.st.input.function_call_id, self.at.id
        )
    }
}
