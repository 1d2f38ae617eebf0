//! Toolkit actions: `email.send`, `calendar.*` and `memory.*`. Each renders its fields into one
//! effect request for the toolkit's handler (SMTP, a calendar API, the memory store), which
//! gets the agent tool's config and secrets; the result lands in `response` and, with `into`,
//! at a write path. One table describes them all, since they differ only in their fields.

use serde_json::Map;

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::effect::{EffectOutcome, EffectRequest, ToolkitRequest};
use crate::reader::Obj;
use crate::template::ValueTemplate;

/// One toolkit action type: its fields and whether it changes the world.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) action: &'static str,
    /// Every accepted field, `type` and `into` included.
    pub(crate) fields: &'static [&'static str],
    pub(crate) required: &'static [&'static str],
    pub(crate) write: bool,
}

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        action: "email.send",
        fields: &[
            "type",
            "into",
            "to",
            "cc",
            "subject",
            "body",
            "reply_to",
            "template",
            "variables",
        ],
        // `subject` and `body` too, unless a `template` of the agent's email toolkit writes them.
        required: &["to"],
        write: true,
    },
    Spec {
        action: "calendar.list_events",
        fields: &["type", "into", "time_min", "time_max", "max_results"],
        required: &["time_min"],
        write: false,
    },
    Spec {
        action: "calendar.create_event",
        fields: &[
            "type",
            "into",
            "title",
            "start_time",
            "duration_minutes",
            "attendees",
            "description",
        ],
        required: &["title", "start_time"],
        write: true,
    },
    Spec {
        action: "calendar.check_availability",
        fields: &["type", "into", "date", "duration_minutes"],
        required: &["date"],
        write: false,
    },
    Spec {
        action: "calendar.find_bookings",
        fields: &["type", "into", "email", "name"],
        required: &[],
        write: false,
    },
    Spec {
        action: "calendar.cancel_event",
        fields: &["type", "into", "event_id"],
        required: &["event_id"],
        write: true,
    },
    Spec {
        action: "calendar.reschedule_event",
        fields: &[
            "type",
            "into",
            "event_id",
            "new_start_time",
            "duration_minutes",
        ],
        required: &["event_id", "new_start_time"],
        write: true,
    },
    Spec {
        action: "calendar.find_free_slots",
        fields: &[
            "type",
            "into",
            "day",
            "part_of_day",
            "time_min",
            "time_max",
            "duration_minutes",
        ],
        required: &[],
        write: false,
    },
    Spec {
        action: "memory.search",
        fields: &["type", "into", "query", "limit"],
        required: &["query"],
        write: false,
    },
    Spec {
        action: "memory.create",
        fields: &["type", "into", "entity", "content", "relations"],
        required: &["entity", "content"],
        write: true,
    },
    Spec {
        action: "memory.traverse",
        fields: &["type", "into", "from", "relation", "depth"],
        required: &["from", "relation"],
        write: false,
    },
];

/// The spec of a toolkit action type.
pub(crate) fn spec(action: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.action == action)
}

/// Whether a toolkit action (by name) changes the world.
pub fn is_write(action: &str) -> bool {
    spec(action).is_some_and(|s| s.write)
}

#[derive(Debug)]
pub(crate) struct ToolkitCall {
    pub(crate) spec: &'static Spec,
    fields: Vec<(&'static str, ValueTemplate)>,
    into: Option<WritePath>,
}

pub(crate) fn parse(
    cx: &mut ParseCx<'_>,
    obj: &Obj<'_>,
    spec: &'static Spec,
) -> Option<ToolkitCall> {
    let mut missing = false;
    for key in spec.required {
        if obj.req(key, cx.sink).is_none() {
            missing = true;
        }
    }
    if spec.action == "email.send" && obj.get("template").is_none() {
        for key in ["subject", "body"] {
            if obj.req(key, cx.sink).is_none() {
                missing = true;
            }
        }
    }
    let fields = spec
        .fields
        .iter()
        .filter(|f| !matches!(**f, "type" | "into"))
        .filter_map(|f| obj.get(f).map(|v| (*f, cx.value_template(v, &obj.at(f)))))
        .collect();
    let into = obj
        .str("into", cx.sink)
        .and_then(|p| cx.write_path(p, &obj.at("into")));
    (!missing).then_some(ToolkitCall { spec, fields, into })
}

impl ToolkitCall {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        let mut fields = Map::new();
        for (name, t) in &self.fields {
            match x.eval(t) {
                Ok(v) => {
                    fields.insert((*name).to_owned(), v);
                }
                Err(e) => return Flow::Fail(e),
            }
        }
        Flow::Suspend(EffectRequest::Toolkit(ToolkitRequest {
            action: self.spec.action.to_owned(),
            fields,
            idempotency_key: x.idempotency_key(),
        }))
    }

    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        match outcome {
            EffectOutcome::Done { value } => x.keep_result(value, self.into.as_ref()),
            EffectOutcome::Failed(e) => Flow::Fail(e),
            EffectOutcome::Http(_) => Flow::Fail(x.internal(format!(
                "{} was resumed with an HTTP outcome",
                self.spec.action
            ))),
        }
    }
}
