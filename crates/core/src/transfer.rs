//! The transfer toolkit (seed 001): a tenant's `features.refer` config becomes one
//! `request_transfer` function, and the `destination_id` the model picks resolves to the URI that
//! the call is REFERred to.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::function::FunctionDef;

/// The name of the function the transfer toolkit gives the model (seed 001).
pub const REQUEST_TRANSFER: &str = "request_transfer";

/// A tenant's `features.refer` config: whether calls may be transferred, and where to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferConfig {
    /// Master switch: when false no transfer function is offered and none is performed.
    pub enabled: bool,
    /// Whether the model must get the caller's explicit confirmation before transferring; it
    /// defaults to true because an unwanted transfer cannot be undone mid-call.
    #[serde(default = "default_true")]
    pub require_confirmation: bool,
    /// What the model says before transferring; `{{label}}` is left for the model to fill in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_phrase: Option<String>,
    /// Every configured destination, enabled or not, in the tenant's order.
    #[serde(default)]
    pub destinations: Vec<Destination>,
}

/// One place a call can be transferred to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    /// The id the model passes as `destination_id`; matches `^[a-zA-Z0-9_-]{1,64}$`.
    pub destination_id: String,
    /// Human name of the service, shown to the model (the id stands in when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// When the model should pick this destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_for_model: Option<String>,
    /// A `sip:`, `sips:` or `tel:` URI, or a bare E.164 number sent as `tel:`.
    pub target_uri: String,
    /// Lets a tenant keep a destination configured while taking it out of service.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Higher comes first in the function's enum and description; ties keep config order.
    #[serde(default)]
    pub priority: i64,
    /// Another destination's id, tried once when the phone API refuses the REFER to this one
    /// (or does not answer in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

fn default_true() -> bool {
    true
}

/// One thing wrong with a config, located by JSON Pointer so an editor can highlight it.
pub type ConfigProblem = crate::diag::Diagnostic;

const REFER_FIELDS: &[&str] = &[
    "enabled",
    "require_confirmation",
    "handoff_phrase",
    "destinations",
];
const DESTINATION_FIELDS: &[&str] = &[
    "destination_id",
    "label",
    "description_for_model",
    "target_uri",
    "enabled",
    "priority",
    "fallback",
];

impl ReferConfig {
    /// Parses and validates a `features.refer` document, reporting every problem at once.
    ///
    /// Unlike plain serde, this names each problem by JSON Pointer with a fix, and checks
    /// destination ids (pattern, uniqueness) and target URIs.
    pub fn parse(value: &Value) -> Result<ReferConfig, Vec<ConfigProblem>> {
        let mut walker = Walker::default();
        let config = walker.refer_config(value);
        match config {
            Some(config) if walker.problems.is_empty() => Ok(config),
            _ => Err(walker.problems),
        }
    }
}

/// Collects problems while reading a config, so one pass reports all of them.
#[derive(Default)]
struct Walker {
    problems: Vec<ConfigProblem>,
}

impl Walker {
    fn report(&mut self, pointer: String, message: String, fix: Option<String>) {
        self.problems.push(ConfigProblem {
            pointer,
            message,
            fix,
        });
    }

    fn refer_config(&mut self, value: &Value) -> Option<ReferConfig> {
        let obj = self.object(value, "")?;
        self.unknown_fields(obj, "", REFER_FIELDS);
        let enabled = self.bool_field(obj, "", "enabled", None);
        let require_confirmation = self.bool_field(obj, "", "require_confirmation", Some(true));
        let handoff_phrase = self.optional_string(obj, "", "handoff_phrase");
        let destinations = self.destinations(obj);
        Some(ReferConfig {
            enabled: enabled?,
            require_confirmation: require_confirmation?,
            handoff_phrase: handoff_phrase?,
            destinations: destinations?,
        })
    }

    fn destinations(&mut self, obj: &Map<String, Value>) -> Option<Vec<Destination>> {
        let Some(value) = obj.get("destinations") else {
            return Some(Vec::new());
        };
        let Some(items) = value.as_array() else {
            self.wrong_type("/destinations".into(), Expected::DestinationList, value);
            return None;
        };
        let parsed: Vec<Option<Destination>> = items
            .iter()
            .enumerate()
            .map(|(index, item)| self.destination(item, index, &items[..index]))
            .collect();
        let destinations: Option<Vec<Destination>> = parsed.into_iter().collect();
        if let Some(all) = &destinations {
            self.check_fallbacks(all);
        }
        destinations
    }

