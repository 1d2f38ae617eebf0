//! Per-call state and the writes tools make to it.
//!
//! A running tool never mutates the call's context directly: it records [`Write`]s, applies them
//! to its own copy (so it reads its own writes), and the call session applies the same writes to
//! the live context when the tool commits. Appends are recorded as appends, not as whole lists,
//! so two tools appending to one list concurrently both land.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Who the call is with and where it runs: the read-only `call` scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallInfo {
    pub id: String,
    pub tenant_id: String,
    /// The active agent.
    pub agent: String,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    /// RFC 3339 time the call started.
    pub started_at: String,
}

/// Who is calling, for per-caller toolkits such as memory: `call.from` when the call has a
/// number, else `user.id` (a string, or a number written as digits). Empty strings are nobody.
pub fn caller_of(call: &Value, user: &Value) -> Option<String> {
    let from = call.get("from").and_then(Value::as_str);
    if let Some(from) = from.filter(|f| !f.trim().is_empty()) {
        return Some(from.to_owned());
    }
    match user.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// The state of one call, scope by scope. Each scope is shared until written (copy on write).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// `call`: id, tenant_id, agent, from, to, started_at. Read-only for tools.
    pub call: Arc<Value>,
    /// `user`: given when the call is dispatched (e.g. `auth_token`). Read-only for tools.
    pub user: Arc<Value>,
    /// `workflow`: state shared by every agent of the call.
    pub workflow: Arc<Value>,
    /// `agents.<name>`: each agent's own state; `agent` is the active one's.
    pub agents: Arc<Value>,
    /// `flags`: workflow flags, `{name: true}`.
    pub flags: Arc<Value>,
}

impl Context {
    /// A fresh context for a call.
    pub fn new(call: &CallInfo, user: Value) -> Self {
        let user = if user.is_object() {
            user
        } else {
            Value::Object(Map::new())
        };
        Context {
            call: Arc::new(json!(call)),
            user: Arc::new(user),
            workflow: Arc::new(Value::Object(Map::new())),
            agents: Arc::new(Value::Object(Map::new())),
            flags: Arc::new(Value::Object(Map::new())),
        }
    }

    /// A context described as JSON — `{"agent", "user", "workflow", "agents", "flags"}`, each
    /// optional — for test runs of a tool outside a call.
    pub fn from_json(mut call: CallInfo, given: &Value) -> Result<Context, String> {
        let given = match given {
            Value::Null => &Map::new(),
            Value::Object(m) => m,
            _ => {
                return Err(
                    "the context must be an object: {\"user\": {...}, \"workflow\": {...}}"
                        .to_owned(),
                );
            }
        };
        if let Some(agent) = given.get("agent").and_then(Value::as_str) {
            call.agent = agent.to_owned();
        }
        let mut ctx = Context::new(
            &call,
            given
                .get("user")
                .cloned()
                .unwrap_or(Value::Object(Map::new())),
        );
        for (key, slot) in [
            ("workflow", &mut ctx.workflow),
            ("agents", &mut ctx.agents),
            ("flags", &mut ctx.flags),
        ] {
            match given.get(key) {
                None => {}
                Some(v @ Value::Object(_)) => *slot = Arc::new(v.clone()),
                Some(_) => return Err(format!("context.{key} must be an object")),
            }
        }
        Ok(ctx)
    }

