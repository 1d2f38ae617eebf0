//! Reading JSON objects field by field while collecting every problem with its place.

use serde_json::{Map, Value};

use crate::diag::{Sink, child, did_you_mean};

/// One JSON object being read: typed getters report wrong types, `finish` reports unknown keys.
pub(crate) struct Obj<'a> {
    pub(crate) map: &'a Map<String, Value>,
    pub(crate) ptr: String,
    what: String,
    known: &'static [&'static str],
}

/// The JSON type of a value, as an error message names it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Obj<'a> {
    /// Starts reading `v` as an object; reports and returns `None` when it is not one.
    pub(crate) fn new(
        v: &'a Value,
        ptr: &str,
        what: &str,
        known: &'static [&'static str],
        sink: &mut Sink,
    ) -> Option<Self> {
        match v {
            Value::Object(map) => Some(Obj {
                map,
                ptr: ptr.to_owned(),
                what: what.to_owned(),
                known,
            }),
            other => {
                sink.error(
                    ptr,
                    format!("{what} must be an object, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(crate) fn at(&self, key: &str) -> String {
        child(&self.ptr, key)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    fn wrong(&self, key: &str, want: &str, got: &Value, sink: &mut Sink) {
        sink.error(
            &self.at(key),
            format!(
                "`{key}` of {} must be {want}, found {}",
                self.what,
                type_name(got)
            ),
        );
    }

    fn missing(&self, key: &str, sink: &mut Sink) {
        sink.error_fix(
            &self.ptr,
            format!("{} has no `{key}`", self.what),
            format!("add the required field `{key}`"),
        );
    }

    pub(crate) fn str(&self, key: &str, sink: &mut Sink) -> Option<&'a str> {
        match self.get(key)? {
            Value::String(s) => Some(s),
            other => {
                self.wrong(key, "a string", other, sink);
                None
            }
        }
    }

    pub(crate) fn req_str(&self, key: &str, sink: &mut Sink) -> Option<&'a str> {
        if self.get(key).is_none() {
            self.missing(key, sink);
            return None;
        }
        self.str(key, sink)
    }

    pub(crate) fn req(&self, key: &str, sink: &mut Sink) -> Option<&'a Value> {
        let v = self.get(key);
        if v.is_none() {
            self.missing(key, sink);
        }
        v
    }

    pub(crate) fn bool(&self, key: &str, sink: &mut Sink) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong(key, "true or false", other, sink);
                None
            }
        }
    }

    pub(crate) fn number(&self, key: &str, sink: &mut Sink) -> Option<f64> {
        match self.get(key)? {
            Value::Number(n) => n.as_f64(),
            other => {
                self.wrong(key, "a number", other, sink);
                None
            }
        }
    }

    /// A number that must lie in `[min, max]`.
    pub(crate) fn number_in(&self, key: &str, min: f64, max: f64, sink: &mut Sink) -> Option<f64> {
        let n = self.number(key, sink)?;
        if !(min..=max).contains(&n) {
            sink.error_fix(
                &self.at(key),
                format!("`{key}` is {n}, outside {min}..={max}"),
                format!("use a value from {min} to {max}"),
            );
            return None;
        }
        Some(n)
    }

    pub(crate) fn array(&self, key: &str, sink: &mut Sink) -> Option<&'a Vec<Value>> {
        match self.get(key)? {
            Value::Array(a) => Some(a),
            other => {
                self.wrong(key, "an array", other, sink);
                None
            }
        }
    }

    pub(crate) fn object(&self, key: &str, sink: &mut Sink) -> Option<&'a Map<String, Value>> {
        match self.get(key)? {
            Value::Object(o) => Some(o),
            other => {
                self.wrong(key, "an object", other, sink);
                None
            }
        }
    }

    /// An array of strings; each non-string item is reported.
    pub(crate) fn strings(&self, key: &str, sink: &mut Sink) -> Option<Vec<(&'a str, String)>> {
        let items = self.array(key, sink)?;
        let ptr = self.at(key);
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push((s.as_str(), child(&ptr, i))),
                other => sink.error(
                    &child(&ptr, i),
                    format!(
                        "items of `{key}` must be strings, found {}",
                        type_name(other)
                    ),
                ),
            }
        }
        Some(out)
    }

    /// Reports every key that is not among the known ones, with a suggestion when close.
    pub(crate) fn finish(self, sink: &mut Sink) {
        for key in self.map.keys() {
            if self.known.contains(&key.as_str()) {
                continue;
            }
            let fix = match did_you_mean(key, self.known.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("remove it; {} takes {}", self.what, list(self.known)),
            };
            sink.error_fix(
                &self.at(key),
                format!("unknown field `{key}` in {}", self.what),
                fix,
            );
        }
    }
}

/// `a`, `b` and `c` — for messages listing the accepted names.
pub(crate) fn list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.len() {
        0 => "nothing".to_owned(),
        1 => quoted[0].clone(),
        n => format!("{} and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}