    /// A `fallback` names another destination of the list.
    fn check_fallbacks(&mut self, all: &[Destination]) {
        for (index, d) in all.iter().enumerate() {
            let Some(fallback) = &d.fallback else {
                continue;
            };
            let pointer = format!("/destinations/{index}/fallback");
            if *fallback == d.destination_id {
                self.report(
                    pointer,
                    format!("destination \"{fallback}\" falls back to itself"),
                    Some("name another destination's id, or remove `fallback`".into()),
                );
            } else if !all.iter().any(|o| o.destination_id == *fallback) {
                let ids: Vec<&str> = all
                    .iter()
                    .filter(|o| o.destination_id != d.destination_id)
                    .map(|o| o.destination_id.as_str())
                    .collect();
                self.report(
                    pointer,
                    format!("fallback \"{fallback}\" is not a destination"),
                    Some(if ids.is_empty() {
                        "add the destination to fall back to, or remove `fallback`".into()
                    } else {
                        format!("use one of: {}", ids.join(", "))
                    }),
                );
            }
        }
    }

    /// `earlier` are the destinations before this one, to catch a reused id where it repeats.
    fn destination(
        &mut self,
        value: &Value,
        index: usize,
        earlier: &[Value],
    ) -> Option<Destination> {
        let at = &format!("/destinations/{index}");
        let obj = self.object(value, at)?;
        self.unknown_fields(obj, at, DESTINATION_FIELDS);
        let destination_id = self.required_string(obj, at, "destination_id");
        if let Some(id) = &destination_id {
            let pointer = format!("{at}/destination_id");
            self.check_destination_id(id, &pointer);
            self.check_unique_id(id, &pointer, earlier);
        }
        let label = self.optional_string(obj, at, "label");
        let description_for_model = self.optional_string(obj, at, "description_for_model");
        let target_uri = self.required_string(obj, at, "target_uri");
        if let Some(uri) = &target_uri {
            self.check_target_uri(uri, &format!("{at}/target_uri"));
        }
        let enabled = self.bool_field(obj, at, "enabled", Some(true));
        let priority = self.priority(obj, at);
        let fallback = self.optional_string(obj, at, "fallback");
        Some(Destination {
            destination_id: destination_id?,
            label: label?,
            description_for_model: description_for_model?,
            target_uri: target_uri?,
            enabled: enabled?,
            priority: priority?,
            fallback: fallback?,
        })
    }

