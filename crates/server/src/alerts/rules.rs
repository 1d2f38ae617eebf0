//! An alert rule's definition, read once at save with every problem at its JSON Pointer.
//!
//! A rule is a flat object: `id`, `kind`, the kind's fields and `webhook_url`. What a field
//! leaves out takes its default; the stored definition has every default filled in, so the
//! evaluator never re-checks it.

use serde_json::{Map, Value, json};
use switchboard_core::diag::Diagnostic;

/// The kinds of rule, with their own fields.
pub const KINDS: &[&str] = &[
    "tool_failure_rate",
    "tool_latency_p95",
    "breaker_open",
    "connection_broken",
    "live_call_cap",
];

/// A checked rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    pub condition: Condition,
    pub webhook_url: String,
}

/// What makes a rule fire.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// More than `above_percent` of at least `min_calls` calls of `tool` in `window_s` failed.
    FailureRate {
        tool: String,
        above_percent: u32,
        min_calls: u32,
        window_s: u32,
    },
    /// The p95 latency of at least `min_calls` calls of `tool` in `window_s` is over `above_ms`.
    LatencyP95 {
        tool: String,
        above_ms: u32,
        min_calls: u32,
        window_s: u32,
    },
    /// A circuit breaker (of `upstream`, or any) opened on some node within `window_s`.
    BreakerOpen {
        upstream: Option<String>,
        window_s: u32,
    },
    /// An OAuth2 connection (of `agent`, or any) is broken: the provider refused its refresh.
    ConnectionBroken { agent: Option<String> },
    /// The tenant's live calls reached `at_percent` of the live-call cap.
    LiveCallCap { at_percent: u32 },
}

/// Bounds of the numeric fields: (field, least, most, default).
const WINDOW: (u32, u32, u32) = (60, 86_400, 300);
const MIN_CALLS: (u32, u32, u32) = (1, 100_000, 10);
const PERCENT: (u32, u32) = (1, 100);
const LATENCY_MS: (u32, u32) = (1, 600_000);
const BREAKER_WINDOW: (u32, u32, u32) = (10, 86_400, 60);

/// Fields of an object looked at for unknown ones (a rule has at most seven).
const MAX_UNKNOWN: usize = 32;

fn problem(pointer: &str, message: impl Into<String>, fix: impl Into<String>) -> Diagnostic {
    Diagnostic {
        pointer: pointer.to_owned(),
        message: message.into(),
        fix: Some(fix.into()),
    }
}

/// Whether `name` is an id, tool or agent name as the API takes them.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct Reader<'a> {
    obj: &'a Map<String, Value>,
    problems: Vec<Diagnostic>,
}

impl Reader<'_> {
    fn name(&mut self, field: &str, required: bool) -> Option<String> {
        let at = format!("/{field}");
        match self.obj.get(field) {
            None | Some(Value::Null) if !required => None,
            None | Some(Value::Null) => {
                self.problems.push(problem(
                    &at,
                    format!("`{field}` is missing"),
                    format!("give `{field}`: 1-64 letters, digits, `_` or `-`"),
                ));
                None
            }
            Some(Value::String(s)) if is_name(s) => Some(s.clone()),
            Some(_) => {
                self.problems.push(problem(
                    &at,
                    format!("`{field}` must be a name of 1-64 letters, digits, `_` or `-`"),
                    format!("write `{field}` as e.g. \"save_meal\""),
                ));
                None
            }
        }
    }

    fn number(&mut self, field: &str, least: u32, most: u32, default: Option<u32>) -> u32 {
        let at = format!("/{field}");
        let range = format!("give a whole number from {least} to {most}");
        match self.obj.get(field) {
            None | Some(Value::Null) => default.unwrap_or_else(|| {
                self.problems
                    .push(problem(&at, format!("`{field}` is missing"), range.clone()));
                least
            }),
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if (least..=most).contains(&n) => n,
                _ => {
                    self.problems.push(problem(
                        &at,
                        format!("`{field}` is {v}, out of range"),
                        range,
                    ));
                    least
                }
            },
        }
    }
}

