//! The `memory` toolkit: what the agent remembers about each caller, across calls. `remember`
//! stores a fact (`memory.create`), `recall` searches the caller's facts (`memory.search`);
//! with `load_profile` the newest facts are given to the model when a call starts.

use serde_json::json;

use super::{Toolkit, ToolkitAction};

/// Facts in the profile at call start when the config does not say.
pub const DEFAULT_PROFILE_OBSERVATIONS: u64 = 10;

pub(super) fn toolkit() -> Toolkit {
    Toolkit {
        name: "memory",
        description: "Remember facts about each caller across calls (who they are, preferences, pets, orders) and recall them; optionally give the model a returning caller's profile when the call starts. Memory is kept per tenant and per caller (call.from, else user.id).",
        config_schema: json!({"type": "object", "properties": {
            "load_profile": {"type": "boolean", "default": false, "title": "Load the caller's profile at call start",
                             "description": "Give the model the caller's newest facts when a call starts, so it knows a returning caller without a tool call"},
            "profile_max_observations": {"type": "integer", "minimum": 1, "maximum": 50,
                                         "default": DEFAULT_PROFILE_OBSERVATIONS,
                                         "title": "Facts in the profile"}
        }, "additionalProperties": false}),
        sensitive_config_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        requires_auth: false,
        auth_type: None,
        auth_config: None,
        actions: vec![
            ToolkitAction {
                name: "remember",
                description: "Remember one fact about the caller (or someone or something they mention) for future calls. One short fact per call of this function.",
                parameters: json!([
                    {"name": "content", "type": "string", "required": true,
                     "description": "The fact, in a short sentence (e.g. 'prefers morning appointments')"},
                    {"name": "entity", "type": "string", "default": "caller",
                     "description": "Who or what the fact is about: 'caller' for the caller, or a name (e.g. 'Max, the caller's dog')"}
                ]),
                returns: "{id, entity, remembered: true, created: true|false (false when this call already stored it)}",
                effect: "memory.create",
            },
            ToolkitAction {
                name: "recall",
                description: "Search what is remembered about the caller from earlier calls, best matches first.",
                parameters: json!([
                    {"name": "query", "type": "string", "required": true,
                     "description": "Words to look for (e.g. 'allergies', 'dog vaccination'); an empty query gives the newest facts"},
                    {"name": "limit", "type": "integer", "default": 5, "min_value": 1, "max_value": 20,
                     "description": "Maximum number of facts to return"}
                ]),
                returns: "{results: [{id, entity, content, call_id, created_at, rank}], count}",
                effect: "memory.search",
            },
        ],
    }
}