    fn object<'v>(&mut self, value: &'v Value, at: &str) -> Option<&'v Map<String, Value>> {
        let obj = value.as_object();
        if obj.is_none() {
            self.wrong_type(at.to_owned(), Expected::Object, value);
        }
        obj
    }

    fn unknown_fields(&mut self, obj: &Map<String, Value>, at: &str, known: &[&str]) {
        for key in obj.keys().filter(|key| !known.contains(&key.as_str())) {
            let fix = match closest_field(key, known) {
                Some(near) => format!("did you mean \"{near}\"?"),
                None => format!("remove it; known fields are: {}", known.join(", ")),
            };
            self.report(
                format!("{at}/{}", escape_pointer_token(key)),
                format!("unknown field \"{key}\""),
                Some(fix),
            );
        }
    }

    /// A missing boolean takes `default`, or is a problem when there is none.
    fn bool_field(
        &mut self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
        default: Option<bool>,
    ) -> Option<bool> {
        match (obj.get(key), default) {
            (Some(Value::Bool(b)), _) => Some(*b),
            (Some(other), _) => {
                self.wrong_type(format!("{at}/{key}"), Expected::Bool, other);
                None
            }
            (None, Some(default)) => Some(default),
            (None, None) => {
                self.missing(at, key, "add it: true or false");
                None
            }
        }
    }

    /// Outer `None` means a problem was reported; inner `None` means absent or null.
    fn optional_string(
        &mut self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Option<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(other) => {
                self.wrong_type(format!("{at}/{key}"), Expected::Str, other);
                None
            }
        }
    }

    fn required_string(&mut self, obj: &Map<String, Value>, at: &str, key: &str) -> Option<String> {
        match obj.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                self.wrong_type(format!("{at}/{key}"), Expected::Str, other);
                None
            }
            None => {
                self.missing(at, key, "add it as a string");
                None
            }
        }
    }

    fn priority(&mut self, obj: &Map<String, Value>, at: &str) -> Option<i64> {
        match obj.get("priority") {
            None => Some(0),
            Some(value) => {
                let priority = value.as_i64();
                if priority.is_none() {
                    self.wrong_type(format!("{at}/priority"), Expected::Int, value);
                }
                priority
            }
        }
    }

    fn check_destination_id(&mut self, id: &str, pointer: &str) {
        if id.is_empty() {
            self.report(
                pointer.to_owned(),
                "destination_id is empty".into(),
                Some("give the destination a short id such as \"sales\"".into()),
            );
        } else if !is_valid_destination_id(id) {
            self.report(
                pointer.to_owned(),
                format!("destination_id \"{id}\" must match ^[a-zA-Z0-9_-]{{1,64}}$"),
                Some("use only letters, digits, \"_\" and \"-\", at most 64 characters".into()),
            );
        }
    }

    /// Reports a repeated id at the repeat, pointing back to its first use.
    fn check_unique_id(&mut self, id: &str, pointer: &str, earlier: &[Value]) {
        if id.is_empty() {
            return; // already reported as empty
        }
        let first = earlier
            .iter()
            .position(|other| other.get("destination_id").and_then(Value::as_str) == Some(id));
        if let Some(first) = first {
            self.report(
                pointer.to_owned(),
                format!(
                    "duplicate destination_id \"{id}\" (already used by /destinations/{first})"
                ),
                Some("give every destination its own destination_id".into()),
            );
        }
    }

    fn check_target_uri(&mut self, uri: &str, pointer: &str) {
        if is_valid_target_uri(uri) {
            return;
        }
        self.report(
            pointer.to_owned(),
            format!(
                "target_uri \"{uri}\" is neither a sip:, sips: or tel: URI nor an E.164 number"
            ),
            Some(target_uri_fix(uri)),
        );
    }

    fn wrong_type(&mut self, pointer: String, expected: Expected, found: &Value) {
        self.report(
            pointer,
            format!("expected {}, found {}", expected.noun(), json_kind(found)),
            Some(expected.fix().to_owned()),
        );
    }

    fn missing(&mut self, at: &str, key: &str, fix: &str) {
        self.report(
            format!("{at}/{key}"),
            format!("missing required field \"{key}\""),
            Some(fix.to_owned()),
        );
    }
}

/// The JSON types a config field can require, each with its fix.
#[derive(Debug, Clone, Copy)]
enum Expected {
    Object,
    DestinationList,
    Bool,
    Str,
    Int,
}

