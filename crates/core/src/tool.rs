//! A tool: its definition parsed once into validated, compiled form.
//!
//! "Parse, don't validate": [`Tool::parse`] checks everything a definition can get wrong (every
//! problem at once, each with its JSON Pointer and a fix), compiles its templates and its
//! argument validator, and the rest of Switchboard never checks a tool again.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::actions::{self, Action, ActionKind, BlockId, ParseCx};
use crate::diag::{Diagnostic, Diagnostics, Sink};
use crate::function::FunctionDef;
use crate::limits::Limits;
use crate::params::{self, ArgValidator, Parameters};
use crate::reader::Obj;

/// A tool name as models accept it: `^[a-zA-Z0-9_-]{1,64}$`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ToolName(String);

impl ToolName {
    /// Checks a name; the error says what is allowed.
    pub fn parse(s: &str) -> Result<ToolName, String> {
        if s.is_empty()
            || s.len() > 64
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "tool name `{s}` must be 1-64 letters, digits, `_` or `-`"
            ));
        }
        Ok(ToolName(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ToolName::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What interrupting a tool may do to the world (DESIGN.md "Interruptions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SideEffect {
    /// Safe to abort: nothing outside changes.
    Read,
    /// Never aborted once started: it runs to its end and its result is delivered.
    Write,
    /// Moves or ends the call: performed only once the response that asked for it completes.
    Terminal,
}

impl SideEffect {
    /// The class as tool definitions write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::Read => "read",
            SideEffect::Write => "write",
            SideEffect::Terminal => "terminal",
        }
    }

    fn parse(s: &str) -> Option<SideEffect> {
        Some(match s {
            "read" => SideEffect::Read,
            "write" => SideEffect::Write,
            "terminal" => SideEffect::Terminal,
            _ => return None,
        })
    }
}

/// What the model says while a slow tool runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Messages {
    /// Said as the tool starts.
    pub start: Option<String>,
    /// Said once if the result is not ready after `delayed_after_ms`.
    pub delayed: Option<String>,
    pub delayed_after_ms: u64,
}

/// Default seconds a whole tool may run.
pub const DEFAULT_TIMEOUT_S: f64 = 20.0;
/// Default window in which a repeated write with the same arguments is not run again.
pub const DEFAULT_DEDUPE_WINDOW_S: u64 = 30;
/// Default wait before `messages.delayed` is said.
pub const DEFAULT_DELAYED_AFTER_MS: u64 = 1500;
/// Longest a `read` tool's effect outcomes may be kept for identical requests in a call.
pub const MAX_CACHE_TTL_S: f64 = 3600.0;

const TOOL_FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "actions",
    "on_success",
    "on_failure",
    "timeout",
    "side_effect",
    "dedupe_window_s",
    "async",
    "messages",
    "delayed_after_ms",
    "cache_ttl_s",
];
const MESSAGE_FIELDS: &[&str] = &["start", "delayed", "delayed_after_ms"];

/// `async`: `true` (always in the background), `false` (never), or `"when_slow"` (when the
/// tool is expected to outlast the agent's turn budget). Returns (always, when slow).
fn read_async(obj: &Obj<'_>, sink: &mut Sink) -> (bool, bool) {
    match obj.get("async") {
        None | Some(Value::Bool(false)) => (false, false),
        Some(Value::Bool(true)) => (true, false),
        Some(Value::String(s)) if s == "when_slow" => (false, true),
        Some(other) => {
            sink.error_fix(
                &obj.at("async"),
                format!("`async` must be true, false or \"when_slow\", not {other}"),
                "use `true` to always answer \"started\" at once, or `\"when_slow\"` to do so only when the tool is expected to take longer than the agent's turn budget",
            );
            (false, false)
        }
    }
}

