//! `switchboard run FILE --params JSON`: run one tool and print what the model receives.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use switchboard_core::effect::HttpResponse;

use switchboard_core::{
    CallInfo, Context, EffectOutcome, EffectRequest, RunInput, Tool, run_to_end,
};
use switchboard_runtime::effects::{CallAction, TransferLedger};
use switchboard_runtime::executor::OpenGate;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::{CallConfig, Effects, Executor, Invocation, ToolEntry};

use crate::files::{self, FileContent};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The tool file.
    file: PathBuf,
    /// The arguments, as the model would send them (a JSON object).
    #[arg(long, default_value = "{}")]
    params: String,
    /// The call's context: `{"user": {...}, "workflow": {...}, "agents": {...}, "flags": {...}}`.
    #[arg(long)]
    context: Option<String>,
    /// Do not perform effects: print each and answer it with a stub (HTTP 200 `{}`).
    #[arg(long)]
    dry_run: bool,
    /// A tenant config, for `transfer` actions naming a destination.
    #[arg(long)]
    tenant: Option<PathBuf>,
    /// Let `api_call` reach loopback and private addresses (refused by default, as in `serve`).
    #[arg(long)]
    allow_private_network: bool,
}

pub fn run(args: &RunArgs) -> Result<ExitCode, String> {
    let value =
        files::read_json(&args.file)?.map_err(|d| format!("{}: {d}", args.file.display()))?;
    let tool = match files::parse(&value) {
        FileContent::Tools(mut tools) if tools.len() == 1 => match tools.remove(0) {
            (_, Ok(t)) => Arc::new(t),
            (_, Err(d)) => {
                return Err(format!(
                    "{} is invalid: {d}\nrun `switchboard validate {}` for details",
                    args.file.display(),
                    args.file.display()
                ));
            }
        },
        FileContent::Tools(_) => {
            return Err(format!(
                "{} holds several tools; run takes a file with one",
                args.file.display()
            ));
        }
        FileContent::Tenant(_) => {
            return Err(format!(
                "{} is a tenant config, not a tool",
                args.file.display()
            ));
        }
    };
    let context = build_context(args.context.as_deref())?;
    let mut input = RunInput::new("call_cli");
    if let Some(path) = &args.tenant {
        let v = files::read_json(path)?.map_err(|d| format!("{}: {d}", path.display()))?;
        if let FileContent::Tenant(Ok(Some(refer))) = files::parse(&v) {
            input.refer = Some(Arc::new(refer));
        }
    }
    let outcome = if args.dry_run {
        let mut n = 0;
        run_to_end(&tool, input, &args.params, &context, |req| {
            n += 1;
            eprintln!("effect {n} (dry run): {}", describe(req));
            stub(req)
        })
    } else {
        perform(
            &tool,
            input,
            &args.params,
            &context,
            args.allow_private_network,
        )?
    };
    for w in &outcome.writes {
        eprintln!("write: {}", serde_json::to_string(w).unwrap_or_default());
    }
    if let Some(h) = &outcome.handoff {
        eprintln!("handoff: to agent `{}`", h.agent);
    }
    for l in &outcome.logs {
        eprintln!("log {:?} at {}: {}", l.level, l.action, l.message);
    }
    crate::say!(
        "{}",
        serde_json::to_string_pretty(&outcome.output()).map_err(|e| e.to_string())?
    );
    Ok(if outcome.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs the tool with real effects: HTTP requests are sent; transfers and hang-ups are printed,
/// as there is no live call to move.
fn perform(
    tool: &Arc<Tool>,
    input: RunInput,
    params: &str,
    context: &Context,
    allow_private: bool,
) -> Result<switchboard_core::Outcome, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let http = HttpEffects::new(HttpConfig {
            allow_private_networks: allow_private,
            ..HttpConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let executor = Executor::new(Arc::new(Effects::http_only(Arc::new(http))));
        let agent = context.active_agent().to_owned();
        let mut config = CallConfig {
            tenant_id: "cli".into(),
            refer: input.refer.clone(),
            ..CallConfig::default()
        };
        config.agents.insert(
            agent,
            HashMap::from([(tool.name().to_owned(), ToolEntry::new(Arc::clone(tool)))]),
        );
        let invocation = Invocation {
            call_id: "call_cli".into(),
            function_call_id: input.function_call_id.clone(),
            name: tool.name().to_owned(),
            arguments_json: params.to_owned(),
            response_id: None,
            item_id: None,
        };
        let exec = executor
            .execute(
                &config,
                context,
                &invocation,
                &OpenGate,
                &TransferLedger::default(),
            )
            .await;
        for action in &exec.call_actions {
            match action {
                CallAction::Transfer { target_uri } => {
                    eprintln!("call action: transfer the call to {target_uri}")
                }
                CallAction::Hangup { message } => eprintln!(
                    "call action: hang up{}",
                    message
                        .as_ref()
                        .map(|m| format!(" after saying {m:?}"))
                        .unwrap_or_default()
                ),
            }
        }
        eprintln!("took {:.1} ms", exec.elapsed.as_secs_f64() * 1000.0);
        Ok(exec.outcome)
    })
}

fn build_context(text: Option<&str>) -> Result<Context, String> {
    let given: Value = match text {
        Some(t) => {
            serde_json::from_str(t).map_err(|e| format!("--context is not valid JSON: {e}"))?
        }
        None => json!({}),
    };
    let call = CallInfo {
        id: "call_cli".into(),
        tenant_id: "cli".into(),
        agent: "default".into(),
        from: None,
        to: None,
        started_at: "1970-01-01T00:00:00Z".into(),
    };
    Context::from_json(call, &given).map_err(|e| format!("--context: {e}"))
}

fn describe(req: &EffectRequest) -> String {
    match req {
        EffectRequest::Http(h) => {
            let body = h
                .body
                .as_ref()
                .map(|b| format!(" body {b}"))
                .unwrap_or_default();
            format!("{} {}{body}", h.method, h.url)
        }
        EffectRequest::Transfer(t) => format!("transfer the call to {}", t.target_uri),
        EffectRequest::EndCall(e) => format!(
            "end the call{}",
            e.message
                .as_ref()
                .map(|m| format!(" after saying {m:?}"))
                .unwrap_or_default()
        ),
        EffectRequest::Mcp(m) => format!("MCP {}/{} {}", m.server, m.tool, m.arguments),
        EffectRequest::Toolkit(t) => format!(
            "{} {}",
            t.action,
            serde_json::Value::Object(t.fields.clone())
        ),
    }
}

fn stub(req: &EffectRequest) -> EffectOutcome {
    match req {
        EffectRequest::Http(_) => EffectOutcome::Http(HttpResponse {
            status: 200,
            headers: Map::new(),
            body: json!({}),
        }),
        _ => EffectOutcome::Done { value: Value::Null },
    }
}
