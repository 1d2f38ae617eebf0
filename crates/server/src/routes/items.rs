//! The HTTP door speaks the providers' shapes: a model's function call as the model produced it
//! (an OpenAI Responses `function_call` item, a Chat Completions `tool_calls` entry, an
//! Anthropic `tool_use` block), and the answer as the item that goes back to that model
//! (`function_call_output`, a `tool` message, a `tool_result` block). A voice stack passes the
//! model's output through untouched and its answer back the same way.

use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::error::ApiError;

/// Whose shape an answer item takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ItemFormat {
    /// `{"type": "function_call_output", "call_id", "output"}`
    OpenaiResponses,
    /// `{"role": "tool", "tool_call_id", "content"}`
    OpenaiChat,
    /// `{"type": "tool_result", "tool_use_id", "content", "is_error"}`
    Anthropic,
}

/// A model's function call read from its item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    pub function_call_id: String,
    pub name: String,
    pub arguments_json: String,
    pub format: ItemFormat,
}

const SHAPES: &str = "an OpenAI Responses `function_call` item ({\"type\": \"function_call\", \"call_id\", \"name\", \"arguments\"}), a Chat Completions tool call ({\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}) or an Anthropic `tool_use` block ({\"type\": \"tool_use\", \"id\", \"name\", \"input\"})";

fn text<'a>(item: &'a Value, pointer: &str) -> Result<&'a str, ApiError> {
    item.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "item{}: a non-empty string is required here",
                pointer.replace('/', ".")
            ))
        })
}

/// The function call in `item`, or an error naming what is wrong and the shapes accepted.
pub fn read_item(item: &Value) -> Result<ModelCall, ApiError> {
    let kind = item.get("type").and_then(Value::as_str);
    let (function_call_id, name, arguments_json, format) = match kind {
        Some("function_call") => {
            let arguments = match item.get("arguments") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            (
                text(item, "/call_id")?,
                text(item, "/name")?,
                arguments,
                ItemFormat::OpenaiResponses,
            )
        }
        Some("function") => {
            let arguments = match item.pointer("/function/arguments") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            (
                text(item, "/id")?,
                text(item, "/function/name")?,
                arguments,
                ItemFormat::OpenaiChat,
            )
        }
        Some("tool_use") => {
            // An input that is not an object is the model's mistake: the tool answers it
            // `tool_args_parse_error`, as every door does.
            let input = match item.get("input") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(v) => v.to_string(),
            };
            (
                text(item, "/id")?,
                text(item, "/name")?,
                input,
                ItemFormat::Anthropic,
            )
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "item.type `{other}` is not a function call; send {SHAPES}"
            )));
        }
        None => {
            return Err(ApiError::bad_request(format!(
                "item.type is missing; send {SHAPES}"
            )));
        }
    };
    Ok(ModelCall {
        function_call_id: function_call_id.to_owned(),
        name: name.to_owned(),
        arguments_json,
        format,
    })
}

/// The item that carries `output` back to the model, in `format`.
pub fn answer_item(format: ItemFormat, function_call_id: &str, ok: bool, output: &str) -> Value {
    match format {
        ItemFormat::OpenaiResponses => json!({
            "type": "function_call_output", "call_id": function_call_id, "output": output,
        }),
        ItemFormat::OpenaiChat => json!({
            "role": "tool", "tool_call_id": function_call_id, "content": output,
        }),
        ItemFormat::Anthropic => json!({
            "type": "tool_result", "tool_use_id": function_call_id, "content": output, "is_error": !ok,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_call_is_read_and_answered_in_its_own_shape() {
        let responses = json!({"type": "function_call", "id": "fc_9", "call_id": "call_1",
            "name": "save_meal", "arguments": "{\"meal_type\": \"lunch\"}", "status": "completed"});
        let call = read_item(&responses).unwrap();
        assert_eq!(
            (
                call.function_call_id.as_str(),
                call.name.as_str(),
                call.arguments_json.as_str()
            ),
            ("call_1", "save_meal", "{\"meal_type\": \"lunch\"}")
        );
        assert_eq!(
            answer_item(call.format, "call_1", true, "{}"),
            json!({"type": "function_call_output", "call_id": "call_1", "output": "{}"})
        );
        let chat = json!({"id": "call_2", "type": "function", "function": {"name": "save_meal", "arguments": "{}"}});
        let call = read_item(&chat).unwrap();
        assert_eq!(
            (call.function_call_id.as_str(), call.format),
            ("call_2", ItemFormat::OpenaiChat)
        );
        assert_eq!(
            answer_item(call.format, "call_2", true, "x"),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "x"})
        );
        let anthropic = json!({"type": "tool_use", "id": "toolu_1", "name": "save_meal", "input": {"meal_type": "lunch"}});
        let call = read_item(&anthropic).unwrap();
        assert_eq!(call.arguments_json, "{\"meal_type\":\"lunch\"}");
        assert_eq!(
            answer_item(call.format, "toolu_1", false, "e"),
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "e", "is_error": true})
        );
    }

    #[test]
    fn a_wrong_item_names_the_place_and_the_shapes() {
        let e = read_item(&json!({"type": "message", "content": "hi"})).unwrap_err();
        assert!(
            e.message.contains("item.type `message`") && e.message.contains("tool_use"),
            "{}",
            e.message
        );
        let e = read_item(&json!({"type": "function_call", "name": "x"})).unwrap_err();
        assert!(e.message.contains("item.call_id"), "{}", e.message);
    }

    /// Arguments that are not an object travel as the model made them: the tool answers them
    /// `tool_args_parse_error`, whichever shape carried them.
    #[test]
    fn arguments_that_are_not_an_object_are_passed_as_made() {
        for (item, arguments) in [
            (
                json!({"type": "tool_use", "id": "t", "name": "x", "input": [1, 2]}),
                "[1,2]",
            ),
            (
                json!({"type": "tool_use", "id": "t", "name": "x", "input": 3}),
                "3",
            ),
            (
                json!({"type": "tool_use", "id": "t", "name": "x", "input": null}),
                "{}",
            ),
            (
                json!({"type": "function_call", "call_id": "c", "name": "x", "arguments": "null"}),
                "null",
            ),
            (
                json!({"type": "function_call", "call_id": "c", "name": "x", "arguments": [1]}),
                "[1]",
            ),
            (
                json!({"type": "function", "id": "c", "function": {"name": "x", "arguments": "\"text\""}}),
                "\"text\"",
            ),
        ] {
            assert_eq!(
                read_item(&item).unwrap().arguments_json,
                arguments,
                "{item}"
            );
        }
    }
}
