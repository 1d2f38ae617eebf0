//! `serve --limits FILE`: per-tool limits changed from their defaults by a JSON file.

use std::path::Path;

use serde_json::Value;
use switchboard_core::Limits;

/// Reads a JSON object naming any of [`Limits`]' fields; the others keep their defaults. An
/// unknown field, a value of the wrong type or an unreadable file is an error that says which
/// and what the file may hold.
pub fn read(path: &Path) -> Result<Limits, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the limits file {shown} (--limits): {e}"))?;
    parse(&text).map_err(|e| format!("the limits file {shown} (--limits): {e}"))
}

fn parse(text: &str) -> Result<Limits, String> {
    let given: Value = serde_json::from_str(text).map_err(|e| {
        format!("is not JSON ({e}); write an object such as {{\"max_json_depth\": 32}}")
    })?;
    let Value::Object(given) = given else {
        return Err("must be a JSON object such as {\"max_json_depth\": 32}".to_owned());
    };
    let known = serde_json::to_value(Limits::default())
        .ok()
        .and_then(|v| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()))
        .unwrap_or_default();
    if let Some(unknown) = given.keys().find(|k| !known.contains(k)) {
        return Err(format!(
            "`{unknown}` is not a limit; the limits are {}",
            known.join(", ")
        ));
    }
    serde_json::from_value(Value::Object(given))
        .map_err(|e| format!("{e}; each limit is a number (see docs/security.md)"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn named_limits_change_and_the_rest_keep_their_defaults() {
        let limits = parse(r#"{"max_json_depth": 32, "max_transform_output": 4096}"#).unwrap();
        assert_eq!(limits.max_json_depth, 32);
        assert_eq!(limits.max_transform_output, 4096);
        assert_eq!(limits.max_actions, Limits::default().max_actions);
    }

    #[test]
    fn an_unknown_field_or_a_wrong_type_is_named() {
        let e = parse(r#"{"max_json_dept": 32}"#).unwrap_err();
        assert!(
            e.contains("`max_json_dept` is not a limit") && e.contains("max_json_depth"),
            "{e}"
        );
        let e = parse(r#"{"max_json_depth": "deep"}"#).unwrap_err();
        assert!(e.contains("each limit is a number"), "{e}");
        let e = parse("[1]").unwrap_err();
        assert!(e.contains("must be a JSON object"), "{e}");
    }
}
