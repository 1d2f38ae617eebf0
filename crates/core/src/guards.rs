//! Runaway guards: how many times a call may repeat one function call, and how many function
//! calls it may make a minute, before the session answers `loop_detected` and runs nothing.
//!
//! An agent may override the defaults with a `guards` object:
//! `{"identical_calls": {"max": 5, "window_s": 60}, "calls_per_minute": 60}` (every field
//! optional; null means the default). [`Guards::parse`] reads it once, at save, reporting every problem at its JSON
//! Pointer; the call session applies the result (the guards of the agent active when the
//! function call arrives).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diag::Diagnostic;

/// The runaway guards of one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guards {
    /// The same tool with the same arguments: at most `max` calls within `window_s`.
    pub identical_calls: IdenticalCalls,
    /// Function calls of any tool in any 60 seconds of one call.
    pub calls_per_minute: u32,
}

/// The same tool with the same arguments, `max` times within `window_s` seconds; the next is
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdenticalCalls {
    pub max: u32,
    pub window_s: u32,
}

impl Default for Guards {
    /// Five identical calls in 60 s (a model that asks a sixth time is looping, not retrying)
    /// and 60 calls a minute (one a second for a minute: more than a conversation needs).
    fn default() -> Self {
        Guards {
            identical_calls: IdenticalCalls {
                max: 5,
                window_s: 60,
            },
            calls_per_minute: 60,
        }
    }
}

/// The largest `identical_calls.max`.
pub const MAX_IDENTICAL_CALLS: u32 = 1_000;
/// The longest `identical_calls.window_s`: one hour.
pub const MAX_IDENTICAL_WINDOW_S: u32 = 3_600;
/// The largest `calls_per_minute`.
pub const MAX_CALLS_PER_MINUTE: u32 = 10_000;

const FIELDS: &[&str] = &["identical_calls", "calls_per_minute"];
const IDENTICAL_FIELDS: &[&str] = &["max", "window_s"];

impl Guards {
    /// Reads an agent's `guards` object found at `at` (a JSON Pointer, e.g. `/guards`), the
    /// defaults filling what it leaves out; every problem is reported, each at its pointer.
    pub fn parse(value: &Value, at: &str) -> Result<Guards, Vec<Diagnostic>> {
        let mut problems = Vec::new();
        let mut guards = Guards::default();
        let Some(obj) = value.as_object() else {
            problems.push(problem(
                at,
                "`guards` must be a JSON object",
                "write e.g. {\"identical_calls\": {\"max\": 5, \"window_s\": 60}, \"calls_per_minute\": 60}",
            ));
            return Err(problems);
        };
        unknown(obj, at, FIELDS, &mut problems);
        if let Some(v) = obj.get("identical_calls").filter(|v| !v.is_null()) {
            let here = format!("{at}/identical_calls");
            match v.as_object() {
                None => problems.push(problem(
                    &here,
                    "`identical_calls` must be a JSON object",
                    "write {\"max\": 5, \"window_s\": 60}",
                )),
                Some(ic) => {
                    unknown(ic, &here, IDENTICAL_FIELDS, &mut problems);
                    if let Some(n) = bounded(ic, &here, "max", MAX_IDENTICAL_CALLS, &mut problems) {
                        guards.identical_calls.max = n;
                    }
                    if let Some(n) =
                        bounded(ic, &here, "window_s", MAX_IDENTICAL_WINDOW_S, &mut problems)
                    {
                        guards.identical_calls.window_s = n;
                    }
                }
            }
        }
        if let Some(n) = bounded(
            obj,
            at,
            "calls_per_minute",
            MAX_CALLS_PER_MINUTE,
            &mut problems,
        ) {
            guards.calls_per_minute = n;
        }
        if problems.is_empty() {
            Ok(guards)
        } else {
            Err(problems)
        }
    }
}

fn problem(pointer: &str, message: &str, fix: &str) -> Diagnostic {
    Diagnostic {
        pointer: pointer.to_owned(),
        message: message.to_owned(),
        fix: Some(fix.to_owned()),
    }
}

fn unknown(obj: &Map<String, Value>, at: &str, known: &[&str], problems: &mut Vec<Diagnostic>) {
    for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        problems.push(problem(
            &format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")),
            &format!("unknown field `{key}`"),
            &format!("remove it; known fields are: {}", known.join(", ")),
        ));
    }
}

/// A whole number from 1 to `max` at `obj[key]`; `None` when absent, null or reported.
fn bounded(
    obj: &Map<String, Value>,
    at: &str,
    key: &str,
    max: u32,
    problems: &mut Vec<Diagnostic>,
) -> Option<u32> {
    let v = obj.get(key).filter(|v| !v.is_null())?;
    let n = v
        .as_u64()
        .filter(|n| (1..=u64::from(max)).contains(n))
        .and_then(|n| u32::try_from(n).ok());
    if n.is_none() {
        problems.push(problem(
            &format!("{at}/{key}"),
            &format!("`{key}` must be a whole number from 1 to {max}, found {v}"),
            &format!("write a number such as {}", default_of(key)),
        ));
    }
    n
}

fn default_of(key: &str) -> u32 {
    let d = Guards::default();
    match key {
        "max" => d.identical_calls.max,
        "window_s" => d.identical_calls.window_s,
        _ => d.calls_per_minute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_what_is_left_out() {
        let g = Guards::parse(&json!({"calls_per_minute": 10}), "/guards").unwrap_or_default();
        assert_eq!(g.calls_per_minute, 10);
        assert_eq!(g.identical_calls, Guards::default().identical_calls);
        let g =
            Guards::parse(&json!({"identical_calls": {"max": 2}}), "/guards").unwrap_or_default();
        assert_eq!(g.identical_calls.max, 2);
        assert_eq!(g.identical_calls.window_s, 60);
    }

    #[test]
    fn every_problem_is_named_at_its_pointer() {
        for (value, pointers) in [
            (json!([]), vec!["/guards"]),
            (
                json!({"identical_calls": 3}),
                vec!["/guards/identical_calls"],
            ),
            (
                json!({"identical_calls": {"max": 0, "window_s": 99999, "maxx": 1}, "calls_per_minute": "60", "burst": 1}),
                vec![
                    "/guards/burst",
                    "/guards/identical_calls/maxx",
                    "/guards/identical_calls/max",
                    "/guards/identical_calls/window_s",
                    "/guards/calls_per_minute",
                ],
            ),
            (
                json!({"calls_per_minute": 10001}),
                vec!["/guards/calls_per_minute"],
            ),
            (
                json!({"calls_per_minute": 1.5}),
                vec!["/guards/calls_per_minute"],
            ),
        ] {
            let Err(problems) = Guards::parse(&value, "/guards") else {
                panic!("{value} should be refused");
            };
            let mut got: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
            let mut want = pointers.clone();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{value}: {problems:?}");
            assert!(problems.iter().all(|p| p.fix.is_some()));
        }
    }
}