    /// Whether `other` is this very context: every scope the same shared value, so nothing was
    /// written to either since one was copied from the other.
    pub fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.call, &other.call)
            && Arc::ptr_eq(&self.user, &other.user)
            && Arc::ptr_eq(&self.workflow, &other.workflow)
            && Arc::ptr_eq(&self.agents, &other.agents)
            && Arc::ptr_eq(&self.flags, &other.flags)
    }

    /// The active agent's name (`call.agent`).
    pub fn active_agent(&self) -> &str {
        crate::field::of(&self.call, "agent")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Makes another agent active; only the call session does this, when a handoff commits.
    pub fn set_active_agent(&mut self, agent: &str) {
        if let Value::Object(m) = Arc::make_mut(&mut self.call) {
            m.insert("agent".to_owned(), Value::String(agent.to_owned()));
        }
    }

    /// Applies one write, copying its value.
    pub fn apply(&mut self, write: &Write) -> Result<(), WriteError> {
        match write {
            Write::Set { scope, keys, value } => {
                set_at(self.scope_mut(scope), scope, keys, value.clone(), false)
            }
            Write::Append { scope, keys, value } => {
                set_at(self.scope_mut(scope), scope, keys, value.clone(), true)
            }
            other => {
                self.apply_valueless(other);
                Ok(())
            }
        }
    }

    /// Applies one write, moving its value into the context: what a commit does with writes
    /// it has no further use for.
    pub fn apply_owned(&mut self, write: Write) -> Result<(), WriteError> {
        match write {
            Write::Set { scope, keys, value } => {
                set_at(self.scope_mut(&scope), &scope, &keys, value, false)
            }
            Write::Append { scope, keys, value } => {
                set_at(self.scope_mut(&scope), &scope, &keys, value, true)
            }
            other => {
                self.apply_valueless(&other);
                Ok(())
            }
        }
    }

    /// A delete or a flag: writes that carry no value and cannot fail.
    fn apply_valueless(&mut self, write: &Write) {
        match write {
            Write::Delete { scope, keys } => delete_in(self.scope_mut(scope), keys),
            Write::SetFlag { name } => {
                if let Value::Object(m) = Arc::make_mut(&mut self.flags) {
                    m.insert(name.to_string(), Value::Bool(true));
                }
            }
            Write::ClearFlag { name } => {
                if let Value::Object(m) = Arc::make_mut(&mut self.flags) {
                    m.shift_remove(&**name);
                }
            }
            Write::Set { .. } | Write::Append { .. } => {}
        }
    }

    /// Checks that a write could be applied, without applying it (no copy of the scope).
    pub fn check(&self, write: &Write) -> Result<(), WriteError> {
        let (scope, keys, value, append) = match write {
            Write::Set { scope, keys, value } => (scope, keys, Some(value), false),
            Write::Append { scope, keys, value } => (scope, keys, Some(value), true),
            Write::Delete { .. } | Write::SetFlag { .. } | Write::ClearFlag { .. } => return Ok(()),
        };
        let path = || {
            let mut s = scope.to_string();
            for k in keys.iter() {
                s.push('.');
                s.push_str(k);
            }
            s
        };
        if keys.is_empty() {
            return match value {
                Some(v) if !append && v.is_object() => Ok(()),
                _ => Err(WriteError {
                    path: path(),
                    reason: "a whole scope can only be set to an object".to_owned(),
                }),
            };
        }
        let mut node = match scope {
            Scope::Workflow => Some(&*self.workflow),
            Scope::Agent(name) => crate::field::of(&self.agents, name),
        };
        for (i, key) in keys.iter().enumerate() {
            let Some(n) = node.filter(|n| !n.is_null()) else {
                return Ok(());
            };
            let Value::Object(m) = n else {
                return Err(WriteError {
                    path: path(),
                    reason: format!("`{}` is {}, not an object", keys[..i].join("."), kind(n)),
                });
            };
            node = crate::field::get(m, key);
        }
        match node {
            Some(slot) if append && !slot.is_null() && !slot.is_array() => Err(WriteError {
                path: path(),
                reason: format!("it holds {}, not a list to append to", kind(slot)),
            }),
            _ => Ok(()),
        }
    }

    fn scope_mut(&mut self, scope: &Scope) -> &mut Value {
        match scope {
            Scope::Workflow => Arc::make_mut(&mut self.workflow),
            Scope::Agent(name) => {
                let agents = Arc::make_mut(&mut self.agents);
                if !agents.is_object() {
                    *agents = Value::Object(Map::new());
                }
                // `agents` is an object now, so indexing inserts rather than panics.
                let slot = &mut agents[name.as_str()];
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                slot
            }
        }
    }

    /// Roughly how many bytes the writable state holds (its JSON size), for the context limit.
    pub fn approx_size(&self) -> usize {
        json_size(&self.workflow) + json_size(&self.agents) + json_size(&self.flags)
    }
}