/// A parsed, compiled tool definition, shared by every run of this version.
#[derive(Debug)]
pub struct Tool {
    name: ToolName,
    description: String,
    parameters: Parameters,
    args: ArgValidator,
    pub(crate) blocks: Vec<Vec<Action>>,
    timeout_ms: u64,
    /// Whether the author set `timeout` (if not, the runtime may shorten the default to what
    /// the tool has been seen to need).
    timeout_declared: bool,
    side_effect: SideEffect,
    /// Whether an action can ask for an effect (see [`Tool::requests_effects`]).
    requests_effects: bool,
    dedupe_window_s: u64,
    is_async: bool,
    /// `"async": "when_slow"`: answered at once and run in the background when the tool is
    /// expected to take longer than the agent's turn budget.
    async_when_slow: bool,
    /// Seconds an identical effect request's outcome is reused within a call (`read` tools).
    cache_ttl_s: Option<u32>,
    messages: Messages,
    source: Value,
    pub(crate) limits: Limits,
    /// The function definitions, built once: toolsets share them rather than rebuild them.
    function: Arc<FunctionDef>,
    strict_function: Arc<FunctionDef>,
    /// What this compiled tool holds on the heap, estimated (see [`Tool::heap_bytes`]).
    heap_bytes: u64,
    /// The origins its `api_call`s name literally (see [`Tool::upstream_origins`]).
    origins: Vec<String>,
}