/// Reads a rule; `allow_private` is the outbound guard's setting (the webhook URL is held to
/// the same rules as `api_call`).
pub fn parse(value: &Value, allow_private: bool) -> Result<Rule, Vec<Diagnostic>> {
    let Some(obj) = value.as_object() else {
        return Err(vec![problem(
            "",
            "an alert rule must be a JSON object",
            "send {\"id\": ..., \"kind\": ..., \"webhook_url\": ...}",
        )]);
    };
    let mut r = Reader {
        obj,
        problems: Vec::new(),
    };
    let id = r.name("id", true);
    let kind = match obj.get("kind") {
        Some(Value::String(k)) if KINDS.contains(&k.as_str()) => Some(k.as_str()),
        Some(other) => {
            r.problems.push(problem(
                "/kind",
                format!("`kind` {other} is not a kind of alert rule"),
                format!("use one of {}", KINDS.join(", ")),
            ));
            None
        }
        None => {
            r.problems.push(problem(
                "/kind",
                "`kind` is missing",
                format!("use one of {}", KINDS.join(", ")),
            ));
            None
        }
    };
    let fields: &[&str] = match kind {
        Some("tool_failure_rate") => &["tool", "above_percent", "min_calls", "window_s"],
        Some("tool_latency_p95") => &["tool", "above_ms", "min_calls", "window_s"],
        Some("breaker_open") => &["upstream", "window_s"],
        Some("connection_broken") => &["agent"],
        Some("live_call_cap") => &["at_percent"],
        _ => &[],
    };
    for key in obj.keys().take(MAX_UNKNOWN) {
        if !["id", "kind", "webhook_url"].contains(&key.as_str())
            && !fields.contains(&key.as_str())
            && kind.is_some()
        {
            r.problems.push(problem(
                &format!("/{}", key.replace('~', "~0").replace('/', "~1")),
                format!(
                    "`{}` is not a field of a {} rule",
                    key.chars().take(64).collect::<String>(),
                    kind.unwrap_or_default()
                ),
                format!(
                    "remove it; a {} rule takes {}",
                    kind.unwrap_or_default(),
                    fields.join(", ")
                ),
            ));
        }
    }
    let condition = match kind {
        Some("tool_failure_rate") => Some(Condition::FailureRate {
            tool: r.name("tool", true).unwrap_or_default(),
            above_percent: r.number("above_percent", 0, 99, Some(20)),
            min_calls: r.number("min_calls", MIN_CALLS.0, MIN_CALLS.1, Some(MIN_CALLS.2)),
            window_s: r.number("window_s", WINDOW.0, WINDOW.1, Some(WINDOW.2)),
        }),
        Some("tool_latency_p95") => Some(Condition::LatencyP95 {
            tool: r.name("tool", true).unwrap_or_default(),
            above_ms: r.number("above_ms", LATENCY_MS.0, LATENCY_MS.1, None),
            min_calls: r.number("min_calls", MIN_CALLS.0, MIN_CALLS.1, Some(MIN_CALLS.2)),
            window_s: r.number("window_s", WINDOW.0, WINDOW.1, Some(WINDOW.2)),
        }),
        Some("breaker_open") => {
            let upstream = match obj.get("upstream") {
                None | Some(Value::Null) => None,
                Some(Value::String(u)) if !u.is_empty() && u.len() <= 256 => {
                    Some(u.to_ascii_lowercase())
                }
                Some(_) => {
                    r.problems.push(problem(
                        "/upstream",
                        "`upstream` must be a host:port (an api_call's) or mcp:<label> (an MCP server's), up to 256 characters",
                        "write e.g. \"api.example.com:443\" or \"mcp:crm\", or leave it out for any breaker",
                    ));
                    None
                }
            };
            Some(Condition::BreakerOpen {
                upstream,
                window_s: r.number(
                    "window_s",
                    BREAKER_WINDOW.0,
                    BREAKER_WINDOW.1,
                    Some(BREAKER_WINDOW.2),
                ),
            })
        }
        Some("connection_broken") => Some(Condition::ConnectionBroken {
            agent: r.name("agent", false),
        }),
        Some("live_call_cap") => Some(Condition::LiveCallCap {
            at_percent: r.number("at_percent", PERCENT.0, PERCENT.1, Some(100)),
        }),
        _ => None,
    };
    let webhook_url = match obj.get("webhook_url") {
        Some(Value::String(url)) if url.len() <= 2048 => {
            match webhook_url_problem(url, allow_private) {
                None => Some(url.clone()),
                Some(message) => {
                    r.problems.push(problem(
                        "/webhook_url",
                        message,
                        "give an https URL of a public host that receives the alerts",
                    ));
                    None
                }
            }
        }
        Some(_) => {
            r.problems.push(problem(
                "/webhook_url",
                "`webhook_url` must be a URL of at most 2048 characters",
                "give an https URL, e.g. https://alerts.example.com/switchboard",
            ));
            None
        }
        None => {
            r.problems.push(problem(
                "/webhook_url",
                "`webhook_url` is missing: alerts are delivered as signed webhooks",
                "give an https URL, e.g. https://alerts.example.com/switchboard",
            ));
            None
        }
    };
    match (id, condition, webhook_url) {
        (Some(id), Some(condition), Some(webhook_url)) if r.problems.is_empty() => Ok(Rule {
            id,
            condition,
            webhook_url,
        }),
        _ => Err(r.problems),
    }
}