/// Approximate JSON size of a value, without serialising it.
pub fn json_size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| json_size(x) + 1).sum::<usize>(),
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, x)| k.len() + 4 + json_size(x))
                .sum::<usize>()
        }
    }
}

/// Where a write lands in the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Workflow,
    /// One agent's state, by name (the active agent resolved when the write was made).
    Agent(String),
}

/// The keys below a scope that a write names, shared between a tool's write path and every
/// write it records (a copy is a count, not a list).
pub type Keys = Arc<[String]>;

/// One change to a call's context, recorded by a tool and applied when it commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Write {
    Set {
        scope: Scope,
        keys: Keys,
        value: Value,
    },
    Append {
        scope: Scope,
        keys: Keys,
        value: Value,
    },
    Delete {
        scope: Scope,
        keys: Keys,
    },
    SetFlag {
        name: Arc<str>,
    },
    ClearFlag {
        name: Arc<str>,
    },
}

/// A write that cannot be applied as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot write {path}: {reason}")]
pub struct WriteError {
    pub path: String,
    pub reason: String,
}

/// Sets (or appends to) the value at `keys` below `root`, creating objects on the way.
pub fn set_in(
    root: &mut Value,
    label: &str,
    keys: &[String],
    value: Value,
    append: bool,
) -> Result<(), WriteError> {
    set_at(root, &label, keys, value, append)
}

/// [`set_in`], with the scope's name written out only if an error needs it.
fn set_at(
    root: &mut Value,
    label: &dyn fmt::Display,
    keys: &[String],
    value: Value,
    append: bool,
) -> Result<(), WriteError> {
    let path = || {
        let mut s = label.to_string();
        for k in keys {
            s.push('.');
            s.push_str(k);
        }
        s
    };
    if keys.is_empty() {
        if append || !value.is_object() {
            return Err(WriteError {
                path: path(),
                reason: "a whole scope can only be set to an object".to_owned(),
            });
        }
        *root = value;
        return Ok(());
    }
    let mut node = root;
    for (i, key) in keys.iter().enumerate() {
        if node.is_null() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(m) = node else {
            return Err(WriteError {
                path: path(),
                reason: format!("`{}` is {}, not an object", keys[..i].join("."), kind(node)),
            });
        };
        if i + 1 == keys.len() {
            if append {
                let slot = m
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if slot.is_null() {
                    *slot = Value::Array(Vec::new());
                }
                let Value::Array(list) = slot else {
                    return Err(WriteError {
                        path: path(),
                        reason: format!("it holds {}, not a list to append to", kind(slot)),
                    });
                };
                list.push(value);
            } else {
                m.insert(key.clone(), value);
            }
            return Ok(());
        }
        node = m
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(())
}

/// Removes the value at `keys`; a missing path is fine.
pub fn delete_in(root: &mut Value, keys: &[String]) {
    let Some((last, parents)) = keys.split_last() else {
        *root = Value::Object(Map::new());
        return;
    };
    let mut node = root;
    for key in parents {
        match node.get_mut(key.as_str()) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Value::Object(m) = node {
        m.shift_remove(last);
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Write {
    /// Whether two writes touch overlapping paths (so their order matters to a reader).
    pub fn overlaps(&self, other: &Write) -> bool {
        match (self.target(), other.target()) {
            (Some((s1, k1)), Some((s2, k2))) => s1 == s2 && k1.iter().zip(k2).all(|(a, b)| a == b),
            _ => false,
        }
    }

    fn target(&self) -> Option<(&Scope, &[String])> {
        match self {
            Write::Set { scope, keys, .. }
            | Write::Append { scope, keys, .. }
            | Write::Delete { scope, keys } => Some((scope, keys)),
            Write::SetFlag { .. } | Write::ClearFlag { .. } => None,
        }
    }

    /// The bytes of JSON (as [`json_size`] counts them) the write adds to a context: about
    /// (`approx`: its value and keys, what the context limit is judged by) and at most (`bound`:
    /// also every object, list and agent state it may have to create on the way), whatever the
    /// context it is applied to.
    pub fn size(&self) -> WriteSize {
        match self {
            Write::Set { scope, value, keys }
            | Write::Append {
                scope, value, keys, ..
            } => {
                let value = json_size(value);
                let keys_len = keys.iter().map(String::len).sum::<usize>();
                let agent = match scope {
                    Scope::Workflow => 0,
                    Scope::Agent(name) => name.len() + 6,
                };
                WriteSize {
                    approx: value + keys_len + 4 * keys.len(),
                    bound: value + keys_len + 6 * keys.len() + 1 + agent,
                }
            }
            Write::SetFlag { name } => WriteSize {
                approx: name.len() + 8,
                bound: name.len() + 9,
            },
            // A delete in an agent's state makes that state (empty) if it has none.
            Write::Delete { scope, .. } => WriteSize {
                approx: 0,
                bound: match scope {
                    Scope::Workflow => 0,
                    Scope::Agent(name) => name.len() + 6,
                },
            },
            Write::ClearFlag { .. } => WriteSize {
                approx: 0,
                bound: 0,
            },
        }
    }
}

/// What one write adds to a context's size; see [`Write::size`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSize {
    pub approx: usize,
    pub bound: usize,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Workflow => f.write_str("workflow"),
            Scope::Agent(a) => write!(f, "agents.{a}"),
        }
    }
}

/// The destination of a write as written in a tool (`workflow.x`, `agent.x`, `result.x`, `x[+]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePath {
    pub target: Target,
    pub keys: Keys,
    /// A trailing `[+]`: append to the list there, creating it.
    pub append: bool,
}

