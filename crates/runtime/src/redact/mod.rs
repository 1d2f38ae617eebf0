//! Keeps secrets out of what Switchboard shows: outputs, invocation records, replay traces,
//! logs, call views and console pages.
//!
//! A [`Redactor`] knows the secret strings of one call (the agent tools' sensitive config, the
//! signing secret and the token-like fields of the user context) and replaces any occurrence with
//! `[redacted]`. JSON is redacted as values, not as text: every string at any depth (object keys
//! too) is compared in its decoded form, so a secret holding `"`, `\`, a newline or any character
//! written as `\uXXXX` is found whatever escaping its JSON text used.
//!
//! An upstream may echo a secret the way the request carried it, so each string is also read
//! through the escapes it holds (JSON, percent and form encoding, HTML references: `views.rs`)
//! and searched for the secret's base64 forms (`forms.rs`), by one automaton built once per
//! redactor (`matcher.rs`). What is not covered: an encoding applied to only part of a secret
//! in a way no decoder reads (say base64 broken across lines), hex or other encodings, and a
//! secret shorter than six bytes (replacing those would mangle text).

use std::sync::Arc;

use serde_json::{Map, Value};
use switchboard_core::result::LogEntry;

use crate::executor::CallConfig;
use crate::invocation::InvocationRecord;

mod forms;
mod matcher;
mod views;

use matcher::Matcher;

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

/// The secrets of one call, as one matcher over all their forms.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `None` when there is no secret to look for. Shared: a redactor is cloned per view.
    matcher: Option<Arc<Matcher>>,
}

impl Redactor {
    /// Collects every string of `secrets` (sensitive config) and the values of token-like keys
    /// of `user`, and builds the matcher of their forms.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Value>, user: &Value) -> Self {
        let mut out = Vec::new();
        for s in secrets {
            collect_strings(s, &mut out);
        }
        collect_secret_fields(user, &mut out);
        out.retain(|s| s.len() >= MIN_SECRET_LEN);
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        if out.is_empty() {
            return Redactor::default();
        }
        Redactor {
            matcher: Some(Arc::new(Matcher::new(&out))),
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
        self.matcher.is_none()
    }

