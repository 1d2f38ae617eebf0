//! Agents: instructions, the tools they may call (each with `config` and a sealed
//! `sensitive_config`), and the agents they may hand off to.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use switchboard_core::guards::Guards;

use crate::crypto::{open_with, seal_with};
use crate::error::is_fk_violation;
use crate::page::{encode_cursor, paginate};
use crate::{
    Page, Paged, Store, StoreError, WritePool, check_name, now, parse_json, to_json, with_pool,
};

/// An agent as written by its owner (the body of a PUT).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AgentDef {
    /// Matches `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// The system instructions of the model while this agent is active.
    #[serde(default)]
    pub instructions: String,
    /// The model, if the agent needs a particular one.
    #[serde(default)]
    pub model: Option<String>,
    /// The voice, if the agent speaks with a particular one.
    #[serde(default)]
    pub voice: Option<String>,
    /// What the agent needs when GPT-Live answers its calls (Realtime calls ignore it).
    #[serde(default)]
    pub live: Option<LiveSettings>,
    /// Its runaway guards, where it overrides the defaults (checked by `Guards::parse`).
    #[serde(default)]
    pub guards: Option<Guards>,
    /// The longest silence its caller should hear while a tool runs, in milliseconds, where
    /// it overrides the default (checked when saved).
    #[serde(default)]
    pub turn_budget_ms: Option<u32>,
    /// What its caller hears while a slow tool without `messages.delayed` runs (checked when
    /// saved); none: silence.
    #[serde(default)]
    pub filler: Option<String>,
    /// The tools it may call, in the order they are offered to the model.
    #[serde(default)]
    pub tools: Vec<AgentToolDef>,
    /// The agents it may hand the call to.
    #[serde(default)]
    pub handoffs: Vec<String>,
    /// Whether calls start with this agent when none is named (one per tenant).
    #[serde(default)]
    pub default: bool,
}

/// An agent's settings for GPT-Live, where a voice model talks and a backend model reasons and
/// calls the tools. The agent's `instructions` are the backend's; `model` and `voice` stay
/// the Realtime ones, so one agent serves both APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct LiveSettings {
    /// The GPT-Live model (`gpt-live-1`); else the tenant's, else the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The voice model's instructions: voice, manner, when to delegate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_instructions: Option<String>,
    /// The backend (Responses) model that calls the tools; else the tenant's, else the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_model: Option<String>,
    /// The GPT-Live voice, if not the agent's `voice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
}

/// Read from a JSON object only (serde would also take a struct from an array), each field a
/// string or null, and no other field.
impl TryFrom<serde_json::Map<String, serde_json::Value>> for LiveSettings {
    type Error = String;

    fn try_from(map: serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let mut live = LiveSettings::default();
        for (name, value) in map {
            let text = match value {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s),
                _ => return Err(format!("`{name}` must be a string")),
            };
            match name.as_str() {
                "model" => live.model = text,
                "voice_instructions" => live.voice_instructions = text,
                "backend_model" => live.backend_model = text,
                "voice" => live.voice = text,
                _ => {
                    return Err(format!(
                        "unknown field `{name}`, expected one of `model`, `voice_instructions`, `backend_model`, `voice`"
                    ));
                }
            }
        }
        Ok(live)
    }
}

/// The longest model name or voice kept in [`LiveSettings`].
const MAX_LIVE_NAME: usize = 128;
/// The longest voice instructions kept (OpenAI's limit is 16,384 tokens).
const MAX_VOICE_INSTRUCTIONS: usize = 64 * 1024;

fn check_live(live: &LiveSettings) -> Result<(), StoreError> {
    for (field, value) in [
        ("live.model", &live.model),
        ("live.backend_model", &live.backend_model),
        ("live.voice", &live.voice),
    ] {
        if let Some(v) = value
            && (v.trim().is_empty() || v.len() > MAX_LIVE_NAME)
        {
            return Err(StoreError::Invalid(format!(
                "agent `{field}` must be 1 to {MAX_LIVE_NAME} characters, or left out"
            )));
        }
    }
    if live
        .voice_instructions
        .as_ref()
        .is_some_and(|v| v.len() > MAX_VOICE_INSTRUCTIONS)
    {
        return Err(StoreError::Invalid(format!(
            "agent `live.voice_instructions` is over {MAX_VOICE_INSTRUCTIONS} bytes; shorten it (GPT-Live takes at most 16,384 tokens)"
        )));
    }
    Ok(())
}

