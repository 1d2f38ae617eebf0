//! `switchboard bench calls`: the end-to-end load generator. It plays OpenAI (the Realtime SIP
//! simulator, or with `--api live` its GPT-Live side) for a running server: rings N calls
//! through the server's webhook, and in each call has the model call a tool over and over,
//! timing each one from the function call sent (Realtime's
//! `response.function_call_arguments.done`, GPT-Live's nested `response.output_item.done`) to
//! its output received (`conversation.item.create` / `response.item.create`). With `--api http`
//! it starts N calls with `POST /v1/calls` and times each `POST /v1/calls/{id}/invocations`.
//! The tool (`--tool`) answers without I/O, writes the call's context, or calls an upstream the
//! bench serves on loopback (answering after `--upstream-delay-ms`).
//!
//! Each tool call also has its dead air timed: the silence a caller would hear from the
//! model's function call to the first thing said (a filler's `response.create`, GPT-Live's
//! commentary, or the answer's continuation; on the HTTP door the answer), and the longest
//! silence after it until the answer's continuation (a filler's speech ends, the next thing is
//! heard). The simulated model speaks each filler for `--speak-ms`, so an answer ready
//! mid-filler shows whether it waits for the filler's end.

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
    /// Calls rung (or started) per second while the calls come up; the measuring starts once
    /// all are attached.
    #[arg(long, default_value_t = 2500, value_parser = clap::value_parser!(u32).range(1..))]
    ring_rate: u32,
    /// The door the calls come through: an OpenAI API, or the HTTP door.
    #[arg(long, value_enum, default_value_t = BenchApi::Realtime)]
    api: BenchApi,
    /// The tool each call calls.
    #[arg(long, value_enum, default_value_t = BenchTool::Echo)]
    tool: BenchTool,
    /// How long the loopback upstream of `--tool api` takes to answer (milliseconds).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    upstream_delay_ms: u64,
    /// How long the simulated model speaks each filler it is asked for (milliseconds), unless
    /// it is cancelled first (Realtime).
    #[arg(long, default_value_t = 2500, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    speak_ms: u64,
    /// Gives the tool `messages.delayed` said after this many milliseconds (none: the tool
    /// has no filler of its own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    filler_after_ms: Option<u64>,
    /// Gives the agent this `filler`: said for a tool without `messages.delayed` once the turn
    /// budget passes in silence, and at once once the tool is known to take longer (the
    /// adaptive policy).
    #[arg(long)]
    agent_filler: Option<String>,
    /// Starts the server with `--no-adaptive` (fillers and deadlines as the tool sets them),
    /// to compare with the adaptive policy in one session.
    #[arg(long)]
    no_adaptive: bool,
}

/// One timed tool call.
#[derive(Debug, Clone, Copy)]
struct Turn {
    /// From the function call sent to its output received.
    overhead: Duration,
    /// From the function call to the first thing the caller hears.
    dead_air: Duration,
    /// The longest silence after that until the answer's continuation (zero when the answer
    /// was the first thing heard).
    later_silence: Duration,
}

/// `--api`: which OpenAI API the simulated calls use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchApi {
    /// OpenAI Realtime over SIP.
    Realtime,
    /// GPT-Live over SIP (a backend model calls the tools over the sideband).
    Live,
    /// No OpenAI: calls started with `POST /v1/calls`, tools called with
    /// `POST /v1/calls/{id}/invocations`.
    Http,
}

/// `--tool`: what the tool called in every call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchTool {
    /// Answers from its arguments, no I/O (`respond`).
    Echo,
    /// Appends its argument to a list in the call's context (`context.set`), so every call
    /// writes its context through the journal.
    Write,
    /// POSTs its argument to an upstream the bench serves on loopback (`api_call`); a server
    /// given with `--server` must allow it (`serve --allow-private-network`).
    Api,
}

