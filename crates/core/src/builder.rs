//! The ToolBuilder (seed 001): an agent's functions and tool choice, checked once into a
//! [`Toolset`], then rendered in the exact wire shape each model provider expects.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

use crate::function::FunctionDef;

/// A provider wire format a [`Toolset`] can be rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Realtime `session.tools` / `session.tool_choice` (also the SIP accept body).
    OpenAiRealtime,
    /// OpenAI Chat Completions `tools` / `tool_choice`.
    OpenAiChat,
    /// OpenAI Responses `tools` / `tool_choice`.
    OpenAiResponses,
    /// Anthropic Messages `tools` / `tool_choice`.
    Anthropic,
    /// MCP `tools/list` result entries.
    Mcp,
}

impl Format {
    /// Every format, in the order their names are listed to users.
    pub const ALL: [Format; 5] = [
        Format::OpenAiRealtime,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Mcp,
    ];

    /// The format's name as written in the API and CLI (`openai-realtime`, …).
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAiRealtime => "openai-realtime",
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Mcp => "mcp",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == s)
            .ok_or_else(|| BuildError::UnknownFormat {
                given: s.to_owned(),
            })
    }
}

/// Whether and how the model must call a function, in provider-neutral terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolChoice {
    /// The model decides (seed 001's default when there are functions).
    Auto,
    /// The model must not call any function (the default when there are none).
    None,
    /// The model must call some function (Anthropic calls it `any`).
    Required,
    /// The model must call this one function.
    Function(String),
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolChoice::Auto => f.write_str("auto"),
            ToolChoice::None => f.write_str("none"),
            ToolChoice::Required => f.write_str("required"),
            ToolChoice::Function(name) => f.write_str(name),
        }
    }
}

impl FromStr for ToolChoice {
    type Err = BuildError;

    /// `auto`, `none` and `required` are keywords; any other non-empty text names a function,
    /// as in seed 001's `tool_choice: str`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Err(BuildError::EmptyToolChoice),
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            name => Ok(ToolChoice::Function(name.to_owned())),
        }
    }
}

/// Why a toolset could not be built, each naming the thing, the place and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Two functions share a name, so the model's call would be ambiguous.
    #[error(
        "function name \"{name}\" is used by both functions[{first}] and functions[{second}]; \
         rename one of them or detach one from the agent"
    )]
    DuplicateFunction {
        /// The shared name.
        name: String,
        /// Position of its first use (0-based).
        first: usize,
        /// Position of its second use (0-based).
        second: usize,
    },
    /// `tool_choice` forces a function the toolset does not have.
    #[error("tool_choice names function \"{name}\", which is not in this toolset; {fix}",
        fix = unknown_choice_fix(.name, .available))]
    UnknownChoiceFunction {
        /// The function `tool_choice` named.
        name: String,
        /// The toolset's function names, in order.
        available: Vec<String>,
    },
    /// `tool_choice: required` with nothing to call could never be satisfied.
    #[error(
        "tool_choice \"required\" needs at least one function, but the toolset is empty; \
         attach a tool to the agent or use tool_choice \"none\""
    )]
    RequiredWithoutFunctions,
    /// An empty `tool_choice` string is neither a keyword nor a function name.
    #[error("tool_choice is empty; use \"auto\", \"none\", \"required\" or a function name")]
    EmptyToolChoice,
    /// A format name that is not one of [`Format::ALL`].
    #[error("unknown tool format \"{given}\"; valid formats are: {valid}",
        valid = format_names())]
    UnknownFormat {
        /// The name as given.
        given: String,
    },
}

fn format_names() -> String {
    Format::ALL.map(Format::name).join(", ")
}

fn unknown_choice_fix(name: &str, available: &[String]) -> String {
    let keyword = ["auto", "none", "required"]
        .into_iter()
        .find(|keyword| name.eq_ignore_ascii_case(keyword));
    if let Some(keyword) = keyword {
        return format!("did you mean the keyword \"{keyword}\"? keywords are lower case");
    }
    if available.is_empty() {
        return "the toolset has no functions: use tool_choice \"none\" or \"auto\"".to_owned();
    }
    format!(
        "use one of: {}, or \"auto\", \"none\", \"required\"",
        available.join(", ")
    )
}

/// An agent's functions with a tool choice that fits them: names unique, a forced function
/// present. Only [`Toolset::build`] makes one, so rendering never re-checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolset {
    functions: Vec<FunctionDef>,
    tool_choice: ToolChoice,
}

