//! An alert rule's definition, read once at save with every problem at its JSON Pointer.
//!
//! A rule is a flat object: `id`, `kind`, the kind's fields, and its channels: `webhook_url`
//! and/or `email` (the addresses and the SMTP server to send through). What a field leaves out
//! takes its default; the stored definition has every default filled in, so the evaluator never
//! re-checks it. The SMTP password is taken apart ([`smtp_password`]) and never stored in the
//! definition.

use secrecy::SecretString;
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

/// A checked rule: at least one of its channels is set.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    pub condition: Condition,
    pub webhook_url: Option<String>,
    pub email: Option<EmailChannel>,
}

/// Where a rule's emails go, and the SMTP server they go through (its password apart).
#[derive(Debug, Clone, PartialEq)]
pub struct EmailChannel {
    pub to: Vec<String>,
    pub from_email: String,
    pub smtp_host: String,
    pub smtp_port: u16,
    /// `starttls`, `tls` or `plain`.
    pub security: String,
    pub username: Option<String>,
}

/// Most addresses one rule emails.
pub const MAX_EMAIL_TO: usize = 10;
/// The fields of `email`.
const EMAIL_FIELDS: &[&str] = &[
    "to",
    "from_email",
    "smtp_host",
    "smtp_port",
    "security",
    "username",
    "password",
];
const SECURITY: &[&str] = &["starttls", "tls", "plain"];

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

