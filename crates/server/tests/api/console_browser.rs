//! The console in a real browser: headless Chromium driven by Playwright
//! (`tests/browser/console.cjs`) against a real server seeded here with a tenant, its tool, its
//! agent and recorded calls. One browser start for the whole walk: sign-in, the editor's
//! diagnostics, replay, publish, a live call's timeline following the HTTP door, another
//! tenant seeing none of it, and the admin key's tenants page (create, delete, sign out).
//!
//! `scripts/browser-peers.sh` installs Chromium and playwright-core (into `target/browser`). When
//! either is missing the test says so and passes, unless `SWITCHBOARD_BROWSER_TESTS=required`
//! (CI sets it), which makes the absence a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::{Backend, acme, invoke, spawn_app};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    if let Some(lacking) = missing() {
        let required = std::env::var("SWITCHBOARD_BROWSER_TESTS").is_ok_and(|v| v == "required");
        assert!(
            !required,
            "SWITCHBOARD_BROWSER_TESTS=required but the browser test lacks {lacking}: run scripts/browser-peers.sh"
        );
        eprintln!(
            "SKIPPED the_console_in_a_real_browser: it lacks {lacking}; run scripts/browser-peers.sh (set SWITCHBOARD_BROWSER_TESTS=required to make this a failure)"
        );
        return;
    }

    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
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

    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(root().join("crates/server/tests/browser/console.cjs"))
        .env("NODE_PATH", node_modules())
        .env("SB_BASE", &app.base)
        .env("SB_KEY", &key)
        .env("SB_OTHER_KEY", &other)
        .env("SB_ADMIN_KEY", &app.admin)
        .env("SB_LIVE_CALL", "live-call")
        .env("SB_RECORDED", "3")
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
