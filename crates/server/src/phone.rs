//! A tenant's phone settings (`features.realtime`): which agent answers each number, and which
//! OpenAI API — Realtime or GPT-Live — answers it; plus the endpoint that sets one number.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_realtime::Api;

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path};
use crate::state::AppState;

/// The Realtime model used when neither the agent nor the tenant names one.
pub const DEFAULT_MODEL: &str = "gpt-realtime";
/// The GPT-Live model used when neither the agent nor the tenant names one.
pub const DEFAULT_LIVE_MODEL: &str = "gpt-live-1";

/// `features.realtime`: how a tenant's phone calls are answered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealtimeFeature {
    /// Called number (E.164, as in the SIP `To` header) → the agent that answers it, or
    /// `{"agent": …, "api": "realtime" | "live"}`. Other numbers go to the tenant's default
    /// agent.
    #[serde(default)]
    pub phone_numbers: BTreeMap<String, NumberRoute>,
    /// `realtime` (default) or `live`: the API that answers numbers that do not say.
    #[serde(default)]
    pub api: Option<String>,
    /// The Realtime model, unless the agent names one.
    #[serde(default)]
    pub model: Option<String>,
    /// The voice, unless the agent names one.
    #[serde(default)]
    pub voice: Option<String>,
    /// `auto` (default), `required`, `none`.
    #[serde(default)]
    pub tool_choice: Option<String>,
    /// Agents whose tools OpenAI gets as one `type: "mcp"` tool (this deployment's MCP endpoint
    /// for the agent, which OpenAI calls itself) instead of function tools. Realtime only.
    #[serde(default)]
    pub mcp_agents: Vec<String>,
    /// This deployment's public base URL (`https://switchboard.example.com`), which OpenAI
    /// reaches the MCP endpoint at; needed with `mcp_agents`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// GPT-Live: the model, unless the agent's `live.model` names one.
    #[serde(default)]
    pub live_model: Option<String>,
    /// GPT-Live: the backend model, unless the agent's `live.backend_model` names one.
    #[serde(default)]
    pub backend_model: Option<String>,
    /// GPT-Live: whether the backend may call several tools at once (default true).
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
}

/// What answers one number: an agent's name, or the agent (default agent when left out) and
/// the API.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum NumberRoute {
    Agent(String),
    Route {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api: Option<String>,
    },
}

impl NumberRoute {
    pub fn agent(&self) -> Option<&str> {
        match self {
            NumberRoute::Agent(a) => Some(a),
            NumberRoute::Route { agent, .. } => agent.as_deref(),
        }
    }

    fn api(&self) -> Option<&str> {
        match self {
            NumberRoute::Agent(_) => None,
            NumberRoute::Route { api, .. } => api.as_deref(),
        }
    }
}

const KNOWN_FIELDS: &str = "phone_numbers, api, model, voice, tool_choice, mcp_agents, public_url, live_model, backend_model, parallel_tool_calls";

/// `realtime` or `live`, or an error naming `place`.
fn parse_api(place: &str, value: &str) -> Result<Api, String> {
    match value {
        "realtime" => Ok(Api::Realtime),
        "live" => Ok(Api::Live),
        other => Err(format!(
            "{place}: `{other}` is not an API; write `realtime` (OpenAI Realtime) or `live` (GPT-Live)"
        )),
    }
}

impl RealtimeFeature {
    /// Reads and checks `features.realtime`; each problem names its place and its fix.
    pub fn parse(value: &Value) -> Result<RealtimeFeature, String> {
        let f = RealtimeFeature::deserialize(value)
            .map_err(|e| format!("features.realtime: {e}; known fields: {KNOWN_FIELDS}"))?;
        for (number, route) in &f.phone_numbers {
            if number.is_empty() || number.len() > 64 {
                return Err(format!(
                    "features.realtime.phone_numbers: `{number}` is not a number; write it as in the SIP To header, e.g. +18005551212"
                ));
            }
            if route.agent().is_some_and(str::is_empty) {
                return Err(format!(
                    "features.realtime.phone_numbers.{number}: name the agent that answers it"
                ));
            }
            if let Some(api) = route.api() {
                parse_api(
                    &format!("features.realtime.phone_numbers.{number}.api"),
                    api,
                )?;
            }
        }
        if let Some(api) = &f.api {
            parse_api("features.realtime.api", api)?;
        }
        for (field, v) in [
            ("live_model", &f.live_model),
            ("backend_model", &f.backend_model),
            ("model", &f.model),
            ("voice", &f.voice),
        ] {
            if v.as_ref()
                .is_some_and(|m| m.trim().is_empty() || m.len() > 128)
            {
                return Err(format!(
                    "features.realtime.{field}: give a name of 1 to 128 characters, or leave it out"
                ));
            }
        }
        if !f.mcp_agents.is_empty() {
            match f.public_url.as_deref() {
                Some(u) if u.starts_with("https://") || u.starts_with("http://") => {}
                _ => {
                    return Err("features.realtime.public_url: give this deployment's public base URL (https://…) so OpenAI can reach the MCP endpoint of `mcp_agents`".into());
                }
            }
        }
        if let Some(c) = &f.tool_choice
            && !matches!(c.as_str(), "auto" | "required" | "none")
        {
            return Err(format!(
                "features.realtime.tool_choice: `{c}` is not one of auto, required, none"
            ));
        }
        Ok(f)
    }