/// Fields of an object looked at for unknown ones (a rule has at most eight).
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
        if !["id", "kind", "webhook_url", "email"].contains(&key.as_str())
            && !fields.contains(&key.as_str())
            && kind.is_some()
        {
            r.problems.push(problem(
                &format!("/{}", escape(key)),
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
        None | Some(Value::Null) => None,
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
    };
    let email = match obj.get("email") {
        None | Some(Value::Null) => None,
        Some(Value::Object(e)) => read_email(e, allow_private, &mut r.problems),
        Some(_) => {
            r.problems.push(problem(
                "/email",
                "`email` must be an object: the addresses and the SMTP server to send through",
                "write e.g. {\"to\": [\"ops@example.com\"], \"from_email\": \"alerts@example.com\", \"smtp_host\": \"smtp.example.com\"}",
            ));
            None
        }
    };
    if !obj.contains_key("webhook_url") && !obj.contains_key("email") {
        r.problems.push(problem(
            "/webhook_url",
            "`webhook_url` and `email` are both missing: a rule notifies by a signed webhook, an email, or both",
            "give an https URL, e.g. https://alerts.example.com/switchboard, or `email` with `to`, `from_email` and `smtp_host`",
        ));
    }
    match (id, condition) {
        (Some(id), Some(condition))
            if r.problems.is_empty() && (webhook_url.is_some() || email.is_some()) =>
        {
            Ok(Rule {
                id,
                condition,
                webhook_url,
                email,
            })
        }
        _ => Err(r.problems),
    }
}

/// A JSON Pointer token for `key`.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether `text` is free of control characters and at most `max` bytes, not empty.
fn plain_text(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && !text.chars().any(char::is_control)
}

/// Reads `email`, each problem at its pointer under `/email`.
fn read_email(
    e: &Map<String, Value>,
    allow_private: bool,
    problems: &mut Vec<Diagnostic>,
) -> Option<EmailChannel> {
    let before = problems.len();
    for key in e.keys().take(MAX_UNKNOWN) {
        if !EMAIL_FIELDS.contains(&key.as_str()) {
            problems.push(problem(
                &format!("/email/{}", escape(key)),
                format!(
                    "`{}` is not a field of `email`",
                    key.chars().take(64).collect::<String>()
                ),
                format!("remove it; `email` takes {}", EMAIL_FIELDS.join(", ")),
            ));
        }
    }
    let mut to = Vec::new();
    match e.get("to") {
        Some(Value::Array(list)) if !list.is_empty() && list.len() <= MAX_EMAIL_TO => {
            for (i, a) in list.iter().enumerate() {
                match a.as_str() {
                    Some(a) if switchboard_toolkits::smtp::is_address(a) => {
                        to.push(a.to_owned());
                    }
                    _ => problems.push(problem(
                        &format!("/email/to/{i}"),
                        "this is not an email address",
                        "write an address as name@example.com (no display name)",
                    )),
                }
            }
        }
        _ => problems.push(problem(
            "/email/to",
            format!("`to` must be a list of 1 to {MAX_EMAIL_TO} email addresses"),
            "write e.g. [\"ops@example.com\", \"oncall@example.com\"]",
        )),
    }
    let from_email = match e.get("from_email").and_then(Value::as_str) {
        Some(a) if switchboard_toolkits::smtp::is_address(a) => Some(a.to_owned()),
        _ => {
            problems.push(problem(
                "/email/from_email",
                "`from_email` must be the email address alerts are sent from",
                "write e.g. \"alerts@example.com\" (an address the SMTP server may send as)",
            ));
            None
        }
    };
    let smtp_host = match e.get("smtp_host").and_then(Value::as_str) {
        Some(h) if is_host(h) => match host_problem(h, allow_private) {
            None => Some(h.to_ascii_lowercase()),
            Some(message) => {
                problems.push(problem(
                    "/email/smtp_host",
                    message,
                    "give the name or address of a public SMTP server, e.g. \"smtp.example.com\"",
                ));
                None
            }
        },
        _ => {
            problems.push(problem(
                "/email/smtp_host",
                "`smtp_host` must be the SMTP server's name or IP address (at most 253 characters)",
                "write e.g. \"smtp.example.com\"",
            ));
            None
        }
    };
    let smtp_port = match e.get("smtp_port") {
        None | Some(Value::Null) => 587,
        Some(v) => match v.as_u64().and_then(|p| u16::try_from(p).ok()) {
            Some(p) if p > 0 => p,
            _ => {
                problems.push(problem(
                    "/email/smtp_port",
                    format!("`smtp_port` is {v}, not a port"),
                    "give a whole number from 1 to 65535: 587 (starttls, the default) or 465 (tls)",
                ));
                0
            }
        },
    };
    let security = match e.get("security") {
        None | Some(Value::Null) => "starttls".to_owned(),
        Some(Value::String(s)) if s == "plain" && !allow_private => {
            problems.push(problem(
                "/email/security",
                "security `plain` is refused on this server: it sends the password and the mail in the clear",
                "use starttls (the default) or tls",
            ));
            String::new()
        }
        Some(Value::String(s)) if SECURITY.contains(&s.as_str()) => s.clone(),
        Some(_) => {
            problems.push(problem(
                "/email/security",
                "`security` must be starttls, tls or plain",
                "use starttls (the default; port 587) or tls (port 465)",
            ));
            String::new()
        }
    };
    let username = match e.get("username") {
        None | Some(Value::Null) => None,
        Some(Value::String(u)) if plain_text(u, 256) => Some(u.clone()),
        Some(_) => {
            problems.push(problem(
                "/email/username",
                "`username` must be 1-256 characters without control characters",
                "write the SMTP server's user name, or leave it out for a server without sign-in",
            ));
            None
        }
    };
    match e.get("password") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) if plain_text(p, 1024) && username.is_some() => {}
        Some(Value::String(p)) if plain_text(p, 1024) => problems.push(problem(
            "/email/password",
            "`password` is given without `username`",
            "give the SMTP server's `username` too, or leave the password out",
        )),
        // Never echo what was sent: it may be the password.
        Some(_) => problems.push(problem(
            "/email/password",
            "`password` must be 1-1024 characters without control characters",
            "write the SMTP server's password as a string; it is stored sealed and never shown",
        )),
    }
    match (from_email, smtp_host) {
        (Some(from_email), Some(smtp_host)) if problems.len() == before => Some(EmailChannel {
            to,
            from_email,
            smtp_host,
            smtp_port,
            security,
            username,
        }),
        _ => None,
    }
}

/// Whether `h` reads as a host name or an IP address.
fn is_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && (h.parse::<std::net::IpAddr>().is_ok()
            || h.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'))
}

/// Why the SMTP server `host` cannot be sent through (the outbound guard's rules on the
/// literal; a name is resolved and checked again at each delivery).
fn host_problem(host: &str, allow_private: bool) -> Option<String> {
    if allow_private {
        return None;
    }
    let lower = host.to_ascii_lowercase();
    let loopback_name = lower == "localhost" || lower.ends_with(".localhost");
    let forbidden_ip = host
        .parse::<std::net::IpAddr>()
        .is_ok_and(switchboard_runtime::http::is_forbidden_address);
    (loopback_name || forbidden_ip).then(|| {
        format!(
            "`smtp_host` {} is a loopback, private or metadata address, which this server does not call",
            host.chars().take(64).collect::<String>()
        )
    })
}