/// The scope a write path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Workflow,
    /// The active agent's state.
    ActiveAgent,
    /// A named agent's state.
    Agent(String),
    /// What the tool returns to the model.
    Result,
}

impl fmt::Display for WritePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = match &self.target {
            Target::Workflow => "workflow".to_owned(),
            Target::ActiveAgent => "agent".to_owned(),
            Target::Agent(a) => format!("agents.{a}"),
            Target::Result => "result".to_owned(),
        };
        write!(f, "{head}")?;
        for k in self.keys.iter() {
            write!(f, ".{k}")?;
        }
        if self.append {
            write!(f, "[+]")?;
        }
        Ok(())
    }
}

/// Why a write path was refused, with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    pub message: String,
    pub fix: String,
}

impl WritePath {
    /// Parses a write path; a bare path (`logged_meals[+]`) means `workflow.`.
    pub fn parse(src: &str) -> Result<WritePath, PathError> {
        let s = src.trim();
        let (s, append) = match s.strip_suffix("[+]") {
            Some(rest) => (rest, true),
            None => (s, false),
        };
        let parts: Vec<&str> = s.split('.').collect();
        if s.is_empty()
            || parts
                .iter()
                .any(|p| p.is_empty() || p.contains(['[', ']', ' ', '{', '}']))
        {
            return Err(PathError {
                message: format!("`{src}` is not a valid write path"),
                fix: "write dot-separated names such as `workflow.order.id`, optionally ending in `[+]` to append".to_owned(),
            });
        }
        let rest = |n: usize| {
            parts[n..]
                .iter()
                .map(|p| (*p).to_owned())
                .collect::<Vec<_>>()
        };
        let (target, keys) = match parts[0] {
            "workflow" => (Target::Workflow, rest(1)),
            "agent" => (Target::ActiveAgent, rest(1)),
            "result" => (Target::Result, rest(1)),
            "agents" => match parts.get(1) {
                Some(name) => (Target::Agent((*name).to_owned()), rest(2)),
                None => {
                    return Err(PathError {
                        message: format!("`{src}` names no agent"),
                        fix: "write `agents.<agent name>.<key>`, or `agent.<key>` for the active agent".to_owned(),
                    });
                }
            },
            root @ ("user" | "call" | "params" | "config" | "secrets" | "response") => {
                return Err(PathError {
                    message: format!("`{root}` is read-only"),
                    fix: format!(
                        "write to `workflow.{}` or `agent.{}` instead",
                        parts[1..].join("."),
                        parts[1..].join(".")
                    )
                    .replace("`workflow.`", "`workflow.<key>`")
                    .replace("`agent.`", "`agent.<key>`"),
                });
            }
            "flags" => {
                return Err(PathError {
                    message: "flags are not written with a path".to_owned(),
                    fix: "use a `flag.set` or `flag.clear` action".to_owned(),
                });
            }
            _ => (Target::Workflow, rest(0)),
        };
        if append && keys.is_empty() {
            return Err(PathError {
                message: format!("`{src}` appends to a whole scope"),
                fix: "append to a key inside it, e.g. `workflow.items[+]`".to_owned(),
            });
        }
        // Stored state must stay readable: see `limits::JSON_DEPTH_CEILING`.
        if keys.len() > crate::limits::MAX_PATH_KEYS {
            return Err(PathError {
                message: format!(
                    "`{src}` names {} keys below its scope, over the limit of {}",
                    keys.len(),
                    crate::limits::MAX_PATH_KEYS
                ),
                fix: "write to a shorter path and keep the nesting in the value".to_owned(),
            });
        }
        Ok(WritePath {
            target,
            keys: keys.into(),
            append,
        })
    }
}

