//! The built-in toolkits (seed 003): metadata (`config_schema`, `requires_auth`, `auth_type`,
//! `auth_config`), actions with typed parameters, and each action as a declarative tool.
//!
//! A toolkit action becomes its own function for the model ("one function per action"): a tool
//! whose only action is the toolkit's effect (`calendar.list_events`, `email.send`, …) with the
//! model's arguments as its fields. The handler behind the effect reads the agent tool's
//! `config` and `sensitive_config`, which are checked here against the toolkit's schemas when
//! the agent is saved.

pub mod calendar;
pub mod email;
pub mod memory;

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::diag::Diagnostic;
use crate::limits::Limits;
use crate::tool::Tool;

/// How an agent's tool list names a toolkit: `toolkit:<name>`.
pub const PREFIX: &str = "toolkit:";

/// The toolkit a tool reference names, if it is `toolkit:<name>`.
pub fn split_ref(tool: &str) -> Option<&str> {
    tool.strip_prefix(PREFIX)
}

/// One built-in toolkit as the catalogue shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Toolkit {
    /// Referenced by agents as `toolkit:<name>`.
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the agent tool's `config` (shown to UIs, enforced at save).
    pub config_schema: Value,
    /// JSON Schema of the write-only `sensitive_config` (its shape only, never values).
    pub sensitive_config_schema: Value,
    pub requires_auth: bool,
    /// `basic` (credentials in `sensitive_config`) or `oauth2`.
    pub auth_type: Option<&'static str>,
    /// What the authentication needs (provider, scopes, endpoints); never a secret.
    pub auth_config: Option<Value>,
    pub actions: Vec<ToolkitAction>,
}

/// One action of a toolkit: a function the model can call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolkitAction {
    /// The function's name, as the model sees it.
    pub name: &'static str,
    pub description: &'static str,
    /// Seed 003's typed parameters.
    pub parameters: Value,
    /// What the action returns, for the model and the reader.
    pub returns: &'static str,
    /// The effect it performs (`calendar.create_event`, …).
    #[serde(skip)]
    pub effect: &'static str,
}

/// Every built-in toolkit, in a stable order.
pub fn catalogue() -> &'static [Toolkit] {
    static CATALOGUE: OnceLock<Vec<Toolkit>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        vec![
            caldav(),
            google_calendar(),
            email::toolkit(),
            memory::toolkit(),
        ]
    })
}

/// The toolkit called `name`.
pub fn find(name: &str) -> Option<&'static Toolkit> {
    catalogue().iter().find(|t| t.name == name)
}

