//! Keeps secrets out of what Switchboard shows: outputs, invocation records, logs, call views.
//!
//! A [`Redactor`] knows the secret strings of one call (the agent tools' sensitive config, the
//! signing secret and the token-like fields of the user context) and replaces any occurrence with
//! `[redacted]`. JSON is redacted as values, not as text: every string at any depth (object keys
//! too) is compared in its decoded form, so a secret holding `"`, `\`, a newline or any character
//! written as `\uXXXX` is found whatever escaping its JSON text used.

use serde_json::{Map, Value};
use switchboard_core::result::LogEntry;

use crate::executor::CallConfig;
use crate::invocation::InvocationRecord;

/// The marker that replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Strings shorter than this are not treated as secrets: replacing them would mangle text.
const MIN_SECRET_LEN: usize = 6;

/// User-context keys whose values are secrets.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "authorization",
        "credential",
        "cookie",
        "session",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// The secret strings of one call.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Raw (decoded) secrets, longest first.
    secrets: Vec<String>,
    /// Their JSON-escaped forms where those differ, for text that is not JSON as a whole.
    escaped: Vec<String>,
}

impl Redactor {
    /// Collects every string of `secrets` (sensitive config) and the values of token-like keys
    /// of `user`.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Value>, user: &Value) -> Self {
        let mut out = Vec::new();
        for s in secrets {
            collect_strings(s, &mut out);
        }
        collect_secret_fields(user, &mut out);
        out.retain(|s| s.len() >= MIN_SECRET_LEN);
        // Longest first, so a secret containing another is replaced whole.
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        let mut escaped: Vec<String> = out
            .iter()
            .filter_map(|s| {
                let quoted = serde_json::to_string(s).ok()?;
                let inner = quoted.get(1..quoted.len().saturating_sub(1))?.to_owned();
                (inner != *s).then_some(inner)
            })
            .collect();
        escaped.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        escaped.dedup();
        Redactor {
            secrets: out,
            escaped,
        }
    }

    /// The redactor of one call: the secrets of every tool its agents may use, the signing
    /// secret, and the user's tokens.
    pub fn for_call(config: &CallConfig, user: &Value) -> Self {
        Self::for_calls([config], user)
    }

    /// One redactor over the secrets of several configs of one call (as pinned, and as now).
    pub fn for_calls<'a>(configs: impl IntoIterator<Item = &'a CallConfig>, user: &Value) -> Self {
        use secrecy::ExposeSecret;
        let mut secrets: Vec<Value> = Vec::new();
        for config in configs {
            if let Some(s) = &config.signing_secret {
                secrets.push(Value::String(s.expose_secret().to_owned()));
            }
            for tools in config.agents.values() {
                secrets.extend(tools.values().map(|e| (*e.secrets).clone()));
            }
        }
        Redactor::new(secrets.iter(), user)
    }

    /// An invocation record with the secrets of its arguments, output and logs replaced.
    pub fn redact_record(&self, r: &InvocationRecord) -> InvocationRecord {
        if self.is_empty() {
            return r.clone();
        }
        InvocationRecord {
            tool: self.redact(&r.tool),
            arguments: self.redact_json(&r.arguments),
            output: self.redact_json(&r.output),
            logs: r
                .logs
                .iter()
                .map(|l| LogEntry {
                    message: self.redact(&l.message),
                    ..l.clone()
                })
                .collect(),
            trace: r
                .trace
                .as_ref()
                .and_then(|t| t.redacted(self))
                .map(Box::new),
            ..r.clone()
        }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Replaces every secret in free text (a log message): each secret as it is and in its JSON
    /// escaped form, for text that quotes JSON.
    pub fn redact(&self, text: &str) -> String {
        let mut out = replace_all(&self.secrets, text.to_owned());
        if !self.escaped.is_empty() {
            out = replace_all(&self.escaped, out);
        }
        out
    }

    /// Replaces every secret in a JSON text (an output, arguments) as values. The text is kept
    /// byte for byte when it holds no secret; text that is not JSON is redacted as free text.
    pub fn redact_json(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        match serde_json::from_str::<Value>(text) {
            Ok(mut v) => {
                if self.redact_value(&mut v) {
                    serde_json::to_string(&v).unwrap_or_else(|_| self.redact(text))
                } else {
                    text.to_owned()
                }
            }
            Err(_) => self.redact(text),
        }
    }

    /// Replaces every secret in every string of `v`, object keys included; returns whether
    /// anything changed.
    pub fn redact_value(&self, v: &mut Value) -> bool {
        if self.is_empty() {
            return false;
        }
        match v {
            Value::String(s) => self.redact_string(s),
            Value::Array(a) => a
                .iter_mut()
                .fold(false, |changed, x| self.redact_value(x) | changed),
            Value::Object(o) => {
                let mut changed = false;
                for x in o.values_mut() {
                    changed |= self.redact_value(x);
                }
                if o.keys().any(|k| self.contains_secret(k)) {
                    let old = std::mem::take(o);
                    let mut new = Map::with_capacity(old.len());
                    for (mut k, x) in old {
                        self.redact_string(&mut k);
                        new.insert(k, x);
                    }
                    *o = new;
                    changed = true;
                }
                changed
            }
            _ => false,
        }
    }

    fn contains_secret(&self, s: &str) -> bool {
        self.secrets.iter().any(|x| s.contains(x.as_str()))
    }

    fn redact_string(&self, s: &mut String) -> bool {
        if !self.contains_secret(s) {
            return false;
        }
        *s = replace_all(&self.secrets, std::mem::take(s));
        true
    }
}

