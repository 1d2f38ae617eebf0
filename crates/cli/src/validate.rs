//! `switchboard validate FILE...`: every problem of every file, human-readable or as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};
use switchboard_core::Diagnostic;

use crate::files::{self, FileContent};

pub fn validate(paths: &[PathBuf], as_json: bool) -> Result<ExitCode, String> {
    let mut reports = Vec::new();
    let mut failed = false;
    for path in paths {
        let (items, problems) = check_file(path)?;
        failed |= !problems.is_empty();
        if as_json {
            reports.push(json!({"file": path.display().to_string(), "ok": problems.is_empty(), "items": items, "problems": problems}));
        } else if problems.is_empty() {
            crate::say!("ok    {}: {}", path.display(), items.join(", "));
        } else {
            crate::say!(
                "error {}: {} problem{}",
                path.display(),
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for p in &problems {
                let at = if p.pointer.is_empty() {
                    "/"
                } else {
                    &p.pointer
                };
                crate::say!("  {at}: {}", p.message);
                if let Some(fix) = &p.fix {
                    crate::say!("      fix: {fix}");
                }
            }
        }
    }
    if as_json {
        crate::say!(
            "{}",
            serde_json::to_string_pretty(&Value::Array(reports)).map_err(|e| e.to_string())?
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Descriptions of what a file holds, and its problems.
fn check_file(path: &std::path::Path) -> Result<(Vec<String>, Vec<Diagnostic>), String> {
    let value = match files::read_json(path)? {
        Ok(v) => v,
        Err(d) => return Ok((Vec::new(), vec![d])),
    };
    let mut items = Vec::new();
    let mut problems = Vec::new();
    match files::parse(&value) {
        FileContent::Tenant(Ok(refer)) => {
            let n = refer.as_ref().map_or(0, |r| r.destinations.len());
            items.push(format!(
                "tenant config ({n} transfer destination{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        FileContent::Tenant(Err(d)) => problems.extend(d),
        FileContent::Tools(tools) => {
            for (label, parsed) in tools {
                match parsed {
                    Ok(t) => items.push(format!(
                        "tool `{}` ({} side effect)",
                        t.name(),
                        format!("{:?}", t.side_effect()).to_lowercase()
                    )),
                    Err(d) => {
                        let _ = label;
                        problems.extend(d.0);
                    }
                }
            }
        }
    }
    Ok((items, problems))
}