fn calendar_actions() -> Vec<ToolkitAction> {
    vec![
        ToolkitAction {
            name: "list_events",
            description: "List the calendar's events within a time range, ordered by start.",
            parameters: json!([
                {"name": "time_min", "type": "datetime", "required": true,
                 "description": "Start of the range, RFC 3339 with an offset (e.g. 2025-12-30T09:00:00Z)"},
                {"name": "time_max", "type": "datetime",
                 "description": "End of the range, RFC 3339 (default: one day after time_min)"},
                {"name": "max_results", "type": "integer", "default": 10, "min_value": 1, "max_value": 100,
                 "description": "Maximum number of events to return"}
            ]),
            returns: "{events: [{id, title, start, end, description}]}",
            effect: "calendar.list_events",
        },
        ToolkitAction {
            name: "create_event",
            description: "Book an event in the calendar. Check availability first; booking the same slot again in this call does not double-book.",
            parameters: json!([
                {"name": "title", "type": "string", "required": true, "description": "Event title"},
                {"name": "start_time", "type": "datetime", "required": true,
                 "description": "Event start, RFC 3339 with an offset (e.g. 2025-12-30T14:00:00Z)"},
                {"name": "duration_minutes", "type": "integer", "min_value": 5, "max_value": 480,
                 "description": "Event duration in minutes (default: the calendar's slot length, else its default_event_duration)"},
                {"name": "attendees", "type": "array", "items": {"type": "string"},
                 "description": "Attendee email addresses"},
                {"name": "description", "type": "string", "description": "Event description"}
            ]),
            returns: "{id, title, start, end, created: true|false (false when it already existed)}",
            effect: "calendar.create_event",
        },
        ToolkitAction {
            name: "check_availability",
            description: "Check whether a time slot is free; when it is not, the answer lists the conflicts and the next free slots of the same length to offer instead. A time outside the calendar's booking rules (hours, closed days, notice, horizon) answers error outside_hours with the reason and free times to offer.",
            parameters: json!([
                {"name": "date", "type": "datetime", "required": true,
                 "description": "Start of the slot to check, RFC 3339 with an offset"},
                {"name": "duration_minutes", "type": "integer", "min_value": 15, "max_value": 240,
                 "description": "Length of the slot in minutes (default: the calendar's slot length, 30 unless configured)"}
            ]),
            returns: "{available, conflicts: [..], next_free_slots: [{start, end}]}; outside the rules: error outside_hours, details {available: false, alternatives: [{start, end}]}",
            effect: "calendar.check_availability",
        },
        ToolkitAction {
            name: "find_bookings",
            description: "Find the caller's own upcoming bookings (made from this caller's phone number). An email or name given narrows them; it never finds someone else's.",
            parameters: json!([
                {"name": "email", "type": "string", "description": "An attendee email address the caller gave, to narrow the bookings"},
                {"name": "name", "type": "string", "description": "A name in the booking's title, to narrow the bookings"}
            ]),
            returns: "{bookings: [{id, title, start, end}]}",
            effect: "calendar.find_bookings",
        },
        ToolkitAction {
            name: "cancel_event",
            description: "Cancel one of the caller's own bookings, by the id find_bookings gave. A booking starting too soon under the calendar's rules answers error too_late_to_change and stays.",
            parameters: json!([
                {"name": "event_id", "type": "string", "required": true, "description": "The booking's id from find_bookings"}
            ]),
            returns: "{id, cancelled: true}",
            effect: "calendar.cancel_event",
        },
        ToolkitAction {
            name: "reschedule_event",
            description: "Move one of the caller's own bookings to a new time. The new time is secured before the old one is given up; if it cannot be had, the booking stays where it was and the answer lists free times to offer. A booking starting too soon under the calendar's rules answers error too_late_to_change and stays.",
            parameters: json!([
                {"name": "event_id", "type": "string", "required": true, "description": "The booking's id from find_bookings"},
                {"name": "new_start_time", "type": "datetime", "required": true,
                 "description": "The new start, RFC 3339 with an offset"},
                {"name": "duration_minutes", "type": "integer", "min_value": 5, "max_value": 480,
                 "description": "New length in minutes (default: the booking's own)"}
            ]),
            returns: "{id, title, start, end, moved: true|false (false when it was there already)}",
            effect: "calendar.reschedule_event",
        },
        ToolkitAction {
            name: "find_free_slots",
            description: "List free slots in a window: a day (optionally a part of it), or a range; default the next seven days.",
            parameters: json!([
                {"name": "day", "type": "string", "description": "A day, YYYY-MM-DD, in the calendar's time zone"},
                {"name": "part_of_day", "type": "string", "enum": ["morning", "afternoon", "evening"],
                 "description": "Part of the day: morning (before 12:00), afternoon (12:00-17:00), evening (from 17:00)"},
                {"name": "time_min", "type": "datetime", "description": "Start of a range, RFC 3339"},
                {"name": "time_max", "type": "datetime", "description": "End of the range, RFC 3339 (at most 14 days after its start)"},
                {"name": "duration_minutes", "type": "integer", "min_value": 15, "max_value": 240,
                 "description": "Length of the slots in minutes (default: the calendar's slot length, 30 unless configured)"}
            ]),
            returns: "{slots: [{start, end}], time_zone}",
            effect: "calendar.find_free_slots",
        },
    ]
}

