//! `switchboard schema FILE... --format F`: the toolset as one provider's model sees it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use switchboard_core::builder::{Format, ToolChoice, Toolset};
use switchboard_core::transfer::build_refer_function;

use crate::files::{self, FileContent};

pub fn schema(
    paths: &[PathBuf],
    format: &str,
    strict: bool,
    tenant: Option<&Path>,
    choice: Option<&str>,
) -> Result<ExitCode, String> {
    let format: Format = format.parse().map_err(|e| format!("{e}"))?;
    let mut functions = Vec::new();
    for path in paths {
        let value = files::read_json(path)?.map_err(|d| format!("{}: {d}", path.display()))?;
        match files::parse(&value) {
            FileContent::Tools(tools) => {
                for (label, parsed) in tools {
                    let tool = parsed.map_err(|d| format!("{} (tool {label}) is invalid: {d}; run `switchboard validate` for details", path.display()))?;
                    functions.push(tool.function_def(strict));
                }
            }
            FileContent::Tenant(_) => {
                return Err(format!(
                    "{} is a tenant config: pass it with --tenant",
                    path.display()
                ));
            }
        }
    }
    if let Some(path) = tenant {
        let value = files::read_json(path)?.map_err(|d| format!("{}: {d}", path.display()))?;
        match files::parse(&value) {
            FileContent::Tenant(Ok(Some(refer))) => {
                functions.extend(build_refer_function(&refer).map(std::sync::Arc::new))
            }
            FileContent::Tenant(Ok(None)) => {}
            FileContent::Tenant(Err(problems)) => {
                let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                return Err(format!(
                    "{} is invalid: {}",
                    path.display(),
                    list.join("; ")
                ));
            }
            FileContent::Tools(_) => {
                return Err(format!(
                    "{} is not a tenant config (it has no `features`)",
                    path.display()
                ));
            }
        }
    }
    let choice = choice
        .map(str::parse::<ToolChoice>)
        .transpose()
        .map_err(|e| e.to_string())?;
    let toolset = Toolset::build(functions, choice).map_err(|e| e.to_string())?;
    crate::say!(
        "{}",
        serde_json::to_string_pretty(&toolset.render(format)).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}
