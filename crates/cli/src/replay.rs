//! `switchboard replay`: a tool's recorded calls replayed on a server against a draft file (or a
//! stored version), printing which calls the change would alter. Nothing is performed.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Map, Value, json};

use crate::say;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The tool whose recorded invocations are replayed.
    pub tool: String,
    /// A draft definition (a JSON file) to replay against; without it, `--version` or the
    /// current version.
    #[arg(long)]
    pub draft: Option<PathBuf>,
    /// A stored version to replay against.
    #[arg(long, conflicts_with = "draft")]
    pub version: Option<i64>,
    /// How many of the tool's newest recorded invocations (1 to 200).
    #[arg(long, default_value_t = 50)]
    pub last: u32,
    /// Replay the tool's invocations in this call (repeat for several) instead of the newest.
    #[arg(long = "call")]
    pub calls: Vec<String>,
    /// The server's base URL.
    #[arg(long, env = "SWITCHBOARD_URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// A tenant API key of the server.
    #[arg(long, env = "SWITCHBOARD_API_KEY", hide_env_values = true)]
    pub key: String,
    /// Print the server's whole report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the replay; exits 1 when a recorded call that passed would now fail.
pub fn replay(args: &ReplayArgs) -> Result<ExitCode, String> {
    let mut body = Map::new();
    if let Some(path) = &args.draft {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the draft {}: {e}", path.display()))?;
        let def: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "the draft {} is not JSON ({e}); write the tool definition as a JSON object",
                path.display()
            )
        })?;
        body.insert("definition".into(), def);
    }
    if let Some(v) = args.version {
        body.insert("version".into(), json!(v));
    }
    body.insert("last".into(), json!(args.last));
    if !args.calls.is_empty() {
        body.insert("calls".into(), json!(args.calls));
    }
    let url = format!(
        "{}/v1/tools/{}:replay",
        args.server.trim_end_matches('/'),
        args.tool
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let (status, report) = runtime.block_on(async {
        let resp = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&args.key)
            .json(&Value::Object(body))
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot reach {} ({e}); check --server and that the server runs",
                    args.server
                )
            })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| format!("the answer from {url} broke off: {e}"))?;
        let report: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok::<_, String>((status, report))
    })?;
    if !status.is_success() {
        let message = report["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| report.to_string());
        let details = match &report["error"]["details"] {
            Value::Array(problems) => problems
                .iter()
                .map(|p| {
                    format!(
                        "\n  {}: {} ({})",
                        p["pointer"].as_str().unwrap_or(""),
                        p["message"].as_str().unwrap_or(""),
                        p["fix"].as_str().unwrap_or("")
                    )
                })
                .collect::<String>(),
            _ => String::new(),
        };
        return Err(format!("the server answered {status}: {message}{details}"));
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_report(&report);
    }
    let failing = report["summary"]["newly_failing"].as_u64().unwrap_or(0);
    Ok(if failing > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_report(report: &Value) {
    let s = &report["summary"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    say!(
        "{} replayed: {} unchanged, {} changed, {} newly failing, {} newly passing, {} skipped",
        n("total"),
        n("unchanged"),
        n("changed"),
        n("newly_failing"),
        n("newly_passing"),
        n("skipped")
    );
    for inv in report["invocations"].as_array().into_iter().flatten() {
        let verdict = inv["verdict"].as_str().unwrap_or("");
        if verdict == "unchanged" {
            continue;
        }
        say!(
            "\n{} {} / {}: {verdict}",
            mark(verdict),
            inv["call_id"].as_str().unwrap_or(""),
            inv["function_call_id"].as_str().unwrap_or("")
        );
        if let Some(reason) = inv["reason"].as_str() {
            say!("  {reason}");
            continue;
        }
        say!("  arguments: {}", inv["arguments"]);
        if inv["output_changed"] == true {
            say!("  - output: {}", inv["recorded_output"]);
            say!("  + output: {}", inv["replayed_output"]);
        }
        if inv["writes_changed"] == true {
            say!("  - writes: {}", inv["recorded_writes"]);
            say!("  + writes: {}", inv["replayed_writes"]);
        }
        for e in inv["effects"].as_array().into_iter().flatten() {
            if e["status"] == "diverged" {
                say!("  ! diverged effect: {}", describe(&e["request"]));
            }
        }
        for r in inv["effects_not_requested"]
            .as_array()
            .into_iter()
            .flatten()
        {
            say!("  - no longer requested: {}", describe(r));
        }
    }
}

fn mark(verdict: &str) -> &'static str {
    match verdict {
        "newly_failing" => "✗",
        "newly_passing" => "✓",
        "skipped" => "·",
        _ => "~",
    }
}

/// One line for an effect request: `GET https://…` for HTTP, else its kind.
fn describe(request: &Value) -> String {
    match request["kind"].as_str() {
        Some("http") => format!(
            "{} {}",
            request["method"].as_str().unwrap_or(""),
            request["url"].as_str().unwrap_or("")
        ),
        Some(kind) => format!("{kind} {request}"),
        None => request.to_string(),
    }
}