fn calendar_common_properties() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "default_event_duration".into(),
        json!({"type": "integer", "title": "Default event duration (minutes)", "default": 30, "minimum": 5, "maximum": 480}),
    );
    m.insert(
        "working_hours".into(),
        json!({"type": "object", "title": "Hours in which free slots are offered, in the calendar's time zone",
               "properties": {
                   "start": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "default": "09:00"},
                   "end": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "default": "17:00"}
               },
               "additionalProperties": false}),
    );
    m.insert("rules".into(), calendar::rules_schema());
    m.insert(
        "time_zone".into(),
        json!({"type": "string", "title": "Time zone (IANA name)", "minLength": 1, "maxLength": 64,
               "description": "The zone working hours and free slots are read in, daylight saving included (e.g. Europe/Berlin, America/New_York); also the zone of event times a CalDAV server sends without one. Default: Google Calendar's own zone for the calendar; for CalDAV, the offset of the time asked about"}),
    );
    m
}

/// A problem with a calendar config's `time_zone`: it must name a zone of the IANA database.
fn check_time_zone(ptr: &str, config: &Value, out: &mut Vec<Diagnostic>) {
    let Some(name) = config.get("time_zone").and_then(Value::as_str) else {
        return;
    };
    if name.parse::<chrono_tz::Tz>().is_ok() {
        return;
    }
    let nearest = chrono_tz::TZ_VARIANTS
        .iter()
        .map(|z| z.name())
        .max_by(|a, b| strsim::jaro_winkler(name, a).total_cmp(&strsim::jaro_winkler(name, b)))
        .unwrap_or("Europe/Berlin");
    out.push(Diagnostic {
        pointer: format!("{ptr}/config/time_zone"),
        message: format!("`{}` is not a time zone of the IANA database", clip(name)),
        fix: Some(format!(
            "write an IANA zone name such as `{nearest}` (Area/City, case as written)"
        )),
    });
}

/// Problems with a calendar config's booking rules (`rules`, `working_hours`), in the rules'
/// own words: they replace the schema's findings under `rules`, and add the ones a schema
/// cannot see (a range that ends before it starts, ranges that overlap, a date that does not
/// exist, a date listed twice).
fn check_rules(ptr: &str, config: &Value, out: &mut Vec<Diagnostic>) {
    let base = format!("{ptr}/config");
    let Err(found) = calendar::BookingRules::from_config(config, &base) else {
        return;
    };
    let rules = format!("{base}/rules");
    let under = |p: &str, root: &str| p == root || p.starts_with(&format!("{root}/"));
    out.retain(|d| !under(&d.pointer, &rules));
    for d in found {
        if !out
            .iter()
            .any(|o| o.pointer != base && under(&d.pointer, &o.pointer))
        {
            out.push(d);
        }
    }
}

fn caldav() -> Toolkit {
    let mut props = calendar_common_properties();
    props.insert(
        "url".into(),
        json!({"type": "string", "title": "Calendar collection URL", "format": "uri", "pattern": "^https?://",
               "description": "The CalDAV calendar collection (e.g. https://cloud.example.com/remote.php/dav/calendars/alice/work/)"}),
    );
    Toolkit {
        name: "caldav",
        description: "A self-hosted calendar over CalDAV (Nextcloud, Radicale, iCloud-style servers): list events, check availability, book appointments.",
        config_schema: json!({"type": "object", "properties": props, "required": ["url"], "additionalProperties": false}),
        sensitive_config_schema: json!({"type": "object", "properties": {
            "username": {"type": "string", "minLength": 1, "maxLength": 256},
            "password": {"type": "string", "maxLength": 1024}
        }, "additionalProperties": false}),
        requires_auth: true,
        auth_type: Some("basic"),
        auth_config: Some(json!({"fields": ["username", "password"], "in": "sensitive_config"})),
        actions: calendar_actions(),
    }
}