/// One tool of an agent as written. `sensitive_config`: absent (`None`) keeps the stored
/// value, `null` clears it, an object replaces it.
#[derive(Clone, PartialEq, Deserialize)]
pub struct AgentToolDef {
    /// The tool's name (a stored tool or one a toolkit provides).
    pub tool: String,
    /// Whether the model is offered it (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Settings templates read as `config.*` (default `{}`).
    #[serde(default = "empty_object")]
    pub config: Value,
    /// Credentials read as `secrets.*`; sealed at rest and never shown again.
    #[serde(default, deserialize_with = "present")]
    pub sensitive_config: Option<Value>,
    /// For a toolkit (`toolkit:<name>`): the actions enabled; `None` enables them all.
    #[serde(default)]
    pub actions: Option<Vec<String>>,
}

impl fmt::Debug for AgentToolDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentToolDef")
            .field("tool", &self.tool)
            .field("enabled", &self.enabled)
            .field("config", &self.config)
            .field("actions", &self.actions)
            .field(
                "sensitive_config",
                &self
                    .sensitive_config
                    .as_ref()
                    .map(|v| if v.is_null() { "null" } else { "[redacted]" }),
            )
            .finish()
    }
}

fn yes() -> bool {
    true
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A field that is present, even as `null`, becomes `Some` (absent stays `None` by `default`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// An agent as stored: its tools say whether sensitive config is set, never what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// The agent's name.
    pub name: String,
    /// The system instructions.
    pub instructions: String,
    /// The model, if set.
    pub model: Option<String>,
    /// The voice, if set.
    pub voice: Option<String>,
    /// Its GPT-Live settings, if set.
    pub live: Option<LiveSettings>,
    /// Its runaway guards, if it overrides the defaults.
    pub guards: Option<Guards>,
    /// Its turn budget in milliseconds, if it overrides the default.
    pub turn_budget_ms: Option<u32>,
    /// Its filler for slow tools without `messages.delayed`, if set.
    pub filler: Option<String>,
    /// Its tools, in order.
    pub tools: Vec<AgentTool>,
    /// The agents it may hand off to.
    pub handoffs: Vec<String>,
    /// Whether it is the tenant's default agent.
    pub default: bool,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One tool of a stored agent, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentTool {
    /// The tool's name.
    pub tool: String,
    /// Whether the model is offered it.
    pub enabled: bool,
    /// Its settings.
    pub config: Value,
    /// Whether sensitive config is stored (its value is write-only).
    pub sensitive_config_set: bool,
    /// For a toolkit: the actions enabled (`None`: all).
    pub actions: Option<Vec<String>>,
}

/// One tool of an agent with its sensitive config opened: for the runtime only, never for
/// an API response (it has no `Serialize`, and `Debug` redacts the secret part).
#[derive(Clone, PartialEq)]
pub struct AgentToolSecret {
    /// The tool's name.
    pub tool: String,
    /// Whether the model is offered it.
    pub enabled: bool,
    /// Its settings (`config.*`).
    pub config: Value,
    /// Its opened sensitive config (`secrets.*`); `{}` when unset.
    pub sensitive_config: Value,
    /// For a toolkit: the actions enabled (`None`: all).
    pub actions: Option<Vec<String>>,
}

impl fmt::Debug for AgentToolSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentToolSecret")
            .field("tool", &self.tool)
            .field("enabled", &self.enabled)
            .field("config", &self.config)
            .field("actions", &self.actions)
            .field("sensitive_config", &"[redacted]")
            .finish()
    }
}

type AgentRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    bool,
    String,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
);
type AgentToolRow = (
    String,
    String,
    bool,
    String,
    Option<Vec<u8>>,
    Option<String>,
);