fn replace_all(secrets: &[String], mut text: String) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), REDACTED);
        }
    }
    text
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

fn collect_secret_fields(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if is_secret_key(k) {
                    collect_strings(x, out);
                } else {
                    collect_secret_fields(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_secret_fields(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_and_token_fields_are_replaced() {
        let r = Redactor::new(
            [&json!({"api_key": "sk-live-123456"})],
            &json!({"id": "u1", "auth_token": "tok_abcdef", "profile": {"session_id": "sess-999999"}}),
        );
        let text =
            r#"{"key":"sk-live-123456","t":"Bearer tok_abcdef","s":"sess-999999","id":"u1"}"#;
        assert_eq!(
            r.redact_json(text),
            r#"{"key":"[redacted]","t":"Bearer [redacted]","s":"[redacted]","id":"u1"}"#
        );
    }

    #[test]
    fn short_values_are_left_alone() {
        let r = Redactor::new([&json!({"pin": "42"})], &json!({}));
        assert!(r.is_empty());
        assert_eq!(r.redact("42 apples"), "42 apples");
    }

    /// Secrets that JSON must escape, written in every escape form JSON allows.
    #[test]
    fn secrets_are_found_whatever_the_escaping() {
        let secrets = [
            "quo\"te-secret",
            "back\\slash-secret",
            "new\nline-secret",
            "ünï-cødé-sécret",
            "tab\tand\u{1}ctl",
        ];
        let r = Redactor::new([&json!(secrets)], &json!({}));
        for s in secrets {
            let plain = serde_json::to_string(&json!({"a": [s], "k": {s: 1}})).unwrap();
            let ascii: String = plain
                .chars()
                .map(|c| {
                    if c.is_ascii() {
                        c.to_string()
                    } else {
                        format!("\\u{:04x}", c as u32)
                    }
                })
                .collect();
            let all_escaped = format!(
                "{{\"a\":[\"{}\"]}}",
                s.encode_utf16()
                    .map(|u| format!("\\u{u:04x}"))
                    .collect::<String>()
            );
            for text in [plain, ascii, all_escaped] {
                let out = r.redact_json(&text);
                let v: Value = serde_json::from_str(&out).unwrap();
                assert!(!out.contains(s), "{out}");
                assert!(!format!("{v}").contains(s), "{v}");
                assert!(out.contains(REDACTED), "{text} → {out}");
            }
            // Free text quoting JSON.
            let text = format!("sent {}", serde_json::to_string(s).unwrap());
            assert!(!r.redact(&text).contains(&serde_json::to_string(s).unwrap()));
        }
    }

    #[test]
    fn json_without_secrets_is_kept_byte_for_byte() {
        let r = Redactor::new([&json!("sk-live-123456")], &json!({}));
        let text = "{ \"b\": 1,  \"a\": \"x\" }";
        assert_eq!(r.redact_json(text), text);
    }
}
