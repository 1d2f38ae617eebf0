//! The demo tenant that `serve --demo` creates: `acme-corp` with seed 001's transfer
//! destinations, the `save_meal` tool and an agent using both, so a new server does something
//! useful at once; and `frontdesk`, an agent with the CalDAV calendar toolkit whose calendar URL
//! the user fills in (or connects Google Calendar instead).

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use switchboard_store::{AgentDef, AgentToolDef};

use crate::error::ApiResult;
use crate::state::AppState;

/// The demo tenant's id.
pub const TENANT: &str = "acme-corp";
/// The demo agent's name.
pub const AGENT: &str = "assistant";
/// The demo's calendar agent.
pub const FRONTDESK: &str = "frontdesk";
/// Where the demo's calendar agent looks for its calendar until the user sets theirs: a local
/// Radicale's collection (README, "Toolkits").
pub const CALDAV_URL: &str = "http://127.0.0.1:5232/alice/work/";

/// The calendar agent's tool entry: the CalDAV toolkit, every action.
pub fn frontdesk_tools() -> Vec<AgentToolDef> {
    vec![AgentToolDef {
        tool: "toolkit:caldav".to_owned(),
        enabled: true,
        config: json!({"url": CALDAV_URL, "default_event_duration": 30, "working_hours": {"start": "09:00", "end": "17:00"}}),
        sensitive_config: None,
        actions: None,
    }]
}

/// The demo's `save_meal`: the seed's tool, keeping the meal in the call's context. (The seed's
/// `api_call` goes to `api.example.com`, which no demo can reach.)
pub fn save_meal() -> Value {
    json!({
        "name": "save_meal",
        "description": "Log a meal the user consumed",
        "parameters": [
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true, "description": "What was eaten"}
        ],
        "actions": [
            {"type": "validate", "rules": [{"check": "params.dishes | length > 0", "message": "Ask which dishes."}]},
            {"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}
        ],
        "on_success": [{"type": "respond", "message": "I've logged your {{params.meal_type}}!"}],
        "on_failure": [{"type": "respond", "message": "Sorry, I couldn't log that meal."}]
    })
}

/// Seed 001's transfer configuration (with the sales URI the web page mangled restored).
pub fn features() -> Value {
    json!({"refer": {
        "enabled": true,
        "require_confirmation": true,
        "handoff_phrase": "Je vous transfère vers {{label}}",
        "destinations": [
            {"destination_id": "sales", "label": "Service Commercial", "description_for_model": "For sales inquiries and new customer questions",
             "target_uri": "sip:sales@example.com", "enabled": true, "priority": 10},
            {"destination_id": "support", "label": "Service Technique", "description_for_model": "For technical support and troubleshooting",
             "target_uri": "+14155552000", "enabled": true, "priority": 5}
        ]
    }})
}

/// Creates what is missing of the demo tenant (an existing one keeps its changes) and a fresh
/// API key for it, returned once.
pub async fn seed(state: &AppState) -> ApiResult<SecretString> {
    if state.store.get_tenant(TENANT).await?.is_none() {
        state
            .store
            .create_tenant(TENANT, "Acme Corp (demo)", &features())
            .await?;
    }
    if state.store.get_tool(TENANT, "save_meal").await?.is_none() {
        state
            .store
            .put_tool(TENANT, &save_meal(), &Default::default())
            .await?;
    }
    if state.store.get_agent(TENANT, AGENT).await?.is_none() {
        let agent = AgentDef {
            name: AGENT.to_owned(),
            instructions: "You are Acme's friendly phone assistant. Log the meals callers tell you about with save_meal. \
                           If they ask for sales or support, offer to transfer them."
                .to_owned(),
            model: Some("gpt-realtime".to_owned()),
            voice: Some("marin".to_owned()),
            live: None,
            guards: None,
            turn_budget_ms: None,
            filler: None,
            tools: vec![AgentToolDef { tool: "save_meal".to_owned(), enabled: true, config: json!({}), sensitive_config: None, actions: None }],
            handoffs: Vec::new(),
            default: true,
        };
        state.store.put_agent(TENANT, &agent).await?;
    }
    if state.store.get_agent(TENANT, FRONTDESK).await?.is_none() {
        let agent = AgentDef {
            name: FRONTDESK.to_owned(),
            instructions: "You are Acme's front desk. Check availability before booking; when a time is taken, offer the free times the calendar suggests. \
                           Confirm the caller's name and the time before you book."
                .to_owned(),
            model: Some("gpt-realtime".to_owned()),
            voice: Some("marin".to_owned()),
            live: None,
            guards: None,
            turn_budget_ms: None,
            filler: None,
            tools: frontdesk_tools(),
            handoffs: Vec::new(),
            default: false,
        };
        state.store.put_agent(TENANT, &agent).await?;
    }
    let (_, key) = state.store.create_api_key(Some(TENANT), "demo").await?;
    Ok(key)
}

/// The curl commands `serve --demo` prints: each works as printed.
pub fn instructions(base: &str, key: &SecretString) -> String {
    let key = key.expose_secret();
    let mut changed = save_meal();
    changed["on_success"] = json!([{"type": "respond", "message": "Noted: {{ params.dishes | join(\", \") }} for your {{params.meal_type}}."}]);
    let call = format!(
        "demo-{}",
        std::iter::repeat_with(fastrand::alphanumeric)
            .take(8)
            .collect::<String>()
    );
    format!(
        r#"Demo tenant `{TENANT}` is ready. Try:

  export SB={base} KEY={key}

  # the toolset the model sees (OpenAI Realtime format; also openai-chat, openai-responses, anthropic, mcp)
  curl -s "$SB/v1/agents/{AGENT}/toolset?format=openai-realtime" -H "Authorization: Bearer $KEY"

  # start a call, then make the tool calls a model would make
  curl -s -X POST $SB/v1/calls -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{{"call_id": "{call}", "user": {{"id": "u_42"}}}}'
  curl -s -X POST $SB/v1/calls/{call}/invocations -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{{"function_call_id": "fc_1", "name": "save_meal", "arguments": {{"meal_type": "lunch", "dishes": ["soup"]}}}}'
  curl -s -X POST $SB/v1/calls/{call}/invocations -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{{"function_call_id": "fc_2", "name": "request_transfer", "arguments": {{"destination_id": "support"}}}}'
  curl -s $SB/v1/calls/{call} -H "Authorization: Bearer $KEY"

  # change the tool (a new version): the next call uses it, live calls keep theirs
  curl -s -X PUT $SB/v1/tools/save_meal -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{changed}'

  # the `{FRONTDESK}` agent books appointments in a CalDAV calendar at {CALDAV_URL}
  # (a local Radicale, see the README); point it at yours, with its credentials:
  curl -s -X PUT $SB/v1/agents/{FRONTDESK} -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{{"instructions": "Book appointments.", "tools": [{{"tool": "toolkit:caldav", "config": {{"url": "https://cloud.example.com/remote.php/dav/calendars/alice/work/"}}, "sensitive_config": {{"username": "alice", "password": "…"}}}}]}}'
"#
    )
}