impl Expected {
    fn noun(self) -> &'static str {
        match self {
            Expected::Object => "a JSON object",
            Expected::DestinationList => "an array of destinations",
            Expected::Bool => "a boolean",
            Expected::Str => "a string",
            // i64 is what priorities are ordered by; a larger u64 would not fit.
            Expected::Int => "an integer (64-bit signed)",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            Expected::Object => "write a JSON object: { \"field\": value, ... }",
            Expected::DestinationList => {
                "write a JSON array of destination objects: [{ \"destination_id\": ..., \"target_uri\": ... }]"
            }
            Expected::Bool => "write true or false, without quotes",
            Expected::Str => "write it as a JSON string, in double quotes",
            Expected::Int => "write a whole number such as 10, without quotes",
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() => "an integer",
        Value::Number(n) if n.is_u64() => "an integer above 9223372036854775807",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// RFC 6901: `~` and `/` inside a key must be escaped for the pointer to stay unambiguous.
fn escape_pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn is_valid_destination_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `+` then 7 to 15 digits: E.164 caps numbers at 15 digits, and shorter ones are not dialable.
fn is_e164(s: &str) -> bool {
    s.strip_prefix('+').is_some_and(|digits| {
        (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The schemes OpenAI's REFER endpoint accepts; lower case is what it documents.
const URI_SCHEMES: &[&str] = &["sip:", "sips:", "tel:"];

fn is_valid_target_uri(uri: &str) -> bool {
    is_e164(uri)
        || URI_SCHEMES.iter().any(|scheme| {
            uri.strip_prefix(scheme).is_some_and(|rest| {
                !rest.is_empty() && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
            })
        })
}

/// Suggests the exact repair for the usual mistakes (upper-case scheme, spaced-out number).
fn target_uri_fix(uri: &str) -> String {
    let lowered_scheme = URI_SCHEMES.iter().find_map(|scheme| {
        let head = uri.get(..scheme.len())?;
        let rest = uri.get(scheme.len()..)?;
        (head.eq_ignore_ascii_case(scheme) && head != *scheme).then(|| format!("{scheme}{rest}"))
    });
    if let Some(fixed) = lowered_scheme.filter(|fixed| is_valid_target_uri(fixed)) {
        return format!("write the scheme in lower case: \"{fixed}\"");
    }
    let compact: String = uri
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    if compact != uri && is_e164(&compact) {
        return format!("write the number without separators: \"{compact}\"");
    }
    "use \"sip:user@host\", \"tel:+14155552000\" or a bare E.164 number such as \"+14155552000\""
        .into()
}

/// The closest known field to a misspelt one: same name up to case and `_`/`-`, or within
/// two edits; `None` when nothing is close enough to be a likely typo.
fn closest_field<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let squashed = squash(key);
    if let Some(same) = known.iter().find(|k| squash(k) == squashed) {
        return Some(same);
    }
    known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), *k))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// The URI a REFER needs: a bare E.164 number becomes `tel:+…`; anything else is kept as is.
pub fn normalize_target_uri(target_uri: &str) -> String {
    if is_e164(target_uri) {
        format!("tel:{target_uri}")
    } else {
        target_uri.to_owned()
    }
}

/// Enabled destinations, highest priority first; the sort is stable, so ties keep config order
/// (as Python's `sort(reverse=True)` in seed 001 does).
fn enabled_by_priority(config: &ReferConfig) -> Vec<&Destination> {
    let mut destinations: Vec<&Destination> =
        config.destinations.iter().filter(|d| d.enabled).collect();
    destinations.sort_by_key(|d| std::cmp::Reverse(d.priority));
    destinations
}

/// Builds the `request_transfer` function exactly as seed 001's `_build_refer_tool` does;
/// `None` when the feature is off or no destination is enabled.
pub fn build_refer_function(config: &ReferConfig) -> Option<FunctionDef> {
    if !config.enabled {
        return None;
    }
    let destinations = enabled_by_priority(config);
    if destinations.is_empty() {
        return None;
    }
    let ids: Vec<&str> = destinations
        .iter()
        .map(|d| d.destination_id.as_str())
        .collect();
    let hints: Vec<String> = destinations.iter().map(|d| destination_hint(d)).collect();
    Some(FunctionDef {
        name: REQUEST_TRANSFER.to_owned(),
        description: tool_description(config),
        parameters: transfer_parameters(&ids, &hints),
        // `reason` is optional and not nullable, so the schema is not OpenAI-strict.
        strict: false,
    })
}

/// `"{id}: {label} — {description}"`, with the seed's `.strip(" —")` trimming a missing half.
fn destination_hint(d: &Destination) -> String {
    // Python's `d.label or d.destination_id`: an empty label falls back to the id too.
    let label = py_strip(
        d.label
            .as_deref()
            .filter(|label| !label.is_empty())
            .unwrap_or(&d.destination_id),
    );
    let opt_desc = py_strip(d.description_for_model.as_deref().unwrap_or(""));
    let joined = format!("{label} — {opt_desc}");
    // `str.strip(" —")` removes any run of spaces and em dashes at both ends.
    let description = joined.trim_matches(|c| c == ' ' || c == '—');
    format!("{}: {description}", d.destination_id)
}

fn tool_description(config: &ReferConfig) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.push(if config.require_confirmation {
        "Utiliser uniquement APRÈS confirmation explicite de l'appelant.".into()
    } else {
        "Utiliser lorsque l'appelant demande explicitement un transfert.".into()
    });
    if let Some(phrase) = config.handoff_phrase.as_deref().filter(|p| !p.is_empty()) {
        // The seed's second literal is not an f-string, so `{{label}}` stays doubled.
        parts.push(format!(
            "Avant d'appeler l'outil, annoncer: {phrase} \
             (remplacer {{{{label}}}} par le libellé du service choisi)."
        ));
    }
    let kept: Vec<&str> = parts
        .iter()
        .map(|p| py_strip(p))
        .filter(|p| !p.is_empty())
        .collect();
    py_strip(&kept.join(" ")).to_owned()
}

fn transfer_parameters(ids: &[&str], hints: &[String]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "destination_id": {
                "type": "string",
                "enum": ids,
                "description": format!(
                    "Identifiant du service vers lequel transférer. \
                     Valeurs autorisées: {}. Détails: {}",
                    ids.join(", "),
                    hints.join(" | ")
                ),
            },
            "reason": {
                "type": "string",
                "description": "Raison courte du transfert (optionnel).",
            },
        },
        "required": ["destination_id"],
        "additionalProperties": false,
    })
}

