//! What a template reads: a run's scopes resolved by name ([`Vars`], [`RunScopes`], [`VarRef`]),
//! and the template engine's lazy views of them (`JsonView`), which convert only the parts an
//! expression touches.

use std::sync::{Arc, LazyLock};

use minijinja::value::{Enumerator, Object, ObjectRepr, Value as MjValue, ValueKind};
use serde_json::{Map, Value};

use super::Seg;
use crate::context::Context;

/// What a scope key that is missing reads as.
static EMPTY_OBJECT: LazyLock<Value> = LazyLock::new(|| Value::Object(Map::new()));

/// What a template may read: scope names bound to JSON values, borrowed from the run.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    /// The run's scopes, resolved by name only when a template reads one.
    scopes: Option<&'a RunScopes<'a>>,
    /// Scopes bound by value (a transform's `item` and `acc`), after `scopes`.
    entries: &'a [(&'static str, VarRef<'a>)],
}

/// A run's scopes, each looked up by name when a template reads it, so nothing is bound for
/// the scopes a template does not read.
#[derive(Debug, Clone, Copy)]
pub struct RunScopes<'a> {
    pub params: &'a Arc<Value>,
    /// `user`, `workflow`, `agents`, `agent` (the active one's), `flags` and `call`.
    pub context: &'a Context,
    pub config: &'a Arc<Value>,
    pub secrets: &'a Arc<Value>,
    pub response: &'a Arc<Value>,
    pub result: &'a Arc<Value>,
    pub now: &'a Arc<Value>,
}

impl<'a> RunScopes<'a> {
    /// The scope `name`, with its name as the template engine knows it.
    fn get(&self, name: &str) -> Option<(&'static str, VarRef<'a>)> {
        let c = self.context;
        Some(match name {
            "params" => ("params", VarRef::whole(self.params)),
            "user" => ("user", VarRef::whole(&c.user)),
            "workflow" => ("workflow", VarRef::whole(&c.workflow)),
            "agents" => ("agents", VarRef::whole(&c.agents)),
            "agent" => ("agent", VarRef::key(&c.agents, c.active_agent())),
            "flags" => ("flags", VarRef::whole(&c.flags)),
            "call" => ("call", VarRef::whole(&c.call)),
            "config" => ("config", VarRef::whole(self.config)),
            "secrets" => ("secrets", VarRef::whole(self.secrets)),
            "response" => ("response", VarRef::whole(self.response)),
            "result" => ("result", VarRef::whole(self.result)),
            "now" => ("now", VarRef::whole(self.now)),
            _ => return None,
        })
    }
}

/// One scope: a JSON value, or one key of it (`agent` is `agents[<active agent>]`).
#[derive(Debug, Clone, Copy)]
pub struct VarRef<'a> {
    value: &'a Value,
    /// The same value as a shared one, when it is: the template engine then views it in place;
    /// otherwise an expression that needs the engine copies it.
    shared: Option<&'a Arc<Value>>,
    key: Key<'a>,
}

/// Which part of the value a scope is.
#[derive(Debug, Clone, Copy)]
enum Key<'a> {
    Whole,
    Named(&'a str),
}

impl<'a> VarRef<'a> {
    /// The whole value of a scope.
    pub fn whole(value: &'a Arc<Value>) -> Self {
        VarRef {
            value,
            shared: Some(value),
            key: Key::Whole,
        }
    }

    /// One key of a scope's value (an empty object when it has none).
    pub fn key(value: &'a Arc<Value>, key: &'a str) -> Self {
        VarRef {
            value,
            shared: Some(value),
            key: Key::Named(key),
        }
    }

    /// A value borrowed from elsewhere, such as a list's item.
    pub fn borrowed(value: &'a Value) -> Self {
        VarRef {
            value,
            shared: None,
            key: Key::Whole,
        }
    }

    fn key_name(&self) -> Option<&'a str> {
        match self.key {
            Key::Whole => None,
            Key::Named(k) => Some(k),
        }
    }

    fn resolve(&self) -> &'a Value {
        match self.key_name() {
            None => self.value,
            Some(k) => crate::field::of(self.value, k).unwrap_or(&EMPTY_OBJECT),
        }
    }

    /// The value as a shared one for the engine's views.
    fn to_shared(self) -> Arc<Value> {
        match self.shared {
            Some(v) => Arc::clone(v),
            None => Arc::new(self.value.clone()),
        }
    }
}

impl<'a> Vars<'a> {
    /// Binds scope names to values.
    pub fn new(entries: &'a [(&'static str, VarRef<'a>)]) -> Self {
        Vars {
            scopes: None,
            entries,
        }
    }

    /// The scopes `scopes` resolves, then `entries`: a run's scopes are looked up only when a
    /// template reads them, not bound one by one for every template it evaluates.
    pub fn resolved(scopes: &'a RunScopes<'a>, entries: &'a [(&'static str, VarRef<'a>)]) -> Self {
        Vars {
            scopes: Some(scopes),
            entries,
        }
    }