impl BenchTool {
    fn name(self) -> &'static str {
        match self {
            BenchTool::Echo => "echo",
            BenchTool::Write => "note",
            BenchTool::Api => "lookup",
        }
    }

    /// The arguments of the `n`th tool call of a call: distinct, so no write is taken for a
    /// repeat of the one before.
    fn arguments(self, n: u64) -> Value {
        json!({ "text": format!("hello {n}") })
    }

    /// The tool's definition; `upstream` is the bench's loopback server, `filler_after_ms`
    /// when it has a `messages.delayed`.
    fn definition(self, upstream: &str, filler_after_ms: Option<u64>) -> Value {
        let mut tool = self.bare_definition(upstream);
        if let Some(after) = filler_after_ms {
            tool["messages"] = json!({"delayed": "One moment, I'm looking that up.",
                "delayed_after_ms": after});
        }
        tool
    }

    fn bare_definition(self, upstream: &str) -> Value {
        let params = json!([{"name": "text", "type": "string", "required": true}]);
        match self {
            BenchTool::Echo => json!({"name": "echo", "description": "Repeat the text.",
                "parameters": params,
                "actions": [{"type": "respond", "message": "{{params.text}}"}]}),
            BenchTool::Write => json!({"name": "note", "description": "Note the text down.",
                "parameters": params,
                "actions": [{"type": "context.set", "data": {"notes[+]": "{{params.text}}"}},
                            {"type": "respond", "message": "Noted."}]}),
            BenchTool::Api => json!({"name": "lookup", "description": "Look the text up.",
                "parameters": params,
                "actions": [{"type": "api_call", "url": format!("{upstream}/lookup"),
                             "body": {"q": "{{params.text}}"}}],
                "on_success": [{"type": "respond", "message": "Found it."}]}),
        }
    }
}

/// One simulated call, as the bench drives it.
enum Line {
    Realtime(ModelHandle),
    Live(LiveBackend),
    /// A call of the HTTP door: its invocations URL, with the tenant's key.
    Http {
        http: reqwest::Client,
        url: String,
        key: String,
    },
}