fn google_calendar() -> Toolkit {
    let mut props = calendar_common_properties();
    props.insert(
        "calendar_id".into(),
        json!({"type": "string", "title": "Calendar ID", "default": "primary", "minLength": 1, "maxLength": 256,
               "description": "The ID of the calendar to use."}),
    );
    Toolkit {
        name: "google_calendar",
        description: "Manage Google Calendar events, check availability, and schedule meetings.",
        config_schema: json!({"type": "object", "properties": props, "required": ["calendar_id"], "additionalProperties": false}),
        sensitive_config_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        requires_auth: true,
        auth_type: Some("oauth2"),
        auth_config: Some(json!({
            "provider": "google",
            "scopes": [
                "https://www.googleapis.com/auth/calendar.events",
                "https://www.googleapis.com/auth/calendar.readonly"
            ],
            "auth_url": "https://accounts.google.com/o/oauth2/v2/auth",
            "token_url": "https://oauth2.googleapis.com/token"
        })),
        actions: calendar_actions(),
    }
}

impl Toolkit {
    /// The action called `name`.
    pub fn action(&self, name: &str) -> Option<&ToolkitAction> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// The actions an agent enabled: all of them when `selected` is `None`.
    pub fn selected<'a>(&'a self, selected: Option<&'a [String]>) -> Vec<&'a ToolkitAction> {
        match selected {
            None => self.actions.iter().collect(),
            Some(names) => self
                .actions
                .iter()
                .filter(|a| names.iter().any(|n| n == a.name))
                .collect(),
        }
    }

    /// Every problem of an agent's use of this toolkit, each at its place under `ptr` (e.g.
    /// `/tools/2`): the action names, `config` against `config_schema`, and `sensitive_config`
    /// (when given) against its schema, which names fields, never their values.
    pub fn check(
        &self,
        ptr: &str,
        actions: Option<&[String]>,
        config: &Value,
        sensitive_config: Option<&Value>,
    ) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        if let Some(names) = actions {
            if names.is_empty() {
                out.push(Diagnostic {
                    pointer: format!("{ptr}/actions"),
                    message: format!("toolkit `{}` is enabled with no action", self.name),
                    fix: Some(
                        "list at least one action, or leave `actions` out to enable them all"
                            .into(),
                    ),
                });
            }
            for (i, n) in names.iter().enumerate() {
                if self.action(n).is_none() {
                    let all: Vec<&str> = self.actions.iter().map(|a| a.name).collect();
                    out.push(Diagnostic {
                        pointer: format!("{ptr}/actions/{i}"),
                        message: format!("toolkit `{}` has no action `{}`", self.name, clip(n)),
                        fix: Some(format!("use one of: {}", all.join(", "))),
                    });
                } else if names[..i].contains(n) {
                    out.push(Diagnostic {
                        pointer: format!("{ptr}/actions/{i}"),
                        message: format!("action `{n}` is listed twice"),
                        fix: Some("list each action once".into()),
                    });
                }
            }
        }
        schema_problems(
            &self.config_schema,
            config,
            &format!("{ptr}/config"),
            true,
            &mut out,
        );
        match self.name {
            "email" => email::check_templates(&format!("{ptr}/config"), config, &mut out),
            "caldav" | "google_calendar" => {
                check_time_zone(ptr, config, &mut out);
                check_rules(ptr, config, &mut out);
            }
            _ => {}
        }
        if let Some(s) = sensitive_config.filter(|s| !s.is_null()) {
            schema_problems(
                &self.sensitive_config_schema,
                s,
                &format!("{ptr}/sensitive_config"),
                false,
                &mut out,
            );
        }
        out
    }

    /// The declarative tool behind one action: the model's arguments become the effect's fields
    /// and its result is what the model reads.
    pub fn tool(&self, action: &ToolkitAction, limits: &Limits) -> Result<Tool, String> {
        let mut fields = Map::new();
        fields.insert("type".into(), json!(action.effect));
        for p in action.parameters.as_array().into_iter().flatten() {
            if let Some(name) = p.get("name").and_then(Value::as_str) {
                fields.insert(name.to_owned(), json!(format!("{{{{ params.{name} }}}}")));
            }
        }
        fields.insert("into".into(), json!("result"));
        let definition = json!({
            "name": action.name,
            "description": action.description,
            "parameters": action.parameters,
            "actions": [fields],
        });
        Tool::parse(&definition, limits).map_err(|d| {
            format!(
                "toolkit `{}`, action `{}` does not parse: {d}",
                self.name, action.name
            )
        })
    }
}

