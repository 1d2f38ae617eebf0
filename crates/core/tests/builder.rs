//! The ToolBuilder: toolset checks, and each provider's wire shape (insta snapshots).
#![allow(clippy::unwrap_used, clippy::panic)]

use std::str::FromStr;

use serde_json::json;
use switchboard_core::builder::{BuildError, Format, ToolChoice, Toolset};
use switchboard_core::function::FunctionDef;

fn function(name: &str, strict: bool) -> FunctionDef {
    FunctionDef {
        name: name.to_owned(),
        description: format!("Description of {name}"),
        parameters: json!({
            "type": "object",
            "properties": {"id": {"type": "string", "description": "Which one"}},
            "required": ["id"],
            "additionalProperties": false
        }),
        strict,
    }
}

fn two_functions() -> Vec<FunctionDef> {
    vec![
        function("request_transfer", false),
        function("get_order", true),
    ]
}

/// One snapshot per format and toolset: the two-function set, with the default choice and with
/// a forced function, and the empty set.
#[test]
fn render_every_format() {
    let sets = [
        ("two", Toolset::build(two_functions(), None).unwrap()),
        (
            "two_forced",
            Toolset::build(
                two_functions(),
                Some(ToolChoice::Function("get_order".into())),
            )
            .unwrap(),
        ),
        (
            "empty",
            Toolset::build(Vec::<FunctionDef>::new(), None).unwrap(),
        ),
    ];
    for format in Format::ALL {
        for (set_name, set) in &sets {
            insta::assert_json_snapshot!(format!("{format}__{set_name}"), set.render(format));
        }
    }
}

/// The tool choice keywords in each format, beyond the defaults the snapshots show.
#[test]
fn tool_choice_shapes() {
    let cases = [
        (
            Format::OpenAiRealtime,
            ToolChoice::Required,
            json!("required"),
        ),
        (Format::OpenAiRealtime, ToolChoice::None, json!("none")),
        (
            Format::OpenAiResponses,
            ToolChoice::Required,
            json!("required"),
        ),
        (Format::OpenAiChat, ToolChoice::Required, json!("required")),
        (Format::OpenAiChat, ToolChoice::None, json!("none")),
        (
            Format::Anthropic,
            ToolChoice::Required,
            json!({"type": "any"}),
        ),
        (Format::Anthropic, ToolChoice::None, json!({"type": "none"})),
    ];
    for (format, choice, expected) in cases {
        let set = Toolset::build(two_functions(), Some(choice.clone())).unwrap();
        assert_eq!(
            set.render(format)["tool_choice"],
            expected,
            "{format} {choice}"
        );
    }
    let mcp = Toolset::build(two_functions(), Some(ToolChoice::Required)).unwrap();
    assert!(mcp.render(Format::Mcp).get("tool_choice").is_none());
}

#[test]
fn default_choice_follows_seed001() {
    let some = Toolset::build(two_functions(), None).unwrap();
    assert_eq!(some.tool_choice(), &ToolChoice::Auto);
    let none = Toolset::build(Vec::<FunctionDef>::new(), None).unwrap();
    assert_eq!(none.tool_choice(), &ToolChoice::None);
    assert!(none.functions().is_empty());
}

/// `(case, functions, tool choice, error, its message)`.
type BuildCase = (
    &'static str,
    Vec<FunctionDef>,
    Option<ToolChoice>,
    BuildError,
    &'static str,
);

#[test]
fn build_errors() {
    let duplicated = vec![
        function("a", false),
        function("b", false),
        function("a", true),
        function("b", false),
    ];
    let cases: Vec<BuildCase> = vec![
        (
            "name collision",
            duplicated,
            None,
            BuildError::DuplicateFunction {
                name: "a".into(),
                first: 0,
                second: 2,
            },
            "function name \"a\" is used by both functions[0] and functions[2]; \
             rename one of them or detach one from the agent",
        ),
        (
            "forced function missing",
            two_functions(),
            Some(ToolChoice::Function("cancel_order".into())),
            BuildError::UnknownChoiceFunction {
                name: "cancel_order".into(),
                available: vec!["request_transfer".into(), "get_order".into()],
            },
            "tool_choice names function \"cancel_order\", which is not in this toolset; \
             use one of: request_transfer, get_order, or \"auto\", \"none\", \"required\"",
        ),
        (
            "keyword in the wrong case",
            two_functions(),
            Some(ToolChoice::Function("Auto".into())),
            BuildError::UnknownChoiceFunction {
                name: "Auto".into(),
                available: vec!["request_transfer".into(), "get_order".into()],
            },
            "tool_choice names function \"Auto\", which is not in this toolset; \
             did you mean the keyword \"auto\"? keywords are lower case",
        ),
        (
            "forced function in an empty set",
            Vec::new(),
            Some(ToolChoice::Function("get_order".into())),
            BuildError::UnknownChoiceFunction {
                name: "get_order".into(),
                available: vec![],
            },
            "tool_choice names function \"get_order\", which is not in this toolset; \
             the toolset has no functions: use tool_choice \"none\" or \"auto\"",
        ),
        (
            "required without functions",
            Vec::new(),
            Some(ToolChoice::Required),
            BuildError::RequiredWithoutFunctions,
            "tool_choice \"required\" needs at least one function, but the toolset is empty; \
             attach a tool to the agent or use tool_choice \"none\"",
        ),
    ];
    for (case, functions, choice, error, message) in cases {
        let actual = Toolset::build(functions, choice).unwrap_err();
        assert_eq!(actual, error, "{case}");
        assert_eq!(actual.to_string(), message, "{case}");
    }
}

#[test]
fn explicit_choices_that_fit_are_kept() {
    for (functions, choice) in [
        (two_functions(), ToolChoice::None),
        (two_functions(), ToolChoice::Required),
        (
            two_functions(),
            ToolChoice::Function("request_transfer".into()),
        ),
        (Vec::new(), ToolChoice::Auto),
        (Vec::new(), ToolChoice::None),
    ] {
        let set = Toolset::build(functions, Some(choice.clone())).unwrap();
        assert_eq!(set.tool_choice(), &choice);
    }
}

#[test]
fn tool_choice_from_str() {
    for (input, expected) in [
        ("auto", ToolChoice::Auto),
        ("none", ToolChoice::None),
        ("required", ToolChoice::Required),
        (
            "request_transfer",
            ToolChoice::Function("request_transfer".into()),
        ),
        ("AUTO", ToolChoice::Function("AUTO".into())),
    ] {
        let parsed = ToolChoice::from_str(input).unwrap();
        assert_eq!(parsed, expected, "{input}");
        assert_eq!(parsed.to_string(), input);
    }
    assert_eq!(ToolChoice::from_str(""), Err(BuildError::EmptyToolChoice));
}

#[test]
fn format_names_round_trip() {
    for format in Format::ALL {
        assert_eq!(Format::from_str(&format.to_string()), Ok(format));
    }
    assert_eq!(
        Format::from_str("openai").unwrap_err().to_string(),
        "unknown tool format \"openai\"; valid formats are: \
         openai-realtime, openai-chat, openai-responses, anthropic, mcp"
    );
}

#[test]
fn json_text_matches_the_rendered_value() {
    let sets = [
        Toolset::build(two_functions(), None).unwrap(),
        Toolset::build(Vec::<FunctionDef>::new(), None).unwrap(),
    ];
    for set in &sets {
        for format in Format::ALL {
            let text: serde_json::Value = serde_json::from_str(&set.render_json(format)).unwrap();
            assert_eq!(text, set.render(format), "{format}");
        }
    }
}
