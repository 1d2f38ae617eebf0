//! Reading the files the commands take: tools (one, or a list) and tenant configs.

use std::path::Path;

use serde_json::Value;
use switchboard_core::transfer::ReferConfig;
use switchboard_core::{Diagnostic, Diagnostics, Limits, Tool};

/// What a JSON file holds.
#[derive(Debug)]
pub enum FileContent {
    Tools(Vec<(String, Result<Tool, Diagnostics>)>),
    Tenant(Result<Option<ReferConfig>, Vec<Diagnostic>>),
}

/// Reads a file as JSON; syntax errors become a diagnostic with line and column.
pub fn read_json(path: &Path) -> Result<Result<Value, Diagnostic>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(serde_json::from_str(&text).map_err(|e| Diagnostic::json_syntax(&e)))
}

/// Classifies and parses a file's JSON: a tenant config has `features`; otherwise a tool or a list
/// of tools. Pointers of tools in a list are prefixed with their index.
pub fn parse(value: &Value) -> FileContent {
    if value.get("features").is_some() || value.get("tenant_id").is_some() {
        let refer = match value.pointer("/features/refer") {
            None => Ok(None),
            Some(r) => ReferConfig::parse(r).map(Some).map_err(|problems| {
                problems
                    .into_iter()
                    .map(|p| Diagnostic {
                        pointer: format!("/features/refer{}", p.pointer),
                        ..p
                    })
                    .collect()
            }),
        };
        return FileContent::Tenant(refer);
    }
    let limits = Limits::default();
    match value {
        Value::Array(items) => FileContent::Tools(
            items
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let label = t
                        .get("name")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("#{i}"), str::to_owned);
                    let parsed = Tool::parse(t, &limits).map_err(|d| {
                        Diagnostics(
                            d.0.into_iter()
                                .map(|x| Diagnostic {
                                    pointer: format!("/{i}{}", x.pointer),
                                    ..x
                                })
                                .collect(),
                        )
                    });
                    (label, parsed)
                })
                .collect(),
        ),
        v => {
            let label = v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("(unnamed)")
                .to_owned();
            FileContent::Tools(vec![(label, Tool::parse(v, &limits))])
        }
    }
}