impl Line {
    /// One tool call and its answer; the time from the call sent to its output received.
    async fn tool_call(&mut self, tool: BenchTool, n: u64, speak: Duration) -> Option<Turn> {
        let args = tool.arguments(n);
        match self {
            Line::Realtime(m) => realtime_turn(m, tool, n, speak).await,
            Line::Live(b) => {
                let t0 = Instant::now();
                let ids = b.call_tools(&[(tool.name(), args)]);
                let id = ids.first()?.clone();
                let mut overhead = None;
                let mut heard = Heard::new(t0);
                // The output, then the one continuation; commentary is heard as it comes (the
                // voice model speaks it without turns of its own).
                while let Some(ev) = b.recv(Duration::from_secs(30)).await {
                    match ev["type"].as_str() {
                        Some("session.commentary.append") if overhead.is_none() => {
                            heard.said(Instant::now());
                            heard.quiet(Instant::now() + speak);
                        }
                        Some("response.item.create") if ev["item"]["call_id"] == id.as_str() => {
                            overhead = Some(t0.elapsed());
                        }
                        Some("response.create") if overhead.is_some() => {
                            heard.said(Instant::now());
                            break;
                        }
                        _ => {}
                    }
                }
                heard.turn(overhead?)
            }
            Line::Http { http, url, key } => {
                let body = json!({"function_call_id": format!("fc_{n}"), "name": tool.name(),
                    "arguments": args});
                let t0 = Instant::now();
                let resp = http
                    .post(url.as_str())
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await;
                let elapsed = t0.elapsed();
                let resp = resp.ok()?;
                let status = resp.status();
                let answer: Value = resp.json().await.ok()?;
                // An error answer (a failed tool) counts as an error, not a sample. The answer
                // is the first thing heard: this door has no fillers of its own.
                (status.is_success() && answer["ok"] == true).then_some(Turn {
                    overhead: elapsed,
                    dead_air: elapsed,
                    later_silence: Duration::ZERO,
                })
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
    crate::open_files::raise_for_bench(args.concurrency)?;
    let sim = Simulator::start_on(args.sim_listen)
        .await
        .map_err(|e| format!("cannot start the simulator on {}: {e}", args.sim_listen))?;
    sim.set_api_key(OPENAI_KEY);
    let (base, admin, spawned) = match (&args.server, &args.admin_key) {
        (Some(s), Some(k)) => (s.trim_end_matches('/').to_owned(), k.clone(), None),
        _ => {
            let (base, admin, spawned) =
                spawn_server(&sim.base_url(), args.database.as_deref(), args.no_adaptive).await?;
            (base, admin, Some(spawned))
        }
    };
    let pid = args.server_pid.or(spawned.as_ref().map(|s| s.child.id()));
    let http = reqwest::Client::new();
    let tenant = format!("bench-{}", fastrand::u32(..));
    let upstream = match args.tool {
        BenchTool::Api => {
            Some(Upstream::start(Duration::from_millis(args.upstream_delay_ms)).await?)
        }
        _ => None,
    };
    let upstream_url = upstream.as_ref().map(|u| u.url.clone()).unwrap_or_default();
    let key = setup(&http, &base, &admin, &tenant, args, &upstream_url).await?;
    let hook = format!("{base}/v1/realtime/webhook/{tenant}");
    eprintln!(
        "bench: {} {} calls against {base}, tool {}, {} s measured, think time {} ms",
        args.concurrency,
        match args.api {
            BenchApi::Realtime => "Realtime",
            BenchApi::Live => "GPT-Live",
            BenchApi::Http => "HTTP door",
        },
        args.tool.name(),
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
    let ring_start = Instant::now();
    let ring_gap = Duration::from_secs(1) / args.ring_rate;
    // How long each webhook took to be answered: a server that set calls up in the webhook's
    // own time would answer a burst late, and OpenAI would give up on the deliveries.
    let acks = Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));
    for i in 0..args.concurrency {
        // A burst of webhooks is not what is measured: ring at a steady pace.
        let due = ring_start + ring_gap * u32::try_from(i).unwrap_or(u32::MAX);
        if due > Instant::now() + Duration::from_millis(2) {
            tokio::time::sleep_until(due.into()).await;
        }
        let sim = sim.clone();
        let hook = hook.clone();
        let api = args.api;
        let (http, base, key) = (http.clone(), base.clone(), key.clone());
        let acks = Arc::clone(&acks);
        ring.spawn(async move {
            let sent = Instant::now();
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
                BenchApi::Http => return start_http_call(http, &base, key, i).await,
            };
            if let Ok(mut acks) = acks.lock() {
                acks.push(micros(sent.elapsed()));
            }
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
                BenchApi::Http => return Err("the HTTP door rings no call".into()),
            };
            attached.ok_or_else(|| format!("call {id} was not attached within 60 s"))
        });
    }
    while let Some(r) = ring.join_next().await {
        models.push(r.map_err(|e| e.to_string())??);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let rang_in = ring_start.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_live = pid.and_then(rss_kib);
    let cpu_before = (pid.and_then(cpu_time), cpu_time(std::process::id()));

    let samples = Arc::new(Mutex::new(Vec::<u32>::new()));
    let dead = Arc::new(Mutex::new((Vec::<u32>::new(), Vec::<u32>::new())));
    let slow = Arc::new(Mutex::new(Vec::<u32>::new()));
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
        let dead = Arc::clone(&dead);
        let speak = Duration::from_millis(args.speak_ms);
        let slow = Arc::clone(&slow);
        let errors = Arc::clone(&errors);
        let done = Arc::clone(&done);
        let think = args.think_ms;
        let tool = args.tool;
        calls.spawn(async move {
            let mut local = Vec::new();
            let (mut dead_air, mut later) = (Vec::new(), Vec::new());
            let mut slow_at = Vec::new();
            // Spread the calls' first tool calls over one think time.
            if think > 0 {
                pause(Duration::from_millis(fastrand::u64(0..think)), until).await;
            }
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                match m.tool_call(tool, n, speak).await {
                    Some(turn) => {
                        let elapsed = turn.overhead;
                        local.push(micros(elapsed));
                        dead_air.push(micros(turn.dead_air));
                        later.push(micros(turn.later_silence));
                        if elapsed > SLOW {
                            slow_at.push(micros(started.elapsed()) / 1000);
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
                if think > 0 {
                    let jittered = think / 2 + fastrand::u64(0..=think);
                    pause(Duration::from_millis(jittered), until).await;
                }
            }
            samples.lock().await.extend(local);
            {
                let mut d = dead.lock().await;
                d.0.extend(dead_air);
                d.1.extend(later);
            }
            slow.lock().await.extend(slow_at);
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
    let cpu_after = (pid.and_then(cpu_time), cpu_time(std::process::id()));

    let tenths = Tenths::of(std::mem::take(&mut *slow.lock().await));
    let mut s = std::mem::take(&mut *samples.lock().await);
    s.sort_unstable();
    let pct = |p: f64| percentile_ms(&s, p);
    let (mut dead_air, mut later) = std::mem::take(&mut *dead.lock().await);
    dead_air.sort_unstable();
    later.sort_unstable();
    let spread = |v: &[u32]| {
        json!({"p50": percentile_ms(v, 0.50), "p95": percentile_ms(v, 0.95),
            "p99": percentile_ms(v, 0.99), "max": percentile_ms(v, 1.0)})
    };
    let mut acks = acks
        .lock()
        .map(|mut a| std::mem::take(&mut *a))
        .unwrap_or_default();
    acks.sort_unstable();
    let per_call_kib = match (rss_before, rss_live) {
        (Some(a), Some(b)) => Some((b.saturating_sub(a)) as f64 / args.concurrency as f64),
        _ => None,
    };
    // CPU per tool call over the measured time, set-up excluded: what a tool call costs the
    // server, and what it costs the generator on the same cores.
    let per_call_us = |before: Option<Duration>, after: Option<Duration>| match (before, after) {
        (Some(b), Some(a)) if !s.is_empty() => {
            Some(a.saturating_sub(b).as_secs_f64() * 1e6 / s.len() as f64)
        }
        _ => None,
    };
    let server_cpu_us = per_call_us(cpu_before.0, cpu_after.0);
    let bench_cpu_us = per_call_us(cpu_before.1, cpu_after.1);
    let report = json!({
        "api": match args.api { BenchApi::Realtime => "realtime", BenchApi::Live => "live", BenchApi::Http => "http" },
        "tool": args.tool.name(),
        "concurrency": args.concurrency,
        "duration_s": wall.as_secs_f64(),
        "think_ms": args.think_ms,
        "tool_calls": s.len(),
        "errors": errors.load(Ordering::Relaxed),
        "throughput_per_s": s.len() as f64 / wall.as_secs_f64(),
        "overhead_ms": {"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0)},
        "upstream_delay_ms": args.upstream_delay_ms,
        "speak_ms": args.speak_ms,
        "filler_after_ms": args.filler_after_ms,
        "agent_filler": args.agent_filler,
        "adaptive": !args.no_adaptive,
        "dead_air_ms": spread(&dead_air),
        "later_silence_ms": spread(&later),
        "server_rss_kib": {"before_calls": rss_before, "with_calls": rss_live},
        "memory_per_call_kib": per_call_kib,
        "rang_in_s": rang_in.as_secs_f64(),
        "webhook_answer_ms": {"p50": percentile_ms(&acks, 0.5), "p99": percentile_ms(&acks, 0.99),
            "max": percentile_ms(&acks, 1.0)},
        "cpu_per_tool_call_us": {"server": server_cpu_us, "generator": bench_cpu_us},
        "over_5_ms": tenths.as_ref().map(|t| json!({"tool_calls": t.slow, "tenths": t.tenths,
            "worst_tenth": t.worst, "worst_at_s": f64::from(t.worst_at) / 10.0})),
    });
    crate::say!(
        "concurrent calls   {} (up in {:.1} s)",
        args.concurrency,
        rang_in.as_secs_f64()
    );
    if !acks.is_empty() {
        crate::say!(
            "webhooks answered  p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
            percentile_ms(&acks, 0.5),
            percentile_ms(&acks, 0.99),
            percentile_ms(&acks, 1.0)
        );
    }
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
    for (label, v) in [
        ("dead air (ms)     ", &dead_air),
        ("later silence (ms)", &later),
    ] {
        crate::say!(
            "{label} p50 {:.0}  p95 {:.0}  p99 {:.0}  max {:.0}",
            percentile_ms(v, 0.50),
            percentile_ms(v, 0.95),
            percentile_ms(v, 0.99),
            percentile_ms(v, 1.0)
        );
    }
    if let Some(t) = &tenths {
        crate::say!(
            "over 5 ms          {} tool calls, in {} tenths of a second; the worst tenth {} (at {:.1} s)",
            t.slow,
            t.tenths,
            t.worst,
            f64::from(t.worst_at) / 10.0
        );
    }
    match per_call_kib {
        Some(k) => crate::say!(
            "memory per call    {k:.1} KiB (server RSS {} → {} KiB)",
            rss_before.unwrap_or(0),
            rss_live.unwrap_or(0)
        ),
        None => crate::say!("memory per call    unknown (give --server-pid)"),
    }
    match (server_cpu_us, bench_cpu_us) {
        (Some(server), Some(bench)) => {
            crate::say!("CPU per tool call  server {server:.0} µs, this generator {bench:.0} µs")
        }
        (None, Some(bench)) => crate::say!(
            "CPU per tool call  server unknown (give --server-pid), this generator {bench:.0} µs"
        ),
        _ => {}
    }
    if args.json {
        crate::say!("{report}");
    }
    drop(spawned);
    drop(upstream);
    sim.shutdown();
    Ok(if errors.load(Ordering::Relaxed) == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Microseconds, as the samples keep them.
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// A tool call slower than this is counted by the tenth of a second it ended in.
const SLOW: Duration = Duration::from_millis(5);

/// When the slow tool calls ended, by tenths of a second of the measured time: a few tenths
/// holding many say the node stalled now and then (every call waiting at once); many tenths
/// holding one or two say each call met its own delay.
#[derive(Debug, PartialEq)]
struct Tenths {
    /// Tool calls over [`SLOW`].
    slow: usize,
    /// Tenths of a second in which at least one ended.
    tenths: usize,
    /// The most that ended in one tenth, and that tenth (from the measuring's start).
    worst: usize,
    worst_at: u32,
}

impl Tenths {
    /// `ended_ms`: when each slow tool call ended, in milliseconds from the measuring's start.
    fn of(mut ended_ms: Vec<u32>) -> Option<Tenths> {
        ended_ms.sort_unstable();
        let mut tenths = Tenths {
            slow: ended_ms.len(),
            tenths: 0,
            worst: 0,
            worst_at: 0,
        };
        for run in ended_ms.chunk_by(|a, b| a / 100 == b / 100) {
            tenths.tenths += 1;
            if run.len() > tenths.worst {
                tenths.worst = run.len();
                tenths.worst_at = run[0] / 100;
            }
        }
        (tenths.slow > 0).then_some(tenths)
    }
}

/// The `p` percentile (0 to 1) of sorted microseconds, in milliseconds; 0 for none.
fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)]) / 1000.0
}

/// Sleeps for `think`, but not past the end of the measuring: a think time longer than the
/// run must not hold the run open.
async fn pause(think: Duration, until: Instant) {
    let due = Instant::now() + think;
    tokio::time::sleep_until(due.min(until).into()).await;
}

/// What a caller hears during one tool call: when it first heard something, and the longest
/// silence after that.
struct Heard {
    t0: Instant,
    first: Option<Instant>,
    /// Silent since (a filler's speech ended or was cut), if silent now.
    quiet_since: Option<Instant>,
    longest: Duration,
}

impl Heard {
    fn new(t0: Instant) -> Heard {
        Heard {
            t0,
            first: None,
            quiet_since: None,
            longest: Duration::ZERO,
        }
    }

    /// Something is heard at `at`.
    fn said(&mut self, at: Instant) {
        if self.first.is_none() {
            self.first = Some(at);
        }
        if let Some(q) = self.quiet_since.take() {
            self.longest = self.longest.max(at.saturating_duration_since(q));
        }
    }

    /// The speech heard ends at `at`: silence from then on.
    fn quiet(&mut self, at: Instant) {
        self.quiet_since = Some(at);
    }

    fn turn(&self, overhead: Duration) -> Option<Turn> {
        Some(Turn {
            overhead,
            dead_air: self.first?.saturating_duration_since(self.t0),
            later_silence: self.longest,
        })
    }
}

/// One Realtime tool call played as the model would: the function call, each filler spoken for
/// `speak` (or until cancelled), then the answer's continuation.
async fn realtime_turn(
    m: &mut ModelHandle,
    tool: BenchTool,
    n: u64,
    speak: Duration,
) -> Option<Turn> {
    let fc = format!("call_{n}");
    let args = tool.arguments(n);
    let r = m.start_response().await;
    let t0 = Instant::now();
    m.function_call(&r, &fc, tool.name(), &args.to_string())
        .await;
    m.finish_response(&r, "completed").await;
    let deadline = t0 + Duration::from_secs(30);
    let mut heard = Heard::new(t0);
    let mut overhead = None;
    // The filler being spoken and when its speech ends.
    let mut speaking: Option<(String, Instant)> = None;
    loop {
        let until = speaking
            .as_ref()
            .map_or(deadline, |(_, end)| *end)
            .min(deadline);
        let wait = until.saturating_duration_since(Instant::now());
        let ev = match m.recv(wait).await {
            Some(ev) => ev,
            None => {
                let (response, end) = speaking.take()?;
                m.finish_response(&response, "completed").await;
                heard.quiet(end);
                continue;
            }
        };
        match ev["type"].as_str() {
            Some("conversation.item.create") if ev["item"]["call_id"] == fc.as_str() => {
                overhead = Some(t0.elapsed());
            }
            // The simulator ended the filler as cancelled: it stops being heard now.
            Some("response.cancel") if speaking.take().is_some() => heard.quiet(Instant::now()),
            Some("response.create") => {
                let now = Instant::now();
                heard.said(now);
                let Some(active) = m.active_response() else {
                    continue;
                };
                if ev.get("response").is_some() {
                    speaking = Some((active, now + speak));
                } else {
                    // The answer's continuation: the model says its piece.
                    m.finish_response(&active, "completed").await;
                    return heard.turn(overhead?);
                }
            }
            _ => {}
        }
    }
}

/// A tenant with one tool without I/O, an agent answering the bench number, and the secrets.
/// Makes the bench's tenant: its key (returned), the tool, an agent answering the bench's
/// number with the API asked for, and OpenAI's secrets.
async fn setup(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    tenant: &str,
    args: &CallsArgs,
    upstream: &str,
) -> Result<String, String> {
    let api = args.api;
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
    let tool = args.tool.definition(upstream, args.filler_after_ms);
    call(Method::POST, "/v1/tools".into(), key.clone(), tool).await?;
    call(
        Method::PUT,
        "/v1/agents/bench".into(),
        key.clone(),
        // A load generator calls faster than a conversation: the per-minute budget at its most.
        {
            let mut agent = json!({"instructions": "Help.", "default": true,
                "tools": [{"tool": args.tool.name()}],
                "guards": {"calls_per_minute": switchboard_core::guards::MAX_CALLS_PER_MINUTE}});
            if let Some(filler) = &args.agent_filler {
                agent["filler"] = json!(filler);
            }
            agent
        },
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
    Ok(key)
}

/// Starts the `i`th call of the HTTP door.
async fn start_http_call(
    http: reqwest::Client,
    base: &str,
    key: String,
    i: usize,
) -> Result<Line, String> {
    let id = format!("http_bench_{i}");
    let resp = http
        .post(format!("{base}/v1/calls"))
        .bearer_auth(&key)
        .json(&json!({"call_id": id}))
        .send()
        .await
        .map_err(|e| format!("POST /v1/calls ({id}): {e}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(format!("POST /v1/calls ({id}) answered {status}: {body}"));
    }
    Ok(Line::Http {
        url: format!("{base}/v1/calls/{id}/invocations"),
        http,
        key,
    })
}

/// The upstream of `--tool api`: answers every POST on loopback with a small JSON body, after
/// `--upstream-delay-ms`.
struct Upstream {
    url: String,
    server: tokio::task::JoinHandle<()>,
}

impl Upstream {
    async fn start(delay: Duration) -> Result<Upstream, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen for the bench's upstream: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = axum::Router::new().route(
            "/lookup",
            axum::routing::post(move || async move {
                tokio::time::sleep(delay).await;
                axum::Json(json!({"found": true}))
            }),
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app.into_make_service()).await;
        });
        Ok(Upstream {
            url: format!("http://{addr}"),
            server,
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts `switchboard serve` on a temporary SQLite database with OpenAI at the simulator.
async fn spawn_server(
    openai: &str,
    database: Option<&str>,
    no_adaptive: bool,
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
        // `--tool api` calls the bench's own upstream on loopback; `--api http` makes one
        // request per tool call, all for one tenant.
        .arg("--allow-private-network")
        .args(["--tenant-requests-per-second", "1000000"])
        .args(["--max-calls-per-tenant", "1000000"])
        .args(no_adaptive.then_some("--no-adaptive"))
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

/// The CPU time a process has used, user and system, from `/proc` (Linux; its clock ticks
/// are the kernel's fixed `USER_HZ`, 100 a second).
fn cpu_time(pid: u32) -> Option<Duration> {
    cpu_time_of(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// User and system time from the text of `/proc/<pid>/stat`.
fn cpu_time_of(stat: &str) -> Option<Duration> {
    // The command name, in parentheses, may hold spaces: the fields are counted after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 10))
}

/// A process's resident memory, from `/proc` (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_adds_user_and_system_ticks_after_the_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        let stat = "4242 (tokio rt) worker) S 1 4242 4242 0 -1 4194560 900 0 3 0 250 75 0 0 20 0 4";
        assert_eq!(cpu_time_of(stat), Some(Duration::from_millis(3_250)));
        assert_eq!(cpu_time_of("4242 (cut"), None);
        assert_eq!(cpu_time_of("4242 (x) S 1 2"), None);
        assert!(cpu_time(std::process::id()).is_some());
    }

    #[test]
    fn percentiles_read_sorted_microseconds_as_milliseconds() {
        let sorted: Vec<u32> = (1..=100).map(|n| n * 1000).collect();
        assert_eq!(percentile_ms(&sorted, 0.5), 51.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 99.0);
        assert_eq!(percentile_ms(&sorted, 1.0), 100.0);
        assert_eq!(percentile_ms(&[], 0.99), 0.0);
        assert_eq!(micros(Duration::from_secs(u64::MAX)), u32::MAX);
    }

    #[test]
    fn slow_tool_calls_are_counted_by_the_tenth_they_ended_in() {
        assert_eq!(Tenths::of(Vec::new()), None);
        let ended = vec![2_950, 120, 2_901, 199, 2_999, 5_000, 2_900];
        assert_eq!(
            Tenths::of(ended),
            Some(Tenths {
                slow: 7,
                tenths: 3,
                worst: 4,
                worst_at: 29,
            })
        );
    }
}