/// Binds a sealed config to its tenant, agent and tool: copied elsewhere, it does not open.
fn aad(tenant_id: &str, agent: &str, tool: &str) -> Vec<u8> {
    format!("agent_tool\u{0}{tenant_id}\u{0}{agent}\u{0}{tool}").into_bytes()
}

fn check_def(def: &AgentDef) -> Result<(), StoreError> {
    check_name("agent", &def.name)?;
    if let Some(live) = &def.live {
        check_live(live)?;
    }
    let mut seen = HashSet::new();
    for t in &def.tools {
        // `<label>/<tool>` attaches a tool of a registered MCP server; `toolkit:<name>` a
        // built-in toolkit.
        match (t.tool.strip_prefix("toolkit:"), t.tool.split_once('/')) {
            (Some(kit), _) => check_name("toolkit", kit)?,
            (None, Some((label, tool))) => {
                check_name("MCP server label", label)?;
                check_mcp_tool_name(tool)?;
            }
            (None, None) => check_name("tool", &t.tool)?,
        }
        if let Some(actions) = &t.actions {
            if !t.tool.starts_with("toolkit:") {
                return Err(StoreError::Invalid(format!(
                    "tool `{}` has `actions`, which only a toolkit (`toolkit:<name>`) takes; remove them",
                    t.tool
                )));
            }
            for a in actions {
                check_name("toolkit action", a)?;
            }
        }
        if !seen.insert(t.tool.as_str()) {
            return Err(StoreError::Invalid(format!(
                "agent `{}` lists tool `{}` twice; list each tool once",
                def.name, t.tool
            )));
        }
        if !(t.config.is_object() || t.config.is_null()) {
            return Err(StoreError::Invalid(format!(
                "the config of tool `{}` must be a JSON object",
                t.tool
            )));
        }
        if let Some(s) = &t.sensitive_config
            && !(s.is_object() || s.is_null())
        {
            return Err(StoreError::Invalid(format!(
                "the sensitive_config of tool `{}` must be a JSON object, or null to clear it",
                t.tool
            )));
        }
    }
    for h in &def.handoffs {
        check_name("handoff agent", h)?;
    }
    Ok(())
}

