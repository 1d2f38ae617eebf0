//! `switchboard`: validate tool files, print the function definitions a model sees, run a tool,
//! serve, and replay a tool's recorded calls against a draft.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod files;
mod google;
mod limits;
mod open_files;
mod replay;
mod run;
mod schema;
mod serve;
mod validate;

/// mimalloc rather than the system allocator: a server holds thousands of calls, each with
/// small buffers freed on other threads, where glibc's arenas spent a fifth of the CPU of a
/// tool call and kept freed memory resident (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A tool runtime for voice AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check tool definitions (and tenant configs); print every problem with its place and fix.
    Validate {
        /// Tool files (one tool, or a list of tools) or tenant config files (with `features`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the problems as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the function definitions a model sees for the tools in FILES.
    Schema {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// openai-realtime, openai-chat, openai-responses, anthropic or mcp.
        #[arg(long, short, default_value = "openai-realtime")]
        format: String,
        /// OpenAI strict mode: every property required, optional ones nullable.
        #[arg(long)]
        strict: bool,
        /// A tenant config whose `features.refer` adds the `request_transfer` function.
        #[arg(long)]
        tenant: Option<PathBuf>,
        /// auto, none, required, or a function name (default: auto with tools, none without).
        #[arg(long)]
        tool_choice: Option<String>,
    },
    /// Run one tool with the given arguments and print what the model receives.
    Run(run::RunArgs),
    /// Replay a tool's recorded calls on a server against a draft, performing nothing; print
    /// which calls the change would alter (exit 1 when one that passed would now fail).
    Replay(replay::ReplayArgs),
    /// Run the server (SQLite by default; PostgreSQL when DATABASE_URL says postgres://).
    Serve(Box<serve::ServeArgs>),
    /// Apply the database migrations.
    Migrate(serve::DbArgs),
    /// Manage tenants.
    #[command(subcommand)]
    Tenant(serve::TenantCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(serve::KeyCommand),
    /// Load generators.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Drive N concurrent simulated phone calls (OpenAI Realtime, simulated) through a server and
    /// print the tool-call overhead percentiles, throughput and memory per call.
    Calls(bench::CallsArgs),
}

/// Prints a line to stdout; a reader that went away (`switchboard validate | head`) ends the
/// program quietly instead of a panic.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { files, json } => validate::validate(&files, json),
        Command::Schema {
            files,
            format,
            strict,
            tenant,
            tool_choice,
        } => schema::schema(
            &files,
            &format,
            strict,
            tenant.as_deref(),
            tool_choice.as_deref(),
        ),
        Command::Run(args) => run::run(&args),
        Command::Replay(args) => replay::replay(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Migrate(db) => serve::migrate(&db),
        Command::Tenant(cmd) => serve::tenant(&cmd),
        Command::Key(cmd) => serve::key(&cmd),
        Command::Bench(BenchCommand::Calls(args)) => bench::calls(&args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
