//! Keeps secrets out of what Switchboard shows: outputs, invocation records, logs.
//!
//! A [`Redactor`] knows the secret strings of one call (the agent tools' sensitive config and
//! the token-like fields of the user context) and replaces any occurrence with `[redacted]`.

use serde_json::Value;

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
    secrets: Vec<String>,
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
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.dedup();
        Redactor { secrets: out }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Replaces every secret in `text`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }
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
            r.redact(text),
            r#"{"key":"[redacted]","t":"Bearer [redacted]","s":"[redacted]","id":"u1"}"#
        );
    }

    #[test]
    fn short_values_are_left_alone() {
        let r = Redactor::new([&json!({"pin": "42"})], &json!({}));
        assert!(r.is_empty());
        assert_eq!(r.redact("42 apples"), "42 apples");
    }
}
