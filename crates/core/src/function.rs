//! The provider-neutral function definition a model sees: what every tool, built-in toolkit and
//! MCP source turns into before the ToolBuilder renders it for one provider's wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One function as a model sees it: name, description and the JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    pub description: String,
    /// A JSON Schema object (`{"type": "object", ...}`) for the arguments.
    pub parameters: Value,
    /// Whether the schema follows OpenAI strict mode (every property required, optional ones
    /// nullable, no additional properties); providers that know the flag receive it.
    #[serde(default)]
    pub strict: bool,
}