/// A read path for `context.get` and `context.delete`: same syntax, any readable scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPath {
    pub root: String,
    pub keys: Vec<String>,
}

impl ReadPath {
    /// Parses `scope.a.b`; a bare path means `workflow.`.
    pub fn parse(src: &str) -> Option<ReadPath> {
        let s = src.trim();
        let parts: Vec<&str> = s.split('.').collect();
        if s.is_empty()
            || parts
                .iter()
                .any(|p| p.is_empty() || p.contains(['[', ']', ' ', '{', '}']))
        {
            return None;
        }
        const ROOTS: &[&str] = &[
            "workflow", "agent", "agents", "user", "call", "params", "flags", "config", "response",
            "result",
        ];
        let (root, keys) = if ROOTS.contains(&parts[0]) {
            (
                parts[0].to_owned(),
                parts[1..].iter().map(|p| (*p).to_owned()).collect(),
            )
        } else {
            (
                "workflow".to_owned(),
                parts.iter().map(|p| (*p).to_owned()).collect(),
            )
        };
        Some(ReadPath { root, keys })
    }

    /// The last segment: the key `context.get` files the value under.
    pub fn last(&self) -> &str {
        self.keys.last().map(String::as_str).unwrap_or(&self.root)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        let call = CallInfo {
            id: "c1".into(),
            tenant_id: "t".into(),
            agent: "meal".into(),
            from: None,
            to: None,
            started_at: "2026-01-01T00:00:00Z".into(),
        };
        Context::new(&call, json!({"id": "u1"}))
    }

    #[test]
    fn write_paths_parse() {
        let cases: &[(&str, Target, &[&str], bool)] = &[
            ("logged_meals[+]", Target::Workflow, &["logged_meals"], true),
            (
                "workflow.order.id",
                Target::Workflow,
                &["order", "id"],
                false,
            ),
            ("agent.last", Target::ActiveAgent, &["last"], false),
            (
                "agents.billing.step",
                Target::Agent("billing".into()),
                &["step"],
                false,
            ),
            ("result.total", Target::Result, &["total"], false),
            ("result", Target::Result, &[], false),
        ];
        for (src, target, keys, append) in cases {
            let p = WritePath::parse(src).unwrap();
            assert_eq!(
                (&p.target, &p.keys[..], p.append),
                (
                    target,
                    &keys.iter().map(|k| k.to_string()).collect::<Vec<_>>()[..],
                    *append
                ),
                "{src}"
            );
        }
    }

    #[test]
    fn read_only_scopes_are_refused_with_a_fix() {
        let e = WritePath::parse("user.id").unwrap_err();
        assert_eq!(e.message, "`user` is read-only");
        assert!(e.fix.contains("workflow.id"), "{}", e.fix);
        assert!(WritePath::parse("call.agent").is_err());
        assert!(
            WritePath::parse("flags.vip")
                .unwrap_err()
                .fix
                .contains("flag.set")
        );
        assert!(WritePath::parse("a..b").is_err());
        assert!(WritePath::parse("workflow[+]").is_err());
    }

