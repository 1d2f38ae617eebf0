//! The ToolBuilder (seed 001): an agent's functions and tool choice, checked once into a
//! [`Toolset`], then rendered in the exact wire shape each model provider expects.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};

use serde_json::{Value, json};

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
    functions: Vec<Arc<FunctionDef>>,
    tool_choice: ToolChoice,
}

impl Toolset {
    /// Checks `functions` and `choice` together; without a choice, `auto` when there are
    /// functions and `none` when there are none (seed 001).
    pub fn build(
        functions: impl IntoIterator<Item = impl Into<Arc<FunctionDef>>>,
        choice: Option<ToolChoice>,
    ) -> Result<Toolset, BuildError> {
        let functions: Vec<Arc<FunctionDef>> = functions.into_iter().map(Into::into).collect();
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
    pub fn functions(&self) -> &[Arc<FunctionDef>] {
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
        serde_json::to_value(Rendered { set: self, format }).unwrap_or(Value::Null)
    }

    /// The same as [`render`](Self::render), serialised straight to JSON text without building an
    /// intermediate value: what an HTTP response or a `session.update` sends.
    pub fn render_json(&self, format: Format) -> String {
        serde_json::to_string(&Rendered { set: self, format }).unwrap_or_default()
    }
}

/// A toolset in one provider's wire shape, serialised from borrowed parts.
struct Rendered<'a> {
    set: &'a Toolset,
    format: Format,
}

impl Serialize for Rendered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let functions = &self.set.functions;
        if self.format == Format::OpenAiChat && functions.is_empty() {
            return s.serialize_map(Some(0))?.end();
        }
        let with_choice = self.format != Format::Mcp;
        let mut map = s.serialize_map(Some(1 + usize::from(with_choice)))?;
        let tools: Vec<ToolView<'_>> = functions
            .iter()
            .map(|f| ToolView {
                f,
                format: self.format,
            })
            .collect();
        map.serialize_entry("tools", &tools)?;
        if with_choice {
            map.serialize_entry(
                "tool_choice",
                &ChoiceView {
                    choice: &self.set.tool_choice,
                    format: self.format,
                },
            )?;
        }
        map.end()
    }
}

/// One function in a provider's shape.
struct ToolView<'a> {
    f: &'a FunctionDef,
    format: Format,
}

/// Chat's nested `function` object.
struct ChatFunction<'a>(&'a FunctionDef);

impl Serialize for ChatFunction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("name", &self.0.name)?;
        m.serialize_entry("description", &self.0.description)?;
        m.serialize_entry("parameters", &self.0.parameters)?;
        m.serialize_entry("strict", &self.0.strict)?;
        m.end()
    }
}

impl Serialize for ToolView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.f;
        let mut m = s.serialize_map(None)?;
        match self.format {
            Format::OpenAiRealtime | Format::OpenAiResponses => {
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", &f.name)?;
                m.serialize_entry("description", &f.description)?;
                m.serialize_entry("parameters", &f.parameters)?;
                // Responses defaults `strict` to true when absent, so it is always sent there.
                if self.format == Format::OpenAiResponses {
                    m.serialize_entry("strict", &f.strict)?;
                }
            }
            Format::OpenAiChat => {
                m.serialize_entry("type", "function")?;
                m.serialize_entry("function", &ChatFunction(f))?;
            }
            Format::Anthropic => {
                m.serialize_entry("name", &f.name)?;
                m.serialize_entry("description", &f.description)?;
                m.serialize_entry("input_schema", &f.parameters)?;
            }
            Format::Mcp => {
                m.serialize_entry("name", &f.name)?;
                m.serialize_entry("description", &f.description)?;
                m.serialize_entry("inputSchema", &f.parameters)?;
            }
        }
        m.end()
    }
}

/// A tool choice in a provider's shape.
struct ChoiceView<'a> {
    choice: &'a ToolChoice,
    format: Format,
}

impl Serialize for ChoiceView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let value = match self.format {
            Format::OpenAiChat => chat_choice(self.choice),
            Format::Anthropic => anthropic_choice(self.choice),
            _ => realtime_choice(self.choice),
        };
        value.serialize(s)
    }
}

fn check_unique_names(functions: &[Arc<FunctionDef>]) -> Result<(), BuildError> {
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

fn check_choice(functions: &[Arc<FunctionDef>], choice: &ToolChoice) -> Result<(), BuildError> {
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

/// Realtime and Responses share this shape: `{"type": "function", "name": ...}`.
fn realtime_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Function(name) => json!({"type": "function", "name": name}),
        // OpenAI's keywords are exactly the Display names.
        keyword => json!(keyword.to_string()),
    }
}

fn chat_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
        keyword => json!(keyword.to_string()),
    }
}

fn anthropic_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
    }
}