    /// Replaces every secret in free text (a log message, a handoff's words), in any of the
    /// forms the matcher knows.
    pub fn redact(&self, text: &str) -> String {
        match &self.matcher {
            Some(m) => m.redact(text).unwrap_or_else(|| text.to_owned()),
            None => text.to_owned(),
        }
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

    /// Replaces every secret in every string of `v`, object keys included (and a number that
    /// is a secret, as the string `[redacted]`); returns whether anything changed.
    pub fn redact_value(&self, v: &mut Value) -> bool {
        match &self.matcher {
            Some(m) => redact_value(m, v),
            None => false,
        }
    }
}

fn redact_value(m: &Matcher, v: &mut Value) -> bool {
    match v {
        Value::String(s) => match m.redact(s) {
            Some(r) => {
                *s = r;
                true
            }
            None => false,
        },
        Value::Number(n) if m.numeric && m.matches(&n.to_string()) => {
            *v = Value::String(REDACTED.to_owned());
            true
        }
        Value::Array(a) => a
            .iter_mut()
            .fold(false, |changed, x| redact_value(m, x) | changed),
        Value::Object(o) => {
            let mut changed = false;
            for x in o.values_mut() {
                changed |= redact_value(m, x);
            }
            if o.keys().any(|k| m.matches(k)) {
                let old = std::mem::take(o);
                let mut new = Map::with_capacity(old.len());
                for (k, x) in old {
                    let k = m.redact(&k).unwrap_or(k);
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

    /// A secret with the characters every encoding treats differently, and a space.
    const AWKWARD: &str = "pa+ss/w=rd@host#frag! ok";

    /// Every form an upstream could echo `secret` in.
    fn encoded_forms(secret: &str) -> Vec<(&'static str, String)> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let upper = utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string();
        const UNRESERVED: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'~');
        let component = utf8_percent_encode(secret, UNRESERVED).to_string();
        let lower = upper
            .split('%')
            .enumerate()
            .map(|(i, part)| {
                if i == 0 || part.len() < 2 {
                    part.to_owned()
                } else {
                    format!("%{}{}", part[..2].to_ascii_lowercase(), &part[2..])
                }
            })
            .collect::<String>();
        let json_slashes = serde_json::to_string(secret).unwrap().replace('/', "\\/");
        let json_ascii: String = secret
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_string()
                } else {
                    c.encode_utf16(&mut [0; 2])
                        .iter()
                        .map(|u| format!("\\u{u:04X}"))
                        .collect()
                }
            })
            .collect();
        vec![
            ("form-urlencoded", form.clone()),
            ("percent, upper hex, %20", upper.clone()),
            ("percent, lower hex", lower),
            ("JSON with \\/", json_slashes),
            ("JSON \\uXXXX", json_ascii),
            (
                "HTML references",
                secret
                    .replace('&', "&amp;")
                    .replace('+', "&#43;")
                    .replace('/', "&#x2F;"),
            ),
            ("double percent", upper.replace('%', "%25")),
            ("base64", STANDARD.encode(secret)),
            ("base64url, unpadded", URL_SAFE_NO_PAD.encode(secret)),
            (
                "Basic user:secret",
                format!("Basic {}", STANDARD.encode(format!("user:{secret}"))),
            ),
            (
                "base64 of a form-encoded query",
                STANDARD.encode(format!("q=1&key={form}&x=2")),
            ),
            (
                "base64url of an RFC 3986 percent-encoded query",
                URL_SAFE_NO_PAD.encode(format!("k1={component}")),
            ),
        ]
    }

    #[test]
    fn encoded_forms_are_redacted_in_free_text_and_in_values() {
        let r = Redactor::new([&json!({"api_key": AWKWARD})], &json!({}));
        for (what, form) in encoded_forms(AWKWARD) {
            let text = format!("upstream said: bad key ({form}) for /v1/x");
            let out = r.redact(&text);
            assert!(!out.contains(&form), "{what}: {out}");
            assert!(out.contains("[redacted]"), "{what}: {out}");
            assert!(out.starts_with("upstream said: bad key ("), "{what}: {out}");
            assert!(out.ends_with(") for /v1/x"), "{what}: {out}");
            // As a value inside a JSON body, and inside JSON text that is itself a string.
            let body =
                json!({"error": {"detail": text.clone()}, "raw": json!({"q": form}).to_string()})
                    .to_string();
            let out = r.redact_json(&body);
            assert!(!out.contains(&form), "{what}: {out}");
            let v: Value = serde_json::from_str(&out).unwrap();
            assert!(!v["raw"].as_str().unwrap().contains(&form), "{what}: {v}");
        }
    }

    proptest::proptest! {
        /// Any secret of printable characters, in any form an echo could take, amid any text:
        /// the form is gone from what the redactor gives back.
        #[test]
        fn every_form_of_any_secret_is_redacted(
            secret in "[ -~]{6,24}|\\PC{6,12}",
            before in "[a-z .:=]{0,12}",
            after in "[a-z .:=]{0,12}",
        ) {
            let r = Redactor::new([&json!({"k": secret.clone()})], &json!({}));
            let mut forms = encoded_forms(&secret);
            forms.push(("raw", secret.clone()));
            for (what, form) in forms {
                let text = format!("{before}{form}{after}");
                let out = r.redact(&text);
                proptest::prop_assert!(!out.contains(&form), "{}: {:?} -> {:?}", what, text, out);
                let json_out = r.redact_json(&json!({"e": text}).to_string());
                proptest::prop_assert!(!json_out.contains(&form), "{}: {:?}", what, json_out);
            }
        }
    }

    #[test]
    fn a_numeric_secret_echoed_as_a_number_is_redacted() {
        let r = Redactor::new([&json!({"pin": "90210417"})], &json!({}));
        assert_eq!(
            r.redact_json(r#"{"account":90210417,"n":3}"#),
            r#"{"account":"[redacted]","n":3}"#
        );
    }

    #[test]
    fn short_secrets_stay_unredacted_in_every_form() {
        // Five bytes: below the minimum, so neither it nor its encodings are looked for.
        let r = Redactor::new([&json!({"pin": "a+b/c"})], &json!({}));
        assert!(r.is_empty());
        assert_eq!(r.redact("a%2Bb%2Fc and YStiL2M="), "a%2Bb%2Fc and YStiL2M=");
    }

    #[test]
    fn json_without_secrets_is_kept_byte_for_byte() {
        let r = Redactor::new([&json!("sk-live-123456")], &json!({}));
        let text = "{ \"b\": 1,  \"a\": \"x\" }";
        assert_eq!(r.redact_json(text), text);
    }
}