/// Why `url` cannot receive alerts (the `api_call` guard's rules on the literal; names are
/// checked again at each delivery by the guarded resolver).
fn webhook_url_problem(url: &str, allow_private: bool) -> Option<String> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(_) => return Some("`webhook_url` is not a valid absolute URL".to_owned()),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some(
            "`webhook_url` carries credentials; alerts are signed instead (verify webhook-signature)"
                .to_owned(),
        );
    }
    switchboard_runtime::mcp::check_url(url, allow_private)
        .err()
        .map(|e| {
            format!(
                "`webhook_url`: {}",
                e.replace("MCP servers are", "alerts are")
            )
        })
}

impl Rule {
    /// The stored definition: every field with its value, defaults included.
    pub fn definition(&self) -> Value {
        let mut out = match &self.condition {
            Condition::FailureRate {
                tool,
                above_percent,
                min_calls,
                window_s,
            } => json!({"kind": "tool_failure_rate", "tool": tool, "above_percent": above_percent,
                        "min_calls": min_calls, "window_s": window_s}),
            Condition::LatencyP95 {
                tool,
                above_ms,
                min_calls,
                window_s,
            } => json!({"kind": "tool_latency_p95", "tool": tool, "above_ms": above_ms,
                        "min_calls": min_calls, "window_s": window_s}),
            Condition::BreakerOpen { upstream, window_s } => {
                json!({"kind": "breaker_open", "upstream": upstream, "window_s": window_s})
            }
            Condition::ConnectionBroken { agent } => {
                json!({"kind": "connection_broken", "agent": agent})
            }
            Condition::LiveCallCap { at_percent } => {
                json!({"kind": "live_call_cap", "at_percent": at_percent})
            }
        };
        if let Some(o) = out.as_object_mut() {
            o.insert("webhook_url".to_owned(), json!(self.webhook_url));
        }
        out
    }

    /// Reads a stored definition back (with the id the row keeps).
    pub fn stored(id: &str, definition: &Value) -> Option<Rule> {
        let mut v = definition.clone();
        v.as_object_mut()?.insert("id".to_owned(), json!(id));
        // Stored rules were checked at save; the guard is applied again at delivery.
        parse(&v, true).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointers(v: Value) -> Vec<String> {
        parse(&v, false)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.pointer)
            .collect()
    }

    #[test]
    fn defaults_fill_what_a_rule_leaves_out() {
        let rule = parse(
            &json!({"id": "crm", "kind": "tool_failure_rate", "tool": "save_meal",
                    "webhook_url": "https://alerts.example.com/in"}),
            false,
        )
        .expect("valid");
        assert_eq!(
            rule.condition,
            Condition::FailureRate {
                tool: "save_meal".into(),
                above_percent: 20,
                min_calls: 10,
                window_s: 300
            }
        );
        assert_eq!(Rule::stored("crm", &rule.definition()), Some(rule));
    }

    #[test]
    fn every_problem_is_at_its_pointer() {
        let cases = [
            (json!([]), vec![""]),
            (
                json!({"kind": "nope", "webhook_url": "https://a.example"}),
                vec!["/id", "/kind"],
            ),
            (
                json!({"id": "x", "kind": "tool_latency_p95", "tool": "t", "webhook_url": "https://a.example"}),
                vec!["/above_ms"],
            ),
            (
                json!({"id": "x", "kind": "tool_failure_rate", "tool": "bad name", "window_s": 5,
                       "above_percent": 100, "webhook_url": "https://a.example"}),
                vec!["/tool", "/above_percent", "/window_s"],
            ),
            (
                json!({"id": "x", "kind": "live_call_cap", "tool": "t", "webhook_url": "http://127.0.0.1:9/"}),
                vec!["/tool", "/webhook_url"],
            ),
            (
                json!({"id": "x", "kind": "breaker_open", "webhook_url": "https://u:p@a.example/"}),
                vec!["/webhook_url"],
            ),
            (
                json!({"id": "x", "kind": "connection_broken"}),
                vec!["/webhook_url"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(pointers(input.clone()), want, "{input}");
        }
    }
}