/// Python's argument-less `str.strip()`: Rust's whitespace plus the four ASCII separators
/// U+001C..U+001F, which Python also counts as whitespace.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// What a `destination_id` chosen by the model resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Transfer here: the destination's URI, normalized for REFER.
    Target(String),
    /// No enabled destination has that id; `valid_ids` are the enabled ones, in the order the
    /// model saw them in the function's enum, so it can pick again.
    Unknown {
        /// Enabled destination ids, highest priority first.
        valid_ids: Vec<String>,
    },
    /// Transfer is switched off for this tenant, or no destination is enabled.
    Disabled,
}

/// Resolves the model's `destination_id` to a REFER target, mirroring seed 001's
/// `resolve_refer_target_uri`.
///
/// Unlike the seed, only enabled destinations count: the seed would still transfer to a
/// disabled destination if the model named it (e.g. from an earlier session's tool list).
/// The seed returns an empty id list when nothing is enabled, which its caller treats like the
/// feature being off; here that case is [`Resolution::Disabled`].
pub fn resolve_destination(config: &ReferConfig, destination_id: &str) -> Resolution {
    if !config.enabled {
        return Resolution::Disabled;
    }
    let enabled = enabled_by_priority(config);
    if enabled.is_empty() {
        return Resolution::Disabled;
    }
    match enabled.iter().find(|d| d.destination_id == destination_id) {
        Some(d) => Resolution::Target(normalize_target_uri(&d.target_uri)),
        None => Resolution::Unknown {
            valid_ids: enabled.iter().map(|d| d.destination_id.clone()).collect(),
        },
    }
}

/// Where a transfer to `destination_id` goes when its REFER fails: its `fallback`, if that is
/// an enabled destination, as `(destination_id, target URI normalized for REFER)`.
pub fn fallback_target(config: &ReferConfig, destination_id: &str) -> Option<(String, String)> {
    if !config.enabled {
        return None;
    }
    let enabled = enabled_by_priority(config);
    let id = enabled
        .iter()
        .find(|d| d.destination_id == destination_id)?
        .fallback
        .as_deref()?;
    let next = enabled.iter().find(|d| d.destination_id == id)?;
    Some((
        next.destination_id.clone(),
        normalize_target_uri(&next.target_uri),
    ))
}

/// The key that makes a transfer happen once per call and target, however often the model
/// asks: `{call_id}-transfer-{target_uri}` (seed 001).
pub fn transfer_idempotency_key(call_id: &str, target_uri: &str) -> String {
    format!("{call_id}-transfer-{target_uri}")
}

/// The `request_transfer` tool as a declarative tool: seed 001's function definition, and one
/// `transfer` action resolving the destination, so it runs through the same interpreter, call
/// session and interruption policy as every other tool. `None` when transfer is off.
pub fn request_transfer_tool(
    config: &ReferConfig,
    limits: &crate::limits::Limits,
) -> Option<crate::tool::Tool> {
    let function = build_refer_function(config)?;
    let definition = serde_json::json!({
        "name": function.name,
        "description": function.description,
        "parameters": function.parameters,
        "side_effect": "terminal",
        "actions": [{
            "type": "transfer",
            "destination": "{{ params.destination_id }}",
            "reason": "{{ params.reason | default('') }}"
        }]
    });
    crate::tool::Tool::parse(&definition, limits).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_field_suggests_only_near_misses() {
        for (key, expected) in [
            ("enabeld", Some("enabled")),
            ("requireConfirmation", Some("require_confirmation")),
            ("destination", Some("destinations")),
            ("colour", None),
        ] {
            assert_eq!(closest_field(key, REFER_FIELDS), expected, "{key}");
        }
    }

    #[test]
    fn py_strip_matches_python_whitespace() {
        assert_eq!(py_strip("\u{1c} a \u{a0}\t"), "a");
        assert_eq!(py_strip("   "), "");
    }
}
