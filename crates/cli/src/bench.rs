//! `switchboard bench calls`: the end-to-end load generator. It plays OpenAI (the Realtime SIP
//! simulator, or with `--api live` its GPT-Live side) for a running server: rings N calls
//! through the server's webhook, and in each call has the model call a tool without I/O over
//! and over, timing each one from the function call sent (Realtime's
//! `response.function_call_arguments.done`, GPT-Live's nested `response.output_item.done`) to
//! its output received (`conversation.item.create` / `response.item.create`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use switchboard_sim::{LiveBackend, ModelHandle, Simulator};
use tokio::sync::Mutex;

const OPENAI_KEY: &str = "sk-bench";
const SECRET: &str = "whsec_YmVuY2gtd2ViaG9vay1zZWNyZXQtMDEyMzQ1Njc4OQ==";
const NUMBER: &str = "+18005550199";

/// Options of `bench calls`.
#[derive(Debug, Args)]
pub struct CallsArgs {
    /// Calls live at once.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Seconds of measured traffic once every call is up.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Pause between one tool call's answer and the next tool call in the same call
    /// (milliseconds; jittered ±50%). A phone call asks for a tool every few seconds; 0 sends
    /// the next at once (saturation).
    #[arg(long, default_value_t = 1000)]
    think_ms: u64,
    /// A running server to drive (it must have been started with `--openai-api-base
    /// http://<sim-listen>/v1`). Without it, a server is started for the run on a temporary
    /// SQLite database.
    #[arg(long, requires = "admin_key")]
    server: Option<String>,
    /// An admin key of `--server`.
    #[arg(long, env = "SWITCHBOARD_ADMIN_KEY")]
    admin_key: Option<String>,
    /// Where the simulated OpenAI listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    sim_listen: SocketAddr,
    /// The server's process id, to read its memory (known when the bench starts the server).
    #[arg(long)]
    server_pid: Option<u32>,
    /// The database of the server started for the run (default: a temporary SQLite file).
    #[arg(long)]
    database: Option<String>,
    /// Print the figures as JSON too.
    #[arg(long)]
    json: bool,
    /// The OpenAI API that answers the calls.
    #[arg(long, value_enum, default_value_t = BenchApi::Realtime)]
    api: BenchApi,
}

/// `--api`: which OpenAI API the simulated calls use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchApi {
    /// OpenAI Realtime over SIP.
    Realtime,
    /// GPT-Live over SIP (a backend model calls the tools over the sideband).
    Live,
}

/// One simulated call, as the bench drives it.
enum Line {
    Realtime(ModelHandle),
    Live(LiveBackend),
}