/// The SMTP password a rule's body gives (`/email/password`), taken apart from the rule.
pub fn smtp_password(value: &Value) -> Option<SecretString> {
    value
        .pointer("/email/password")
        .and_then(Value::as_str)
        .map(|p| SecretString::from(p.to_owned()))
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
            if let Some(url) = &self.webhook_url {
                o.insert("webhook_url".to_owned(), json!(url));
            }
            if let Some(e) = &self.email {
                let mut email = json!({"to": e.to, "from_email": e.from_email,
                    "smtp_host": e.smtp_host, "smtp_port": e.smtp_port, "security": e.security});
                if let (Some(u), Some(m)) = (&e.username, email.as_object_mut()) {
                    m.insert("username".to_owned(), json!(u));
                }
                o.insert("email".to_owned(), email);
            }
        }
        out
    }

    /// The channels it notifies on.
    pub fn channels(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.webhook_url.is_some() {
            out.push("webhook");
        }
        if self.email.is_some() {
            out.push("email");
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

impl Condition {
    /// What the rule watches, for a subject line: the tool, the upstream, the connection.
    pub fn target(&self) -> String {
        match self {
            Condition::FailureRate { tool, .. } | Condition::LatencyP95 { tool, .. } => {
                tool.clone()
            }
            Condition::BreakerOpen { upstream, .. } => upstream
                .clone()
                .unwrap_or_else(|| "any upstream".to_owned()),
            Condition::ConnectionBroken { agent } => agent.as_ref().map_or_else(
                || "any connection".to_owned(),
                |a| format!("{a}'s connection"),
            ),
            Condition::LiveCallCap { .. } => "live calls".to_owned(),
        }
    }

    /// When the rule fires, in words.
    pub fn threshold(&self) -> String {
        match self {
            Condition::FailureRate {
                above_percent,
                min_calls,
                window_s,
                ..
            } => format!(
                "more than {above_percent}% of at least {min_calls} calls failed in {window_s} s"
            ),
            Condition::LatencyP95 {
                above_ms,
                min_calls,
                window_s,
                ..
            } => format!(
                "p95 latency over {above_ms} ms across at least {min_calls} calls in {window_s} s"
            ),
            Condition::BreakerOpen { window_s, .. } => {
                format!("a circuit breaker opened within {window_s} s")
            }
            Condition::ConnectionBroken { .. } => {
                "the provider refused to refresh a connection".to_owned()
            }
            Condition::LiveCallCap { at_percent } => {
                format!("live calls reached {at_percent}% of the live-call cap")
            }
        }
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
    fn an_email_rule_keeps_its_password_apart() {
        let body = json!({"id": "crm", "kind": "live_call_cap", "email": {
            "to": ["ops@example.com"], "from_email": "alerts@example.com",
            "smtp_host": "smtp.example.com", "username": "alerts", "password": "hunter2"}});
        let rule = parse(&body, false).expect("valid");
        assert_eq!(rule.channels(), ["email"]);
        let def = rule.definition();
        assert_eq!(def["email"]["smtp_port"], 587);
        assert_eq!(def["email"]["security"], "starttls");
        assert!(!def.to_string().contains("hunter2"), "{def}");
        assert!(smtp_password(&body).is_some());
        assert_eq!(Rule::stored("crm", &def), Some(rule));
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
            (
                json!({"id": "x", "kind": "connection_broken", "email": {"to": ["ops@example.com", "not an address"],
                       "from_email": "alerts@example.com", "smtp_host": "10.0.0.5", "smtp_port": 70000,
                       "security": "plain", "password": "hunter2", "cc": []}}),
                vec![
                    "/email/cc",
                    "/email/to/1",
                    "/email/smtp_host",
                    "/email/smtp_port",
                    "/email/security",
                    "/email/password",
                ],
            ),
            (
                json!({"id": "x", "kind": "connection_broken", "email": {"to": [], "smtp_host": "smtp.example.com"}}),
                vec!["/email/to", "/email/from_email"],
            ),
            (
                json!({"id": "x", "kind": "live_call_cap", "email": "ops@example.com"}),
                vec!["/email"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(pointers(input.clone()), want, "{input}");
        }
    }
}