fn agent_from_rows(row: AgentRow, tools: Vec<AgentToolRow>) -> Result<Agent, StoreError> {
    let (
        name,
        instructions,
        model,
        voice,
        live,
        handoffs,
        default,
        created_at,
        updated_at,
        guards,
        turn_budget_ms,
        filler,
    ) = row;
    let live = match live {
        Some(text) => Some(parse_json("agent live settings", &text)?),
        None => None,
    };
    let guards = match guards {
        Some(text) => Some(parse_json("agent guards", &text)?),
        None => None,
    };
    let tools = tools
        .into_iter()
        .map(|(_, tool, enabled, config, sealed, actions)| {
            Ok(AgentTool {
                config: parse_json("agent tool config", &config)?,
                actions: parse_actions(actions.as_deref())?,
                tool,
                enabled,
                sensitive_config_set: sealed.is_some(),
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Agent {
        handoffs: parse_json("agent handoffs", &handoffs)?,
        name,
        instructions,
        model,
        voice,
        live,
        guards,
        turn_budget_ms: turn_budget_ms.and_then(|ms| u32::try_from(ms).ok()),
        filler,
        tools,
        default,
        created_at,
        updated_at,
    })
}

impl Store {
    /// Creates or replaces an agent. Each tool's `sensitive_config` is sealed; `None` keeps
    /// the stored value of that tool, `Some(Value::Null)` clears it. Making an agent the
    /// default makes the previous default an ordinary agent.
    pub async fn put_agent(&self, tenant_id: &str, def: &AgentDef) -> Result<Agent, StoreError> {
        self.put_agent_routed(tenant_id, def, None).await
    }

    /// [`Store::put_agent`] and, in the same transaction, the tenant's `features` replaced by
    /// `routing.0` (its phone numbers routed anew) — provided the tenant is as it was read
    /// (`routing.1`, its `updated_at` then). A tenant changed since (another save, or
    /// `PUT /v1/features`) is a `Conflict`, and nothing is written: both land or neither.
    pub async fn put_agent_routed(
        &self,
        tenant_id: &str,
        def: &AgentDef,
        routing: Option<(&Value, &str)>,
    ) -> Result<Agent, StoreError> {
        check_def(def)?;
        let features = match routing {
            Some((features, seen)) => {
                crate::tenants::check_features(features)?;
                Some((to_json(features)?, seen))
            }
            None => None,
        };
        // Seal before the transaction: it holds the write lock, sealing needs none.
        let mut sealed_new: HashMap<&str, Option<Vec<u8>>> = HashMap::new();
        for t in &def.tools {
            if let Some(v) = &t.sensitive_config {
                let sealed = if v.is_null() {
                    None
                } else {
                    Some(seal_with(
                        self.master_key(),
                        to_json(v)?.as_bytes(),
                        &aad(tenant_id, &def.name, &t.tool),
                    )?)
                };
                sealed_new.insert(t.tool.as_str(), sealed);
            }
        }
        let handoffs = to_json(&def.handoffs)?;
        let live = def.live.as_ref().map(to_json).transpose()?;
        let guards = def.guards.as_ref().map(to_json).transpose()?;
        let at = now();
        let written: Result<Option<(String, Vec<bool>)>, sqlx::Error> = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                if let Some((features, seen)) = &features {
                    let routed = sqlx::query(
                        "UPDATE tenants SET features = $2, updated_at = $3 WHERE id = $1 AND updated_at = $4",
                    )
                    .bind(tenant_id)
                    .bind(features)
                    .bind(&at)
                    .bind(*seen)
                    .execute(&mut *tx)
                    .await?;
                    if routed.rows_affected() == 0 {
                        // Rolled back as the transaction drops.
                        return Ok(None);
                    }
                }
                if def.default {
                    sqlx::query(
                        "UPDATE agents SET is_default = $3 WHERE tenant_id = $1 AND name <> $2 AND is_default",
                    )
                    .bind(tenant_id)
                    .bind(&def.name)
                    .bind(false)
                    .execute(&mut *tx)
                    .await?;
                }
                let created_at: String = sqlx::query_scalar(
                    "INSERT INTO agents (tenant_id, name, instructions, model, voice, handoffs, is_default, created_at, updated_at, live, guards, turn_budget_ms, filler) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12) \
                     ON CONFLICT (tenant_id, name) DO UPDATE SET \
                     instructions = excluded.instructions, model = excluded.model, voice = excluded.voice, live = excluded.live, guards = excluded.guards, \
                     turn_budget_ms = excluded.turn_budget_ms, filler = excluded.filler, \
                     handoffs = excluded.handoffs, is_default = excluded.is_default, updated_at = excluded.updated_at \
                     RETURNING created_at",
                )
                .bind(tenant_id)
                .bind(&def.name)
                .bind(&def.instructions)
                .bind(def.model.as_deref())
                .bind(def.voice.as_deref())
                .bind(&handoffs)
                .bind(def.default)
                .bind(&at)
                .bind(live.as_deref())
                .bind(guards.as_deref())
                .bind(def.turn_budget_ms.map(i64::from))
                .bind(def.filler.as_deref())
                .fetch_one(&mut *tx)
                .await?;
                let stored: Vec<(String, Option<Vec<u8>>)> = sqlx::query_as(
                    "SELECT tool, sensitive_config FROM agent_tools WHERE tenant_id = $1 AND agent = $2",
                )
                .bind(tenant_id)
                .bind(&def.name)
                .fetch_all(&mut *tx)
                .await?;
                let mut stored: HashMap<String, Option<Vec<u8>>> = stored.into_iter().collect();
                sqlx::query("DELETE FROM agent_tools WHERE tenant_id = $1 AND agent = $2")
                    .bind(tenant_id)
                    .bind(&def.name)
                    .execute(&mut *tx)
                    .await?;
                let mut set = Vec::with_capacity(def.tools.len());
                for (position, t) in def.tools.iter().enumerate() {
                    let sealed = match sealed_new.get(t.tool.as_str()) {
                        Some(new) => new.clone(),
                        None => stored.remove(&t.tool).flatten(),
                    };
                    set.push(sealed.is_some());
                    let config = if t.config.is_null() {
                        "{}".to_owned()
                    } else {
                        t.config.to_string()
                    };
                    let actions = t.actions.as_ref().map(|a| Value::from(a.clone()).to_string());
                    sqlx::query(
                        "INSERT INTO agent_tools (tenant_id, agent, position, tool, enabled, config, sensitive_config, actions) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(tenant_id)
                    .bind(&def.name)
                    .bind(i64::try_from(position).unwrap_or(i64::MAX))
                    .bind(&t.tool)
                    .bind(t.enabled)
                    .bind(config)
                    .bind(sealed)
                    .bind(actions)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(Some((created_at, set)))
            }
            .await
        });
        let (created_at, set) = match written {
            Ok(Some(w)) => w,
            Ok(None) => {
                return Err(StoreError::Conflict(format!(
                    "tenant `{tenant_id}` changed since its phone numbers were read (another save, or PUT /v1/features): nothing was saved; reload and save again"
                )));
            }
            Err(e) if is_fk_violation(&e) => {
                return Err(StoreError::NotFound(format!("tenant `{tenant_id}`")));
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Agent {
            name: def.name.clone(),
            instructions: def.instructions.clone(),
            model: def.model.clone(),
            voice: def.voice.clone(),
            live: def.live.clone(),
            guards: def.guards,
            turn_budget_ms: def.turn_budget_ms,
            filler: def.filler.clone(),
            tools: def
                .tools
                .iter()
                .zip(set)
                .map(|(t, sensitive_config_set)| AgentTool {
                    tool: t.tool.clone(),
                    enabled: t.enabled,
                    config: if t.config.is_null() {
                        empty_object()
                    } else {
                        t.config.clone()
                    },
                    sensitive_config_set,
                    actions: t.actions.clone(),
                })
                .collect(),
            handoffs: def.handoffs.clone(),
            default: def.default,
            created_at,
            updated_at: at,
        })
    }

    /// An agent as the API shows it (sensitive config only as `sensitive_config_set`).
    pub async fn get_agent(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<Option<Agent>, StoreError> {
        let (row, tools) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let row: Option<AgentRow> = sqlx::query_as(
                "SELECT name, instructions, model, voice, live, handoffs, is_default, created_at, updated_at, guards, turn_budget_ms, filler \
                 FROM agents WHERE tenant_id = $1 AND name = $2",
            )
            .bind(tenant_id)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
            let tools: Vec<AgentToolRow> = if row.is_some() {
                sqlx::query_as(
                    "SELECT agent, tool, enabled, config, sensitive_config, actions FROM agent_tools \
                     WHERE tenant_id = $1 AND agent = $2 ORDER BY position",
                )
                .bind(tenant_id)
                .bind(name)
                .fetch_all(&mut *tx)
                .await?
            } else {
                Vec::new()
            };
            tx.commit().await?;
            (row, tools)
        });
        row.map(|r| agent_from_rows(r, tools)).transpose()
    }

    /// An agent's tools with their sensitive config opened, for the runtime; `None` if there
    /// is no such agent. Never return these through the API.
    pub async fn agent_tools_with_secrets(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<Option<Vec<AgentToolSecret>>, StoreError> {
        let (exists, tools) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let exists: Option<String> =
                sqlx::query_scalar("SELECT name FROM agents WHERE tenant_id = $1 AND name = $2")
                    .bind(tenant_id)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
            let tools: Vec<AgentToolRow> = sqlx::query_as(
                "SELECT agent, tool, enabled, config, sensitive_config, actions FROM agent_tools \
                 WHERE tenant_id = $1 AND agent = $2 ORDER BY position",
            )
            .bind(tenant_id)
            .bind(name)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            (exists.is_some(), tools)
        });
        if !exists {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(tools.len());
        for (agent, tool, enabled, config, sealed, actions) in tools {
            let sensitive_config = match sealed {
                Some(bytes) => {
                    let plain =
                        open_with(self.master_key(), &bytes, &aad(tenant_id, &agent, &tool))?;
                    serde_json::from_slice(&plain).map_err(|_| {
                        StoreError::Corrupt(format!(
                            "sealed config of tool `{tool}` of agent `{agent}`"
                        ))
                    })?
                }
                None => empty_object(),
            };
            out.push(AgentToolSecret {
                config: parse_json("agent tool config", &config)?,
                actions: parse_actions(actions.as_deref())?,
                tool,
                enabled,
                sensitive_config,
            });
        }
        Ok(Some(out))
    }

    /// Agents in name order, with their tools.
    pub async fn list_agents(
        &self,
        tenant_id: &str,
        page: Page,
    ) -> Result<Paged<Agent>, StoreError> {
        let limit = page.fetch_limit()?;
        let after = page.cursor(1)?.and_then(|mut k| k.pop());
        let (rows, tools) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let rows: Vec<AgentRow> = sqlx::query_as(
                "SELECT name, instructions, model, voice, live, handoffs, is_default, created_at, updated_at, guards, turn_budget_ms, filler \
                 FROM agents WHERE tenant_id = $1 AND ($2 IS NULL OR name > $2) ORDER BY name LIMIT $3",
            )
            .bind(tenant_id)
            .bind(after.as_deref())
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
            // The page is a contiguous range of names: fetch all its tools in one query.
            let tools: Vec<AgentToolRow> = match (rows.first(), rows.last()) {
                (Some(first), Some(last)) => {
                    sqlx::query_as(
                        "SELECT agent, tool, enabled, config, sensitive_config, actions FROM agent_tools \
                         WHERE tenant_id = $1 AND agent >= $2 AND agent <= $3 ORDER BY agent, position",
                    )
                    .bind(tenant_id)
                    .bind(&first.0)
                    .bind(&last.0)
                    .fetch_all(&mut *tx)
                    .await?
                }
                _ => Vec::new(),
            };
            tx.commit().await?;
            (rows, tools)
        });
        let mut by_agent: BTreeMap<String, Vec<AgentToolRow>> = BTreeMap::new();
        for t in tools {
            by_agent.entry(t.0.clone()).or_default().push(t);
        }
        let items = rows
            .into_iter()
            .map(|r| {
                let tools = by_agent.remove(&r.0).unwrap_or_default();
                agent_from_rows(r, tools)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(paginate(items, &page, |a| encode_cursor(&[&a.name])))
    }

    /// Deletes an agent and its tool settings; `false` if there was none.
    pub async fn delete_agent(&self, tenant_id: &str, name: &str) -> Result<bool, StoreError> {
        let n = with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            let n = sqlx::query("DELETE FROM agents WHERE tenant_id = $1 AND name = $2")
                .bind(tenant_id)
                .bind(name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            n
        });
        Ok(n > 0)
    }

    /// The name of the tenant's default agent, if one is marked default.
    pub async fn default_agent(&self, tenant_id: &str) -> Result<Option<String>, StoreError> {
        let name = with_pool!(self, |pool| {
            sqlx::query_scalar("SELECT name FROM agents WHERE tenant_id = $1 AND is_default")
                .bind(tenant_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(name)
    }
}

fn parse_actions(stored: Option<&str>) -> Result<Option<Vec<String>>, StoreError> {
    stored
        .map(|a| parse_json("agent toolkit actions", a))
        .transpose()
}

/// MCP tool names are freer than ours (the model sees them cleaned up): anything printable
/// without `/`, up to 128 characters.
fn check_mcp_tool_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty()
        || name.chars().count() > 128
        || name.contains('/')
        || name.chars().any(char::is_control)
    {
        return Err(StoreError::Invalid(format!(
            "MCP tool name `{}` must be 1-128 printable characters without `/`; write the agent's tool as `<label>/<tool>`",
            crate::truncate(name, 80)
        )));
    }
    Ok(())
}