impl Line {
    /// One tool call and its answer; the time from the call sent to its output received.
    async fn tool_call(&mut self, n: u64) -> Option<Duration> {
        match self {
            Line::Realtime(m) => {
                let fc = format!("call_{n}");
                let r = m.start_response().await;
                let t0 = Instant::now();
                m.function_call(&r, &fc, "echo", r#"{"text":"hello"}"#)
                    .await;
                m.finish_response(&r, "completed").await;
                let elapsed = wait_output(m, &fc, t0).await?;
                // The answer's response.create starts a response: the model says its piece.
                if m.recv_type("response.create", Duration::from_secs(10))
                    .await
                    .is_some()
                    && let Some(active) = m.active_response()
                {
                    m.finish_response(&active, "completed").await;
                }
                Some(elapsed)
            }
            Line::Live(b) => {
                let t0 = Instant::now();
                let ids = b.call_tools(&[("echo", json!({"text": "hello"}))]);
                let id = ids.first()?.clone();
                let mut elapsed = None;
                // The output, then the one continuation.
                while let Some(ev) = b.recv(Duration::from_secs(10)).await {
                    match ev["type"].as_str() {
                        Some("response.item.create") if ev["item"]["call_id"] == id.as_str() => {
                            elapsed = Some(t0.elapsed());
                        }
                        Some("response.create") if elapsed.is_some() => break,
                        _ => {}
                    }
                }
                elapsed
            }
        }
    }
}

/// A server started for the run, stopped when dropped.
struct Spawned {
    child: Child,
    dir: PathBuf,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn calls(args: &CallsArgs) -> Result<ExitCode, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(run(args))
}

async fn run(args: &CallsArgs) -> Result<ExitCode, String> {
    if args.concurrency == 0 {
        return Err("--concurrency must be at least 1".into());
    }
    let sim = Simulator::start_on(args.sim_listen)
        .await
        .map_err(|e| format!("cannot start the simulator on {}: {e}", args.sim_listen))?;
    sim.set_api_key(OPENAI_KEY);
    let (base, admin, spawned) = match (&args.server, &args.admin_key) {
        (Some(s), Some(k)) => (s.trim_end_matches('/').to_owned(), k.clone(), None),
        _ => {
            let (base, admin, spawned) =
                spawn_server(&sim.base_url(), args.database.as_deref()).await?;
            (base, admin, Some(spawned))
        }
    };
    let pid = args.server_pid.or(spawned.as_ref().map(|s| s.child.id()));
    let http = reqwest::Client::new();
    let tenant = format!("bench-{}", fastrand::u32(..));
    setup(&http, &base, &admin, &tenant, args.api).await?;
    let hook = format!("{base}/v1/realtime/webhook/{tenant}");
    eprintln!(
        "bench: {} {} calls against {base}, {} s measured, think time {} ms",
        args.concurrency,
        match args.api {
            BenchApi::Realtime => "Realtime",
            BenchApi::Live => "GPT-Live",
        },
        args.duration,
        args.think_ms
    );

    // Ring every call, then measure.
    let rss_before = pid.and_then(rss_kib);
    let bar = ProgressBar::new(args.concurrency as u64).with_style(
        ProgressStyle::with_template("ringing  {bar:40} {pos}/{len} calls")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut models = Vec::with_capacity(args.concurrency);
    let mut ring = tokio::task::JoinSet::new();
    for i in 0..args.concurrency {
        let sim = sim.clone();
        let hook = hook.clone();
        let api = args.api;
        ring.spawn(async move {
            let (id, status) = match api {
                BenchApi::Realtime => {
                    let id = format!("rtc_bench_{i}");
                    let status = sim
                        .send_incoming_call(&hook, SECRET, &id, "+14155550100", NUMBER)
                        .await?;
                    (id, status)
                }
                BenchApi::Live => {
                    let id = format!("live_bench_{i}");
                    let status = sim
                        .live()
                        .send_incoming(&hook, SECRET, &id, "+14155550100", NUMBER, false)
                        .await?;
                    (id, status)
                }
            };
            if status != 200 {
                return Err(format!("the webhook answered {status} for {id}"));
            }
            let attached = match api {
                BenchApi::Realtime => sim
                    .model(&id, Duration::from_secs(60))
                    .await
                    .map(Line::Realtime),
                BenchApi::Live => sim
                    .live()
                    .backend(&id, Duration::from_secs(60))
                    .await
                    .map(Line::Live),
            };
            attached.ok_or_else(|| format!("call {id} was not attached within 60 s"))
        });
        // A burst of webhooks is not what is measured: ring at a steady pace.
        if i % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    while let Some(r) = ring.join_next().await {
        models.push(r.map_err(|e| e.to_string())??);
        bar.inc(1);
    }
    bar.finish_and_clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_live = pid.and_then(rss_kib);

    let samples = Arc::new(Mutex::new(Vec::<u32>::new()));
    let errors = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs(args.duration);
    let bar = ProgressBar::new(args.duration).with_style(
        ProgressStyle::with_template("measuring {bar:40} {pos}/{len} s  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut calls = tokio::task::JoinSet::new();
    for mut m in models {
        let samples = Arc::clone(&samples);
        let errors = Arc::clone(&errors);
        let done = Arc::clone(&done);
        let think = args.think_ms;
        calls.spawn(async move {
            let mut local = Vec::new();
            // Spread the calls' first tool calls over one think time.
            if think > 0 {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(0..think))).await;
            }
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                match m.tool_call(n).await {
                    Some(elapsed) => {
                        local.push(elapsed.as_micros().min(u128::from(u32::MAX)) as u32);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
                if think > 0 {
                    let jittered = think / 2 + fastrand::u64(0..=think);
                    tokio::time::sleep(Duration::from_millis(jittered)).await;
                }
            }
            samples.lock().await.extend(local);
        });
    }
    let ticker = {
        let bar = bar.clone();
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let secs = started.elapsed().as_secs();
                bar.set_position(secs);
                let n = done.load(Ordering::Relaxed);
                bar.set_message(format!("{n} tool calls"));
            }
        })
    };
    while let Some(r) = calls.join_next().await {
        r.map_err(|e| e.to_string())?;
    }
    ticker.abort();
    bar.finish_and_clear();
    let wall = started.elapsed();

    let mut s = std::mem::take(&mut *samples.lock().await);
    s.sort_unstable();
    let pct = |p: f64| -> f64 {
        if s.is_empty() {
            return 0.0;
        }
        let i = ((s.len() as f64 - 1.0) * p).round() as usize;
        f64::from(s[i.min(s.len() - 1)]) / 1000.0
    };
    let per_call_kib = match (rss_before, rss_live) {
        (Some(a), Some(b)) => Some((b.saturating_sub(a)) as f64 / args.concurrency as f64),
        _ => None,
    };
    let report = json!({
        "api": match args.api { BenchApi::Realtime => "realtime", BenchApi::Live => "live" },
        "concurrency": args.concurrency,
        "duration_s": wall.as_secs_f64(),
        "think_ms": args.think_ms,
        "tool_calls": s.len(),
        "errors": errors.load(Ordering::Relaxed),
        "throughput_per_s": s.len() as f64 / wall.as_secs_f64(),
        "overhead_ms": {"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0)},
        "server_rss_kib": {"before_calls": rss_before, "with_calls": rss_live},
        "memory_per_call_kib": per_call_kib,
    });
    crate::say!("concurrent calls   {}", args.concurrency);
    crate::say!(
        "tool calls         {} in {:.1} s ({:.0}/s), {} errors",
        s.len(),
        wall.as_secs_f64(),
        s.len() as f64 / wall.as_secs_f64(),
        errors.load(Ordering::Relaxed)
    );
    crate::say!(
        "overhead (ms)      p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0)
    );
    match per_call_kib {
        Some(k) => crate::say!(
            "memory per call    {k:.1} KiB (server RSS {} → {} KiB)",
            rss_before.unwrap_or(0),
            rss_live.unwrap_or(0)
        ),
        None => crate::say!("memory per call    unknown (give --server-pid)"),
    }
    if args.json {
        crate::say!("{report}");
    }
    drop(spawned);
    sim.shutdown();
    Ok(if errors.load(Ordering::Relaxed) == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Waits for the output of `fc`; the time since `function_call_arguments.done` was sent.
async fn wait_output(m: &mut ModelHandle, fc: &str, t0: Instant) -> Option<Duration> {
    loop {
        let ev = m
            .recv_type("conversation.item.create", Duration::from_secs(10))
            .await?;
        if ev["item"]["call_id"] == fc {
            return Some(t0.elapsed());
        }
    }
}

/// A tenant with one tool without I/O, an agent answering the bench number, and the secrets.
async fn setup(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    tenant: &str,
    api: BenchApi,
) -> Result<(), String> {
    let call = |method: reqwest::Method, path: String, key: String, body: Value| {
        let req = http
            .request(method, format!("{base}{path}"))
            .bearer_auth(key)
            .json(&body);
        async move {
            let resp = req.send().await.map_err(|e| format!("{path}: {e}"))?;
            let status = resp.status();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{path} answered {status}: {body}"))
            }
        }
    };
    use reqwest::Method;
    call(
        Method::POST,
        "/v1/tenants".into(),
        admin.into(),
        json!({"id": tenant}),
    )
    .await?;
    let key = call(
        Method::POST,
        format!("/v1/tenants/{tenant}/api-keys"),
        admin.into(),
        json!({"label": "bench"}),
    )
    .await?["key"]
        .as_str()
        .ok_or("the new tenant key is missing")?
        .to_owned();
    let echo = json!({"name": "echo", "description": "Repeat the text.",
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "actions": [{"type": "respond", "message": "{{params.text}}"}]});
    call(Method::POST, "/v1/tools".into(), key.clone(), echo).await?;
    call(
        Method::PUT,
        "/v1/agents/bench".into(),
        key.clone(),
        json!({"instructions": "Echo.", "default": true, "tools": [{"tool": "echo"}]}),
    )
    .await?;
    call(
        Method::PUT,
        "/v1/features".into(),
        key.clone(),
        json!({"realtime": {"phone_numbers": {NUMBER: "bench"},
            "api": if api == BenchApi::Live { "live" } else { "realtime" }}}),
    )
    .await?;
    for (name, value) in [
        ("openai_api_key", OPENAI_KEY),
        ("openai_webhook_secret", SECRET),
    ] {
        call(
            Method::PUT,
            format!("/v1/secrets/{name}"),
            key.clone(),
            json!({"value": value}),
        )
        .await?;
    }
    Ok(())
}

/// Starts `switchboard serve` on a temporary SQLite database with OpenAI at the simulator.
async fn spawn_server(
    openai: &str,
    database: Option<&str>,
) -> Result<(String, String, Spawned), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let dir = std::env::temp_dir().join(format!("switchboard-bench-{}", fastrand::u32(..)));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let db = database
        .map(str::to_owned)
        .unwrap_or_else(|| format!("sqlite://{}", dir.join("bench.db").display()));
    let key_file = dir.join("master.key");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let admin = Command::new(&exe)
        .args(["key", "create", "--admin", "--database", &db, "--key-file"])
        .arg(&key_file)
        .output()
        .map_err(|e| format!("key create: {e}"))?;
    if !admin.status.success() {
        return Err(format!(
            "key create failed: {}",
            String::from_utf8_lossy(&admin.stderr)
        ));
    }
    let admin = String::from_utf8_lossy(&admin.stdout).trim().to_owned();
    let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
    let child = Command::new(&exe)
        .args(["serve", "--database", &db, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--key-file")
        .arg(&key_file)
        .args(["--openai-api-base", openai])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let spawned = Spawned { child, dir };
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..100 {
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return Ok((base, admin, spawned));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "the server did not become ready; see {}",
        spawned.dir.join("server.log").display()
    ))
}

/// A process's resident memory, from `/proc` (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
