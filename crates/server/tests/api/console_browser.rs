//! The console in a real browser: headless Chromium driven by Playwright
//! (`tests/browser/console.cjs`) against a real server seeded here with a tenant, its tool, its
//! agent and recorded calls. One browser start for the whole walk: sign-in, the editor's
//! diagnostics, replay, publish, editing an agent (a save, a problem at its line reached by
//! keyboard, a secret set and never shown, a new agent), the pages at 390 px wide in another
//! time zone (no sideways scroll, scroll areas reachable and named, times in the browser's zone,
//! the editor's line numbers, a single-spaced diff with folded lines, the icons), a live call's timeline following the HTTP door (its rows, what
//! the model received and its Context box), a long call's timeline loaded page by page back to
//! its first invocation, a timeline that stops when its session's key is revoked, connecting an agent's Google Calendar through
//! a consent page on another site (the Google simulator: the agent's page goes from never
//! connected to ok with its last refresh), a call booking through it whose timeline links to the
//! event, signing out (the old cookie then
//! opens nothing), another tenant seeing none of it, and the admin key's tenants page (create,
//! delete, sign out).
//!
//! `scripts/browser-peers.sh` installs Chromium and playwright-core (into `target/browser`). When
//! either is missing the test says so and passes, unless `SWITCHBOARD_BROWSER_TESTS=required`
//! (CI sets it), which makes the absence a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;
use serde_json::json;
use switchboard_server::ServerConfig;
use switchboard_server::state::GoogleSettings;
use switchboard_sim::google::{CLIENT_ID, CLIENT_SECRET, GoogleSim};
use switchboard_toolkits::oauth::OAuthProvider;

use crate::support::{Backend, acme, invoke, spawn_app_on};

/// How long the whole walk may take before it is stopped as hung.
const WALK_LIMIT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node_modules() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => root().join("target"),
    }
    .join("browser/node_modules")
}