impl Tool {
    /// Parses a definition from JSON text; syntax errors name their line and column.
    pub fn parse_str(text: &str, limits: &Limits) -> Result<Tool, Diagnostics> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Diagnostics(vec![Diagnostic::json_syntax(&e)]))?;
        Tool::parse(&v, limits)
    }

    /// Parses and compiles a definition, reporting every problem in one pass.
    pub fn parse(def: &Value, limits: &Limits) -> Result<Tool, Diagnostics> {
        let mut sink = Sink::default();
        let tool = read_tool(def, limits, &mut sink);
        match tool {
            Some(t) if sink.items.is_empty() => Ok(t),
            _ => Err(Diagnostics(sink.items)),
        }
    }

    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    /// The argument validator, compiled once with the tool.
    pub fn arguments(&self) -> &ArgValidator {
        &self.args
    }

    /// Deadline for the whole tool.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// Declared, or inferred from the actions (transfer/end_call → terminal; writes → write).
    pub fn side_effect(&self) -> SideEffect {
        self.side_effect
    }

    /// Whether any action can ask for an effect outside the call (`api_call`, `mcp.call`, a
    /// toolkit's action, `transfer`, `end_call`), whatever `side_effect` declares. A tool that
    /// cannot only reads and changes the call's own state (context, flags, agent) and answers,
    /// in memory: the runtime journals its run as one record, with no claim before it.
    pub fn requests_effects(&self) -> bool {
        self.requests_effects
    }

    /// Seconds in which the same write with the same arguments is answered from the first run.
    pub fn dedupe_window_s(&self) -> u64 {
        self.dedupe_window_s
    }

    /// Answered at once with "started"; runs to its end in the background.
    pub fn is_async(&self) -> bool {
        self.is_async
    }

    /// `"async": "when_slow"`: run in the background (answered "started") only when the
    /// tool is expected to take longer than the agent's turn budget.
    pub fn is_async_when_slow(&self) -> bool {
        self.async_when_slow
    }

    /// Whether the definition sets `timeout`; if not, [`Tool::timeout_ms`] is the default.
    pub fn timeout_declared(&self) -> bool {
        self.timeout_declared
    }

    /// Seconds in which an identical effect request of this tool, in the same call, is
    /// answered with the outcome it had (`cache_ttl_s`; only a `read` tool has one).
    pub fn cache_ttl_s(&self) -> Option<u32> {
        self.cache_ttl_s
    }

    pub fn messages(&self) -> &Messages {
        &self.messages
    }

    /// The definition as it was given.
    pub fn source(&self) -> &Value {
        &self.source
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// About how many bytes of heap this compiled tool holds (its definition's copies, its
    /// compiled templates and argument validator), for caches bounded by bytes; it errs
    /// towards more (see [`crate::compiled_size`]).
    pub fn heap_bytes(&self) -> u64 {
        self.heap_bytes
    }

    /// The function a model sees; `strict` gives the OpenAI strict-mode schema (a raw JSON
    /// Schema is used as given either way).
    pub fn function_def(&self, strict: bool) -> Arc<FunctionDef> {
        Arc::clone(if strict {
            &self.strict_function
        } else {
            &self.function
        })
    }

    /// `scheme://host[:port]` of each `api_call` whose URL writes its origin out (no template
    /// hole before the end of its host and port), each once: where a call may connect ahead.
    pub fn upstream_origins(&self) -> &[String] {
        &self.origins
    }

    pub(crate) fn block(&self, id: BlockId) -> &[Action] {
        self.blocks
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

fn read_tool(def: &Value, limits: &Limits, sink: &mut Sink) -> Option<Tool> {
    let obj = Obj::new(def, "", "the tool", TOOL_FIELDS, sink)?;
    let name = obj
        .req_str("name", sink)
        .and_then(|n| match ToolName::parse(n) {
            Ok(n) => Some(n),
            Err(e) => {
                sink.error_fix(&obj.at("name"), e, "rename the tool, e.g. `save_meal`");
                None
            }
        });
    let description = obj
        .req_str("description", sink)
        .unwrap_or_default()
        .to_owned();
    if obj.get("description").is_some() && description.trim().is_empty() {
        sink.error_fix(
            &obj.at("description"),
            "the description is empty",
            "say what the tool does: the model reads it to decide when to call it",
        );
    }
    let parameters = match obj.get("parameters") {
        Some(v) => params::parse(v, &obj.at("parameters"), limits.max_parameters, sink),
        None => Parameters::Typed(Vec::new()),
    };

    let mut cx = ParseCx::new(sink, limits, parameters.names());
    for (key, id) in [
        ("actions", actions::ACTIONS),
        ("on_success", actions::ON_SUCCESS),
        ("on_failure", actions::ON_FAILURE),
    ] {
        if let Some(v) = cx.field_of(&obj, key) {
            cx.fill_block(id, v, &obj.at(key), 0);
        }
    }
    let action_count = cx.action_count();
    let holes = cx.template_holes();
    let engine_exprs = cx.engine_expressions();
    let blocks = cx.finish();
    if holes > limits.max_template_holes {
        let tool = obj
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| "the tool".to_owned(), |n| format!("tool `{n}`"));
        sink.error_fix(
            "",
            format!(
                "{tool} has {holes} template holes and expressions, over the limit of {} (max_template_holes)",
                limits.max_template_holes
            ),
            "build values in fewer expressions (one `{{ }}` can make a whole object or list), move the work into one `api_call` to your backend, or raise max_template_holes with `serve --limits`",
        );
    }
    if action_count > limits.max_actions {
        sink.error_fix(
            "/actions",
            format!(
                "{action_count} actions, over the limit of {}",
                limits.max_actions
            ),
            "split the tool, or move work into one `api_call` to your backend",
        );
    }

    let declared_timeout = obj.number_in("timeout", 0.001, limits.max_timeout_s, sink);
    let timeout_s = declared_timeout.unwrap_or(DEFAULT_TIMEOUT_S);
    let declared = obj
        .str("side_effect", sink)
        .and_then(|s| match SideEffect::parse(s) {
            Some(se) => Some(se),
            None => {
                sink.error_fix(
                    &obj.at("side_effect"),
                    format!("unknown side_effect `{s}`"),
                    "use `read`, `write` or `terminal`",
                );
                None
            }
        });
    let dedupe_window_s = obj
        .number_in("dedupe_window_s", 0.0, 86_400.0, sink)
        .map(|n| n as u64)
        .unwrap_or(DEFAULT_DEDUPE_WINDOW_S);
    let (is_async, async_when_slow) = read_async(&obj, sink);
    let cache_ttl_s = obj
        .number_in("cache_ttl_s", 1.0, MAX_CACHE_TTL_S, sink)
        .map(|n| n.round() as u32);
    let messages = read_messages(&obj, sink);
    obj.finish(sink);

    let side_effect = declared.unwrap_or_else(|| infer_side_effect(&blocks));
    let requests_effects = blocks.iter().flatten().any(|a| a.kind.requests_effect());
    let mut origins: Vec<String> = Vec::new();
    for a in blocks.iter().flatten() {
        if let ActionKind::ApiCall(c) = &a.kind
            && let Some(o) = c.literal_origin()
            && !origins.contains(&o)
        {
            origins.push(o);
        }
    }
    if (is_async || async_when_slow) && side_effect == SideEffect::Terminal {
        sink.error_fix(
            "/async",
            "a terminal tool (transfer, end_call) cannot be async",
            "remove `async`",
        );
    }
    if cache_ttl_s.is_some() && side_effect != SideEffect::Read {
        let what = if declared.is_some() {
            "declares"
        } else {
            "is inferred (from its actions) as"
        };
        sink.error_fix(
            "/cache_ttl_s",
            format!(
                "only a read tool's effects can be reused, and this tool {what} side_effect `{}`",
                side_effect.as_str()
            ),
            "remove `cache_ttl_s`, or, if the tool only reads (its POST changes nothing), declare `\"side_effect\": \"read\"`",
        );
    }
    let parameters_ok = sink
        .items
        .iter()
        .all(|d| !d.pointer.starts_with("/parameters"));
    let args = if parameters_ok {
        match ArgValidator::new(&parameters) {
            Ok(a) => Some(a),
            Err(e) => {
                sink.error(
                    "/parameters",
                    format!("the parameters do not make a valid JSON Schema: {e}"),
                );
                None
            }
        }
    } else {
        None
    };
    let name = name?;
    let function = Arc::new(FunctionDef {
        name: name.to_string(),
        description: description.clone(),
        parameters: parameters.json_schema(),
        strict: false,
    });
    let strict_function = match parameters.strict_schema() {
        Some(schema) => Arc::new(FunctionDef {
            parameters: schema,
            strict: true,
            ..(*function).clone()
        }),
        None => Arc::clone(&function),
    };
    Some(Tool {
        function,
        strict_function,
        name,
        description,
        parameters,
        args: args?,
        blocks,
        timeout_ms: (timeout_s * 1000.0).round() as u64,
        timeout_declared: declared_timeout.is_some(),
        side_effect,
        requests_effects,
        dedupe_window_s,
        is_async,
        async_when_slow,
        cache_ttl_s,
        messages,
        source: def.clone(),
        limits: limits.clone(),
        heap_bytes: crate::compiled_size::estimate(def, holes, engine_exprs),
        origins,
    })
}

fn read_messages(obj: &Obj<'_>, sink: &mut Sink) -> Messages {
    let top_delay = obj.number_in("delayed_after_ms", 0.0, 600_000.0, sink);
    let mut m = Messages {
        start: None,
        delayed: None,
        delayed_after_ms: top_delay
            .map(|n| n as u64)
            .unwrap_or(DEFAULT_DELAYED_AFTER_MS),
    };
    let Some(v) = obj.get("messages") else {
        return m;
    };
    let Some(mo) = Obj::new(v, &obj.at("messages"), "`messages`", MESSAGE_FIELDS, sink) else {
        return m;
    };
    m.start = mo.str("start", sink).map(str::to_owned);
    m.delayed = mo.str("delayed", sink).map(str::to_owned);
    if let Some(ms) = mo.number_in("delayed_after_ms", 0.0, 600_000.0, sink) {
        m.delayed_after_ms = ms as u64;
    }
    mo.finish(sink);
    m
}

/// DESIGN.md's rule: transfer/end_call make a tool terminal; a non-GET/HEAD `api_call`,
/// `email.send`, `calendar.create_event`, `memory.create` or `mcp.call` make it a write.
fn infer_side_effect(blocks: &[Vec<Action>]) -> SideEffect {
    let kinds = || blocks.iter().flatten().map(|a| &a.kind);
    if kinds().any(|k| matches!(k, ActionKind::Transfer(_) | ActionKind::EndCall(_))) {
        SideEffect::Terminal
    } else if kinds().any(ActionKind::is_write) {
        SideEffect::Write
    } else {
        SideEffect::Read
    }
}

/// A tool that serialises as its definition, so a suspended run carries it and can be resumed in
/// another process (which parses and compiles it again).
#[derive(Debug, Clone)]
pub struct SharedTool(pub Arc<Tool>);

impl Serialize for SharedTool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Repr<'a> {
            definition: &'a Value,
            limits: &'a Limits,
        }
        Repr {
            definition: &self.0.source,
            limits: &self.0.limits,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SharedTool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Repr {
            definition: Value,
            limits: Limits,
        }
        let r = Repr::deserialize(d)?;
        Tool::parse(&r.definition, &r.limits)
            .map(|t| SharedTool(Arc::new(t)))
            .map_err(serde::de::Error::custom)
    }
}