    #[test]
    fn concurrent_appends_both_land() {
        let mut live = ctx();
        let w1 = Write::Append {
            scope: Scope::Workflow,
            keys: vec!["meals".into()].into(),
            value: json!("a"),
        };
        let w2 = Write::Append {
            scope: Scope::Workflow,
            keys: vec!["meals".into()].into(),
            value: json!("b"),
        };
        live.apply(&w1).unwrap();
        live.apply(&w2).unwrap();
        assert_eq!(live.workflow["meals"], json!(["a", "b"]));
    }

    #[test]
    fn writes_create_and_delete() {
        let mut c = ctx();
        c.apply(&Write::Set {
            scope: Scope::Agent("meal".into()),
            keys: vec!["a".into(), "b".into()].into(),
            value: json!(1),
        })
        .unwrap();
        assert_eq!(c.agents["meal"]["a"]["b"], json!(1));
        c.apply(&Write::Delete {
            scope: Scope::Agent("meal".into()),
            keys: vec!["a".into(), "b".into()].into(),
        })
        .unwrap();
        c.apply(&Write::Delete {
            scope: Scope::Workflow,
            keys: vec!["nope".into(), "x".into()].into(),
        })
        .unwrap();
        assert_eq!(c.agents["meal"]["a"], json!({}));
        c.apply(&Write::SetFlag { name: "vip".into() }).unwrap();
        assert_eq!(c.flags["vip"], json!(true));
        c.apply(&Write::ClearFlag { name: "vip".into() }).unwrap();
        assert_eq!(*c.flags, json!({}));
    }

    #[test]
    fn type_conflicts_are_errors() {
        let mut c = ctx();
        c.apply(&Write::Set {
            scope: Scope::Workflow,
            keys: vec!["x".into()].into(),
            value: json!("s"),
        })
        .unwrap();
        let e = c
            .apply(&Write::Append {
                scope: Scope::Workflow,
                keys: vec!["x".into()].into(),
                value: json!(1),
            })
            .unwrap_err();
        assert!(e.reason.contains("a string"), "{e}");
        let e = c
            .apply(&Write::Set {
                scope: Scope::Workflow,
                keys: vec!["x".into(), "y".into()].into(),
                value: json!(1),
            })
            .unwrap_err();
        assert!(e.reason.contains("not an object"), "{e}");
    }

    /// Moving a write's value in lands exactly what copying it does, errors included, and
    /// leaves the context as copying would at every step.
    #[test]
    fn an_owned_write_lands_as_a_copied_one() {
        let keys = |k: &[&str]| -> Keys { k.iter().map(|s| s.to_string()).collect() };
        let writes = [
            Write::Append {
                scope: Scope::Workflow,
                keys: keys(&["meals"]),
                value: json!({"meal_type": "lunch", "dishes": ["soup", "salad"]}),
            },
            Write::Set {
                scope: Scope::Agent("meal".into()),
                keys: keys(&["last", "dish"]),
                value: json!("soup"),
            },
            Write::Set {
                scope: Scope::Workflow,
                keys: keys(&[]),
                value: json!({"replaced": [1, 2]}),
            },
            Write::SetFlag {
                name: "meal_logged".into(),
            },
            Write::Append {
                scope: Scope::Workflow,
                keys: keys(&["replaced"]),
                value: json!(3),
            },
            // Refused: `replaced` is a list, not an object.
            Write::Set {
                scope: Scope::Workflow,
                keys: keys(&["replaced", "x"]),
                value: json!(1),
            },
            // Refused: a whole scope cannot be appended to.
            Write::Append {
                scope: Scope::Workflow,
                keys: keys(&[]),
                value: json!(1),
            },
            Write::Delete {
                scope: Scope::Agent("meal".into()),
                keys: keys(&["last", "dish"]),
            },
            Write::ClearFlag {
                name: "meal_logged".into(),
            },
        ];
        let (mut copied, mut owned) = (ctx(), ctx());
        for w in writes {
            let by_copy = copied.apply(&w);
            let by_move = owned.apply_owned(w.clone());
            assert_eq!(by_move, by_copy, "{w:?}");
            assert_eq!(owned, copied, "after {w:?}");
        }
        assert_eq!(*owned.workflow, json!({"replaced": [1, 2, 3]}));
        assert_eq!(owned.agents["meal"], json!({"last": {}}));
        assert_eq!(*owned.flags, json!({}));
    }
}