fn chromium() -> PathBuf {
    std::env::var_os("SWITCHBOARD_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// What the walk needs and lacks; `None` when everything is there.
fn missing() -> Option<String> {
    let mut lacking = Vec::new();
    if !chromium().exists() {
        lacking.push(format!("Chromium at {}", chromium().display()));
    }
    if !node_modules().join("playwright-core/package.json").exists() {
        lacking.push(format!("playwright-core in {}", node_modules().display()));
    }
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        lacking.push("node on PATH".to_owned());
    }
    (!lacking.is_empty()).then(|| lacking.join(", "))
}

/// Whether `test` cannot run here (its peers are missing) and is skipped, saying so; with
/// `SWITCHBOARD_BROWSER_TESTS=required` a missing peer fails it instead.
fn skipped(test: &str) -> bool {
    let Some(lacking) = missing() else {
        return false;
    };
    let required = std::env::var("SWITCHBOARD_BROWSER_TESTS").is_ok_and(|v| v == "required");
    assert!(
        !required,
        "SWITCHBOARD_BROWSER_TESTS=required but the browser test lacks {lacking}: run scripts/browser-peers.sh"
    );
    eprintln!(
        "SKIPPED {test}: it lacks {lacking}; run scripts/browser-peers.sh (set SWITCHBOARD_BROWSER_TESTS=required to make this a failure)"
    );
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    if skipped("the_console_in_a_real_browser") {
        return;
    }

    // Google's consent page on another site than the server (`localhost`, not `127.0.0.1`), so
    // the flow cookie must ride a cross-site redirect back, as it does from Google.
    let sim = GoogleSim::start().await.expect("the Google simulator");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let consent_site = sim.auth_url().replace("127.0.0.1", "localhost");
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        google: Some(GoogleSettings {
            provider: OAuthProvider {
                client_id: CLIENT_ID.to_owned(),
                client_secret: SecretString::from(CLIENT_SECRET),
                auth_url: Url::parse(&consent_site).expect("url"),
                token_url: Url::parse(&sim.token_url()).expect("url"),
                redirect_url: Url::parse(&format!("{base}/v1/oauth/callback")).expect("url"),
                scopes: vec!["https://www.googleapis.com/auth/calendar.events".to_owned()],
            },
            api_base: Url::parse(&sim.api_base()).expect("url"),
        }),
        ..ServerConfig::default()
    };
    let app = spawn_app_on(listener, Backend::Sqlite, config, None).await;
    let key = acme(&app, "acme").await;
    // The walk records a long call's 450 invocations in a few seconds.
    crate::console::unguarded(&app, &key).await;
    let agent = json!({"instructions": "Book appointments.", "tools": [
        {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary"}}]});
    let (s, body) = app.put("/v1/agents/receptionist", &key, agent).await;
    assert_eq!(s, reqwest::StatusCode::OK, "{body}");
    let other = app.tenant("other").await;
    // Recorded calls: one ended call with three invocations (one refused by validation), and a
    // live call with none yet, for the page to follow.
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    for (fc, args) in [
        ("f1", json!({"meal_type": "lunch", "dishes": ["soup"]})),
        (
            "f2",
            json!({"meal_type": "dinner", "dishes": ["rice", "fish"]}),
        ),
        ("f3", json!({"meal_type": "breakfast", "dishes": []})),
    ] {
        invoke(&app, &key, "c1", fc, "save_meal", args).await;
    }
    app.delete("/v1/calls/c1", &key).await;
    app.post("/v1/calls", &key, json!({"call_id": "live-call"}))
        .await;
    // A second key of the tenant, revoked while its session follows another live call.
    app.post("/v1/calls", &key, json!({"call_id": "watch-call"}))
        .await;
    let (s, watcher) = app
        .post("/v1/api-keys", &key, json!({"label": "watcher"}))
        .await;
    assert_eq!(s, reqwest::StatusCode::CREATED, "{watcher}");

    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(root().join("crates/server/tests/browser/console.cjs"))
        .env("NODE_PATH", node_modules())
        .env("SB_BASE", &app.base)
        .env("SB_KEY", &key)
        .env("SB_OTHER_KEY", &other)
        .env("SB_ADMIN_KEY", &app.admin)
        .env("SB_LIVE_CALL", "live-call")
        .env("SB_RECORDED", "3")
        .env("SB_WATCH_KEY", watcher["key"].as_str().unwrap_or_default())
        .env(
            "SB_WATCH_KEY_ID",
            watcher["id"].as_str().unwrap_or_default(),
        )
        .env("SB_WATCH_CALL", "watch-call")
        .env("SB_GOOGLE_AGENT", "receptionist")
        .env("SB_CONSENT_SITE", &consent_site)
        .env("SB_CHROMIUM", chromium())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    // Screenshots only when asked for, into a directory named from the workspace's root.
    match std::env::var_os("SWITCHBOARD_CONSOLE_SCREENSHOTS") {
        Some(dir) => cmd.env("SWITCHBOARD_CONSOLE_SCREENSHOTS", root().join(dir)),
        None => cmd.env_remove("SWITCHBOARD_CONSOLE_SCREENSHOTS"),
    };
    let out = tokio::time::timeout(WALK_LIMIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("the browser walk did not finish in {WALK_LIMIT:?}"))
        .expect("run node tests/browser/console.cjs");
    app.stop().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("every step passed"), "{stdout}{stderr}");
}

/// The Alerts page in a real browser (`tests/browser/alerts.cjs`): the nav leads to it, a bad
/// rule's problems show at their pointers, a good one is made with its secret shown once, and a
/// confirmed delete reloads the list without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerts_page_in_a_real_browser() {
    if skipped("the_alerts_page_in_a_real_browser") {
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let app = spawn_app_on(listener, Backend::Sqlite, ServerConfig::default(), None).await;
    let key = app.tenant("acme").await;
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(root().join("crates/server/tests/browser/alerts.cjs"))
        .env("NODE_PATH", node_modules())
        .env("SB_BASE", &app.base)
        .env("SB_KEY", &key)
        .env("SB_CHROMIUM", chromium())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(WALK_LIMIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("the browser walk did not finish in {WALK_LIMIT:?}"))
        .expect("run node tests/browser/alerts.cjs");
    app.stop().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("every step passed"), "{stdout}{stderr}");
}
