//! The `email` toolkit: `send_email` over SMTP, with the message written by the model or by one
//! of the agent's named templates.
//!
//! A template (`config.templates.<name>`, a `subject` and a `body`) is written in the project's
//! template language and reads two scopes only: `variables` (what the model fills in, e.g.
//! `variables.name`) and `call` (`call.id`, `call.caller`). The agent's secrets, the caller's
//! `user` scope (which holds tokens) and the call's context are not in reach, so a template
//! cannot put a secret into a message. Templates are checked when the agent is saved and
//! rendered by the email handler for each send, within the same size limits as a message the
//! model writes.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Toolkit, ToolkitAction};
use crate::diag::Diagnostic;
use crate::template::{EvalError, StrTemplate, VarRef, Vars};

/// Longest subject of a message, in bytes (RFC 5322's line length).
pub const MAX_SUBJECT: usize = 998;
/// Largest body of a message, in bytes.
pub const MAX_BODY: usize = 64 * 1024;
/// Most templates one agent's email toolkit holds.
pub const MAX_TEMPLATES: usize = 20;
/// What a template's `call` scope holds.
const CALL_FIELDS: &[&str] = &["id", "caller"];

pub(super) fn toolkit() -> Toolkit {
    Toolkit {
        name: "email",
        description: "Send email over SMTP.",
        config_schema: json!({"type": "object", "properties": {
            "smtp_host": {"type": "string", "title": "SMTP server", "minLength": 1, "maxLength": 253},
            "smtp_port": {"type": "integer", "title": "SMTP port", "default": 587, "minimum": 1, "maximum": 65535},
            "security": {"type": "string", "enum": ["starttls", "tls", "plain"], "default": "starttls",
                         "description": "plain is for servers on a private network or loopback only"},
            "from_email": {"type": "string", "title": "From address", "format": "email", "maxLength": 254},
            "from_name": {"type": "string", "maxLength": 128},
            "templates": {
                "type": "object", "title": "Message templates", "maxProperties": MAX_TEMPLATES,
                "description": "Named messages the model sends with `template` and `variables`, e.g. {\"confirmation\": {\"subject\": \"Your appointment on {{ variables.time }}\", \"body\": \"Hello {{ variables.name }}, …\"}}. Templates read `variables.<name>` (what the model fills in) and `call.id`, `call.caller`.",
                "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
                "additionalProperties": {"type": "object", "properties": {
                    "subject": {"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT},
                    "body": {"type": "string", "minLength": 1, "maxLength": MAX_BODY},
                    "description": {"type": "string", "maxLength": 500,
                                    "description": "What the template is for, shown to the model"}
                }, "required": ["subject", "body"], "additionalProperties": false}
            }
        }, "required": ["smtp_host", "from_email"], "additionalProperties": false}),
        sensitive_config_schema: json!({"type": "object", "properties": {
            "username": {"type": "string", "minLength": 1, "maxLength": 256},
            "password": {"type": "string", "maxLength": 1024}
        }, "additionalProperties": false}),
        requires_auth: true,
        auth_type: Some("basic"),
        auth_config: Some(json!({"fields": ["username", "password"], "in": "sensitive_config"})),
        actions: vec![ToolkitAction {
            name: "send_email",
            description: "Send an email to a recipient: either write its subject and body, or name one of the agent's templates and fill in its variables.",
            parameters: json!([
                {"name": "to", "type": "string", "required": true, "description": "Recipient email address"},
                {"name": "subject", "type": "string", "description": "Email subject (when no template is used)"},
                {"name": "body", "type": "string", "description": "Email body content (when no template is used)"},
                {"name": "template", "type": "string",
                 "description": "Name of a configured template to send instead of subject and body"},
                {"name": "variables", "type": "object",
                 "description": "The template's variables, e.g. {\"name\": \"Pat\", \"time\": \"Tuesday 10:00\"}"}
            ]),
            returns: "{message_id, accepted: [..]}",
            effect: "email.send",
        }],
    }
}

/// A message ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub subject: String,
    pub body: String,
}