/// Validates `value` against `schema`, one problem per failing place. `show_values`: whether a
/// message may quote the value (never for sensitive config).
fn schema_problems(
    schema: &Value,
    value: &Value,
    ptr: &str,
    show_values: bool,
    out: &mut Vec<Diagnostic>,
) {
    let validator = match jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
    {
        Ok(v) => v,
        Err(e) => {
            out.push(Diagnostic {
                pointer: ptr.to_owned(),
                message: format!("the toolkit's schema does not compile: {e}"),
                fix: None,
            });
            return;
        }
    };
    for e in validator.iter_errors(value) {
        let message = if show_values {
            e.to_string()
        } else {
            // The library's message quotes the value; say only what kind of problem it is.
            sensitive_message(&e)
        };
        out.push(Diagnostic {
            pointer: format!("{ptr}{}", e.instance_path()),
            message: clip(&message),
            fix: Some("see the toolkit's schema in GET /v1/toolkits".into()),
        });
    }
}

/// At most 200 characters of a user's text in a message.
fn clip(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

fn sensitive_message(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    match e.kind() {
        K::AdditionalProperties { unexpected } => {
            format!("unknown field(s): {}", unexpected.join(", "))
        }
        K::Type { .. } => "has the wrong type".into(),
        K::MinLength { .. } => "is too short".into(),
        K::MaxLength { .. } => "is too long".into(),
        K::Required { property } => format!("{property} is required"),
        _ => "is not valid".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_of_every_toolkit_is_a_tool() {
        let limits = Limits::default();
        for kit in catalogue() {
            for a in &kit.actions {
                let tool = kit.tool(a, &limits);
                assert!(tool.is_ok(), "{}", tool.err().unwrap_or_default());
            }
        }
    }

    #[test]
    fn config_problems_name_their_place() {
        let kit = find("caldav").unwrap();
        let got = kit.check(
            "/tools/1",
            Some(&["list_events".into(), "book".into()]),
            &json!({"default_event_duration": "x", "extra": 1}),
            Some(&json!({"username": 5, "password": "hunter2-secret"})),
        );
        let places: Vec<&str> = got.iter().map(|d| d.pointer.as_str()).collect();
        assert!(places.contains(&"/tools/1/actions/1"), "{got:?}");
        assert!(places.contains(&"/tools/1/config"), "{got:?}");
        assert!(
            places.contains(&"/tools/1/config/default_event_duration"),
            "{got:?}"
        );
        assert!(
            places.contains(&"/tools/1/sensitive_config/username"),
            "{got:?}"
        );
        let text = format!("{got:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn a_calendar_time_zone_must_be_an_iana_name() {
        for kit in ["caldav", "google_calendar"] {
            let kit = find(kit).unwrap();
            let config = |zone: &str| json!({"url": "https://cal.example.com/a/", "calendar_id": "primary", "time_zone": zone});
            let check = |zone: &str| {
                kit.check("/tools/0", None, &config(zone), None)
                    .into_iter()
                    .filter(|d| d.pointer.ends_with("/time_zone"))
                    .collect::<Vec<_>>()
            };
            assert!(check("America/New_York").is_empty());
            let bad = check("Europe/Berln");
            assert_eq!(bad.len(), 1, "{bad:?}");
            assert_eq!(bad[0].pointer, "/tools/0/config/time_zone");
            assert!(
                bad[0]
                    .fix
                    .as_deref()
                    .unwrap_or_default()
                    .contains("`Europe/Berlin`"),
                "{bad:?}"
            );
        }
    }
}