impl Toolset {
    /// Checks `functions` and `choice` together; without a choice, `auto` when there are
    /// functions and `none` when there are none (seed 001).
    pub fn build(
        functions: Vec<FunctionDef>,
        choice: Option<ToolChoice>,
    ) -> Result<Toolset, BuildError> {
        check_unique_names(&functions)?;
        let tool_choice = choice.unwrap_or(if functions.is_empty() {
            ToolChoice::None
        } else {
            ToolChoice::Auto
        });
        check_choice(&functions, &tool_choice)?;
        Ok(Toolset {
            functions,
            tool_choice,
        })
    }

    /// The functions, in the order they were given.
    pub fn functions(&self) -> &[FunctionDef] {
        &self.functions
    }

    /// The tool choice, defaulted if none was given.
    pub fn tool_choice(&self) -> &ToolChoice {
        &self.tool_choice
    }

    /// The `tools` and `tool_choice` members of a request body in `format`'s wire shape, to be
    /// merged into the provider request.
    ///
    /// Two shapes deviate from `{"tools", "tool_choice"}`: MCP has no tool choice, so only
    /// `tools` is returned; OpenAI Chat rejects an empty `tools` array and a `tool_choice`
    /// without tools, so an empty toolset renders as `{}` there.
    pub fn render(&self, format: Format) -> Value {
        match format {
            Format::OpenAiRealtime => self.envelope(realtime_tool, Some(realtime_choice)),
            Format::OpenAiResponses => self.envelope(responses_tool, Some(realtime_choice)),
            Format::OpenAiChat if self.functions.is_empty() => Value::Object(Map::new()),
            Format::OpenAiChat => self.envelope(chat_tool, Some(chat_choice)),
            Format::Anthropic => self.envelope(anthropic_tool, Some(anthropic_choice)),
            Format::Mcp => self.envelope(mcp_tool, None),
        }
    }

    fn envelope(
        &self,
        tool: fn(&FunctionDef) -> Value,
        choice: Option<fn(&ToolChoice) -> Value>,
    ) -> Value {
        let mut body = Map::new();
        body.insert(
            "tools".to_owned(),
            self.functions.iter().map(tool).collect::<Vec<_>>().into(),
        );
        if let Some(choice) = choice {
            body.insert("tool_choice".to_owned(), choice(&self.tool_choice));
        }
        Value::Object(body)
    }
}

fn check_unique_names(functions: &[FunctionDef]) -> Result<(), BuildError> {
    for (second, function) in functions.iter().enumerate() {
        let first = functions[..second]
            .iter()
            .position(|earlier| earlier.name == function.name);
        if let Some(first) = first {
            return Err(BuildError::DuplicateFunction {
                name: function.name.clone(),
                first,
                second,
            });
        }
    }
    Ok(())
}

fn check_choice(functions: &[FunctionDef], choice: &ToolChoice) -> Result<(), BuildError> {
    match choice {
        ToolChoice::Required if functions.is_empty() => Err(BuildError::RequiredWithoutFunctions),
        ToolChoice::Function(name) if !functions.iter().any(|f| &f.name == name) => {
            Err(BuildError::UnknownChoiceFunction {
                name: name.clone(),
                available: functions.iter().map(|f| f.name.clone()).collect(),
            })
        }
        _ => Ok(()),
    }
}

fn realtime_tool(f: &FunctionDef) -> Value {
    json!({
        "type": "function",
        "name": f.name,
        "description": f.description,
        "parameters": f.parameters,
    })
}

/// Responses defaults `strict` to true when absent, so it is always sent explicitly.
fn responses_tool(f: &FunctionDef) -> Value {
    json!({
        "type": "function",
        "name": f.name,
        "description": f.description,
        "parameters": f.parameters,
        "strict": f.strict,
    })
}

/// Realtime and Responses share this shape: `{"type": "function", "name": ...}`.
fn realtime_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Function(name) => json!({"type": "function", "name": name}),
        // OpenAI's keywords are exactly the Display names.
        keyword => json!(keyword.to_string()),
    }
}

fn chat_tool(f: &FunctionDef) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": f.name,
            "description": f.description,
            "parameters": f.parameters,
            "strict": f.strict,
        },
    })
}

fn chat_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
        keyword => json!(keyword.to_string()),
    }
}

fn anthropic_tool(f: &FunctionDef) -> Value {
    json!({
        "name": f.name,
        "description": f.description,
        "input_schema": f.parameters,
    })
}

fn anthropic_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
    }
}

fn mcp_tool(f: &FunctionDef) -> Value {
    json!({
        "name": f.name,
        "description": f.description,
        "inputSchema": f.parameters,
    })
}