    fn lookup(&self, name: &str) -> Option<(&'static str, VarRef<'a>)> {
        if let Some(found) = self.scopes.and_then(|scopes| scopes.get(name)) {
            return Some(found);
        }
        self.entries.iter().find(|(n, _)| *n == name).copied()
    }

    /// The value of one scope.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.lookup(name).map(|(_, v)| v.resolve())
    }

    pub(super) fn to_minijinja(self, roots: &[String]) -> MjValue {
        let mut scopes: Vec<(&'static str, JsonView)> = Vec::with_capacity(roots.len());
        for (name, v) in roots.iter().filter_map(|r| self.lookup(r)) {
            if scopes.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let path = v
                .key_name()
                .map(|k| vec![Seg::Key(k.to_owned())])
                .unwrap_or_default();
            scopes.push((
                name,
                JsonView {
                    root: v.to_shared(),
                    path,
                },
            ));
        }
        MjValue::from_object(ScopesObject { scopes })
    }
}

#[derive(Debug)]
struct ScopesObject {
    scopes: Vec<(&'static str, JsonView)>,
}

impl Object for ScopesObject {
    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let name = key.as_str()?;
        let (_, view) = self.scopes.iter().find(|(n, _)| *n == name)?;
        view.node()
            .map(|node| view_value(node, &view.root, &view.path))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.scopes.iter().map(|(n, _)| MjValue::from(*n)).collect())
    }
}

/// A lazy view into a shared JSON tree, so templates convert only the parts they touch.
#[derive(Debug)]
struct JsonView {
    root: Arc<Value>,
    path: Vec<Seg>,
}

impl JsonView {
    fn node(&self) -> Option<&Value> {
        let mut node: &Value = &self.root;
        for seg in &self.path {
            node = match (seg, node) {
                (Seg::Key(k), Value::Object(m)) => crate::field::get(m, k),
                (Seg::Index(i), Value::Array(a)) => a.get(*i),
                _ => None,
            }
            .or_else(|| (matches!(seg, Seg::Key(_))).then_some(&*EMPTY_OBJECT))?;
        }
        Some(node)
    }
}

fn view_value(node: &Value, root: &Arc<Value>, path: &[Seg]) -> MjValue {
    match node {
        Value::Null => MjValue::from(()),
        Value::Bool(b) => MjValue::from(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                MjValue::from(i)
            } else if let Some(u) = n.as_u64() {
                MjValue::from(u)
            } else {
                MjValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => MjValue::from(s.as_str()),
        Value::Array(_) | Value::Object(_) => MjValue::from_object(JsonView {
            root: Arc::clone(root),
            path: path.to_vec(),
        }),
    }
}

impl Object for JsonView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.node() {
            Some(Value::Array(_)) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let node = self.node()?;
        let (seg, child) = match node {
            Value::Object(m) => {
                let k = key.as_str()?;
                (Seg::Key(k.to_owned()), crate::field::get(m, k)?)
            }
            Value::Array(a) => {
                let i = key.as_i64()?;
                let i = if i < 0 {
                    a.len().checked_sub(i.unsigned_abs() as usize)?
                } else {
                    i as usize
                };
                (Seg::Index(i), a.get(i)?)
            }
            _ => return None,
        };
        if matches!(child, Value::Array(_) | Value::Object(_)) {
            let mut path = self.path.clone();
            path.push(seg);
            Some(MjValue::from_object(JsonView {
                root: Arc::clone(&self.root),
                path,
            }))
        } else {
            Some(view_value(child, &self.root, &self.path))
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.node() {
            Some(Value::Array(a)) => Enumerator::Seq(a.len()),
            Some(Value::Object(m)) => {
                Enumerator::Values(m.keys().map(|k| MjValue::from(k.as_str())).collect())
            }
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.node()? {
            Value::Array(a) => Some(a.len()),
            Value::Object(m) => Some(m.len()),
            _ => None,
        }
    }
}

/// Converts an engine value to JSON, reusing the shared tree when it is a view of one.
pub(super) fn to_json(v: &MjValue) -> Result<Value, String> {
    if let Some(view) = v.downcast_object_ref::<JsonView>() {
        return Ok(view.node().cloned().unwrap_or(Value::Null));
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => Ok(Value::Null),
        ValueKind::Bool => Ok(Value::Bool(v.is_true())),
        ValueKind::String => Ok(Value::String(v.as_str().unwrap_or_default().to_owned())),
        ValueKind::Seq | ValueKind::Iterable => {
            let items = v.try_iter().map_err(|e| e.to_string())?;
            items
                .map(|x| to_json(&x))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        ValueKind::Map => {
            let keys = v.try_iter().map_err(|e| e.to_string())?;
            let mut out = Map::new();
            for k in keys {
                let item = v.get_item(&k).map_err(|e| e.to_string())?;
                let key = match k.as_str() {
                    Some(s) => s.to_owned(),
                    None => k.to_string(),
                };
                out.insert(key, to_json(&item)?);
            }
            Ok(Value::Object(out))
        }
        _ => serde_json::to_value(v).map_err(|e| e.to_string()),
    }
}