/// Every problem of the templates in an email toolkit's `config`, each at its place under
/// `ptr` (`…/config`): syntax (with the line and column in the template's text) and scopes a
/// template may not read. Shapes and sizes are the schema's to check.
pub(super) fn check_templates(ptr: &str, config: &Value, out: &mut Vec<Diagnostic>) {
    let Some(templates) = config.get("templates").and_then(Value::as_object) else {
        return;
    };
    for (name, t) in templates.iter().take(MAX_TEMPLATES) {
        for field in ["subject", "body"] {
            let Some(src) = t.get(field).and_then(Value::as_str) else {
                continue;
            };
            let place = format!("{ptr}/templates/{}/{field}", escape(name));
            match StrTemplate::compile(src) {
                Err(e) => {
                    let (line, column) = e.line_column(src).unwrap_or((1, 1));
                    out.push(Diagnostic {
                        pointer: place,
                        message: format!(
                            "template `{}`, {field}, line {line}, column {column}: {}",
                            clip(name),
                            e.message
                        ),
                        fix: e.fix,
                    });
                }
                Ok(compiled) => {
                    for var in compiled.exprs().iter().flat_map(|e| e.variables()) {
                        if let Some(message) = out_of_reach(&var) {
                            out.push(Diagnostic {
                                pointer: place.clone(),
                                message: format!("template `{}`, {field}: {message}", clip(name)),
                                fix: Some(
                                    "read `variables.<name>` (the model fills them in), `call.id` or `call.caller`"
                                        .into(),
                                ),
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Why a template may not read `var` (a dotted name such as `variables.name`), if it may not.
fn out_of_reach(var: &str) -> Option<String> {
    let (root, rest) = var.split_once('.').unwrap_or((var, ""));
    match root {
        "variables" => None,
        "call" if rest.is_empty() || CALL_FIELDS.contains(&rest) => None,
        "call" => Some(format!("`call.{rest}` is not available to templates")),
        other => Some(format!(
            "`{other}` is not available to templates (secrets and the call's context are kept out of mail)"
        )),
    }
}

/// Renders the template `name` of an email toolkit's `config` with the model's `variables` and
/// the call's `call_id` and `caller`. Errors are written for the model to act on.
pub fn render(
    config: &Value,
    name: &str,
    variables: Option<&Value>,
    call_id: &str,
    caller: Option<&str>,
) -> Result<Rendered, String> {
    let templates = config.get("templates").and_then(Value::as_object);
    let Some(t) = templates.and_then(|m| m.get(name)) else {
        let known: Vec<&str> = templates
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(if known.is_empty() {
            format!(
                "there is no template `{}`: this agent has no email templates; write the subject and body yourself",
                clip(name)
            )
        } else {
            format!(
                "there is no template `{}`; use one of: {}",
                clip(name),
                known.join(", ")
            )
        });
    };
    let variables = match variables {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(
                "`variables` must be an object of names and values, e.g. {\"name\": \"Pat\"}"
                    .into(),
            );
        }
    };
    let variables = Arc::new(variables);
    let call = Arc::new(json!({"id": call_id, "caller": caller}));
    let entries = [
        ("variables", VarRef::whole(&variables)),
        ("call", VarRef::whole(&call)),
    ];
    let vars = Vars::new(&entries);
    let field = |field: &str, limit: usize| -> Result<String, String> {
        let src = t.get(field).and_then(Value::as_str).ok_or_else(|| {
            format!("template `{name}` has no {field}; the operator must fix the agent's email templates")
        })?;
        let compiled = StrTemplate::compile(src).map_err(|e| {
            format!("template `{name}`, {field}, does not compile ({e}); the operator must fix it")
        })?;
        compiled
            .render(&vars, limit)
            .map_err(|e| eval_message(name, field, &e, limit))
    };
    let subject = field("subject", MAX_SUBJECT)?;
    let body = field("body", MAX_BODY)?;
    // A subject is one header line, whatever a variable held.
    let subject = subject
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Ok(Rendered { subject, body })
}

fn eval_message(name: &str, field: &str, e: &EvalError, limit: usize) -> String {
    match e {
        EvalError::Undefined { name: var, .. } => match var.strip_prefix("variables.") {
            Some(v) => format!(
                "template `{name}` needs the variable `{v}`, which was not given; call send_email again with variables.{v} set (ask the caller if you do not know it)"
            ),
            None => format!("template `{name}`, {field}: {e}"),
        },
        EvalError::TooLarge { .. } => format!(
            "the {field} rendered from template `{name}` is over {limit} bytes; give shorter variables"
        ),
        EvalError::Engine { .. } => format!(
            "template `{name}`, {field}, could not be rendered: {e}; check the variables' types"
        ),
    }
}

/// A template name as a JSON Pointer token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(subject: &str, body: &str) -> Value {
        json!({"smtp_host": "mail.example.com", "from_email": "desk@example.com",
               "templates": {"confirmation": {"subject": subject, "body": body}}})
    }

    /// (subject, body, expected problem: pointer and a part of the message; `None` when fine)
    type Case<'a> = (&'a str, &'a str, Option<(&'a str, &'a str)>);

    #[test]
    fn templates_are_checked_at_save() {
        let cases: &[Case<'_>] = &[
            (
                "Booked: {{ variables.time }}",
                "Hello {{ variables.name }}, see you. Call {{ call.id }}.",
                None,
            ),
            (
                "Hi",
                "line one\nline {{ variables.name",
                Some(("/body", "line 2, column 6")),
            ),
            (
                "{{ variables.a +* 2 }}",
                "x",
                Some(("/subject", "line 1, column 1")),
            ),
            (
                "Hi",
                "ok\n  {% if x %}",
                Some(("/body", "line 2, column 3")),
            ),
            (
                "Hi",
                "{{ user.auth_token }}",
                Some(("/body", "`user` is not available")),
            ),
            (
                "Hi",
                "{{ call.params }}",
                Some(("/body", "`call.params` is not available")),
            ),
        ];
        for (subject, body, want) in cases {
            let mut out = Vec::new();
            check_templates("/tools/0/config", &config(subject, body), &mut out);
            match want {
                None => assert!(out.is_empty(), "{subject} / {body}: {out:?}"),
                Some((place, text)) => {
                    assert_eq!(out.len(), 1, "{body}: {out:?}");
                    assert_eq!(
                        out[0].pointer,
                        format!("/tools/0/config/templates/confirmation{place}")
                    );
                    assert!(out[0].message.contains(text), "{text} in {out:?}");
                    assert!(out[0].fix.is_some(), "{out:?}");
                }
            }
        }
    }

    #[test]
    fn a_template_renders_with_the_models_variables() {
        let cfg = config(
            "Booked: {{ variables.time }}\r\nBcc: x@evil.example",
            "Hello {{ variables.name }} ({{ call.caller }})",
        );
        let vars = json!({"name": "Pat", "time": "Tue 10:00"});
        let r = render(&cfg, "confirmation", Some(&vars), "c1", Some("+15551234")).unwrap();
        assert_eq!(r.subject, "Booked: Tue 10:00  Bcc: x@evil.example");
        assert_eq!(r.body, "Hello Pat (+15551234)");
    }

    #[test]
    fn render_errors_tell_the_model_what_to_do() {
        let cfg = config("Booked", "Hello {{ variables.name }}");
        let e = render(&cfg, "confirmation", Some(&json!({})), "c1", None).unwrap_err();
        assert!(
            e.contains("needs the variable `name`") && e.contains("variables.name"),
            "{e}"
        );
        let e = render(&cfg, "reminder", None, "c1", None).unwrap_err();
        assert!(e.contains("use one of: confirmation"), "{e}");
        let e = render(&cfg, "confirmation", Some(&json!("Pat")), "c1", None).unwrap_err();
        assert!(e.contains("must be an object"), "{e}");
        let big = json!({"name": "x".repeat(MAX_BODY + 1)});
        let e = render(&cfg, "confirmation", Some(&big), "c1", None).unwrap_err();
        assert!(e.contains("over 65536 bytes"), "{e}");
    }
}