    /// `features.realtime` of a tenant's features (defaults when unset).
    pub fn of(features: &Value) -> Result<RealtimeFeature, String> {
        match features.get("realtime") {
            None | Some(Value::Null) => Ok(RealtimeFeature::default()),
            Some(v) => RealtimeFeature::parse(v),
        }
    }

    /// The agent named for the number called (`None`: the tenant's default agent).
    pub fn agent_for(&self, to: Option<&str>) -> Option<String> {
        to.and_then(|to| self.phone_numbers.get(to))
            .and_then(NumberRoute::agent)
            .map(str::to_owned)
    }

    /// The API that answers the number called: the number's own, else the tenant's, else
    /// Realtime. Values were checked by [`RealtimeFeature::parse`].
    pub fn api_for(&self, to: Option<&str>) -> Api {
        let number = to
            .and_then(|to| self.phone_numbers.get(to))
            .and_then(NumberRoute::api);
        match number.or(self.api.as_deref()) {
            Some("live") => Api::Live,
            _ => Api::Realtime,
        }
    }
}

/// The body of `PUT /v1/phone_numbers/{number}`.
// Read from a JSON object only (serde would also take a struct from an array), each field a
// string or null, and no other field: see the `TryFrom` below.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(try_from = "serde_json::Map<String, Value>", deny_unknown_fields)]
pub struct NumberSetting {
    /// The agent that answers the number; left out: the tenant's default agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// `realtime` or `live`; left out: the tenant's `features.realtime.api`.
    #[serde(default)]
    pub api: Option<String>,
}

impl TryFrom<serde_json::Map<String, Value>> for NumberSetting {
    type Error = String;

    fn try_from(map: serde_json::Map<String, Value>) -> Result<Self, String> {
        let mut setting = NumberSetting {
            agent: None,
            api: None,
        };
        for (name, value) in map {
            let text = match value {
                Value::Null => None,
                Value::String(s) => Some(s),
                _ => return Err(format!("`{name}` must be a string")),
            };
            match name.as_str() {
                "agent" => setting.agent = text,
                "api" => setting.api = text,
                _ => {
                    return Err(format!("unknown field `{name}`, expected `agent` or `api`"));
                }
            }
        }
        Ok(setting)
    }
}

#[utoipa::path(put, path = "/v1/phone_numbers/{number}", tag = "settings", security(("bearer" = [])),
    description = "Sets which agent and which OpenAI API (`realtime` or `live`) answer one called number (E.164, as in the SIP To header), keeping every other phone setting. Takes effect for the next call to the number.",
    request_body = NumberSetting,
    responses((status = 200, body = Object, description = "The tenant's `features.realtime` after the change"), (status = 400, body = ErrorBody)))]
pub async fn put_number(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(number): Path<String>,
    Body(body): Body<NumberSetting>,
) -> ApiResult<Json<Value>> {
    if let Some(api) = &body.api {
        parse_api("api", api).map_err(ApiError::bad_request)?;
    }
    let t = state
        .store
        .get_tenant(&tenant.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tenant `{}`", tenant.id)))?;
    let mut features = match t.features {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let mut phone = match features.remove("realtime") {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let mut numbers = match phone.remove("phone_numbers") {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let route = match (&body.agent, &body.api) {
        (Some(agent), None) => json!(agent),
        _ => json!(NumberRoute::Route {
            agent: body.agent.clone(),
            api: body.api.clone(),
        }),
    };
    numbers.insert(number, route);
    phone.insert("phone_numbers".into(), Value::Object(numbers));
    let phone = Value::Object(phone);
    RealtimeFeature::parse(&phone).map_err(ApiError::bad_request)?;
    features.insert("realtime".into(), phone.clone());
    state
        .store
        .set_features(&tenant.id, &Value::Object(features))
        .await?;
    Ok(Json(phone))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_may_name_its_api_and_the_tenant_sets_the_rest() {
        let f = RealtimeFeature::parse(&json!({
            "api": "live",
            "phone_numbers": {"+1800": "front", "+1900": {"agent": "back", "api": "realtime"},
                              "+1700": {"api": "realtime"}}
        }))
        .unwrap();
        assert_eq!(f.api_for(Some("+1800")), Api::Live);
        assert_eq!(f.api_for(Some("+1900")), Api::Realtime);
        assert_eq!(f.api_for(Some("+1700")), Api::Realtime);
        assert_eq!(f.api_for(None), Api::Live);
        assert_eq!(f.agent_for(Some("+1900")).as_deref(), Some("back"));
        assert_eq!(f.agent_for(Some("+1700")), None);
        assert_eq!(
            RealtimeFeature::default().api_for(Some("+1800")),
            Api::Realtime
        );
    }

    #[test]
    fn a_wrong_api_names_its_place_and_the_choices() {
        let e = RealtimeFeature::parse(&json!({"phone_numbers": {"+1800": {"api": "gpt"}}}))
            .unwrap_err();
        assert!(
            e.contains("phone_numbers.+1800.api") && e.contains("`live`"),
            "{e}"
        );
        let e = RealtimeFeature::parse(&json!({"api": "sip"})).unwrap_err();
        assert!(e.contains("features.realtime.api"), "{e}");
        let e =
            RealtimeFeature::parse(&json!({"phone_numbers": {"+1800": {"agent": "a", "x": 1}}}))
                .unwrap_err();
        assert!(e.contains("features.realtime"), "{e}");
    }
}
