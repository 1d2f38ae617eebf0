//! The Python client (`clients/python`) and its LiveKit Agents, Pipecat and OpenAI Agents SDK
//! adapters, tested with pytest against this build's `switchboard serve` (the suite starts the
//! binary itself on a free loopback port with a temporary SQLite database).
//!
//! The Python environment is `target/py-client`, made once by `scripts/py-client-venv.sh`
//! (pinned versions from PyPI). The LiveKit adapter's tests on the LiveKit Agents 2.0 pre-release
//! (`clients/python/tests_livekit2`) run in `target/py-client-lk2`, which
//! `scripts/py-client-venv.sh --livekit2` makes (CI does); without it that test says it is
//! skipped, unless `SWITCHBOARD_LIVEKIT2_TESTS=required`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on the whole pytest run: past it, pytest is killed and the test fails.
const LIMIT: Duration = Duration::from_secs(480);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's interpreter, made by the script on first use.
fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/py-client-venv.sh"))
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/py-client-venv.sh");
    assert!(
        out.status.success(),
        "scripts/py-client-venv.sh could not make the Python client's environment (PyPI must be reachable): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let path = PathBuf::from(path);
    if path.is_absolute() {
        path
    } else {
        repo().join(path)
    }
}

#[test]
fn python_client_and_adapters() {
    pytest(&python(), "tests");
}

#[test]
fn livekit_adapter_on_livekit_2() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        repo().join(target)
    };
    let python = target.join("py-client-lk2/bin/python");
    if !python.exists() {
        let required = std::env::var("SWITCHBOARD_LIVEKIT2_TESTS").as_deref() == Ok("required");
        let message = format!(
            "the LiveKit Agents 2.0 environment {} is missing: run `scripts/py-client-venv.sh --livekit2` (PyPI must be reachable)",
            python.display()
        );
        assert!(!required, "{message}");
        eprintln!("skipped livekit_adapter_on_livekit_2: {message}");
        return;
    }
    pytest(&python, "tests_livekit2");
}

/// Runs pytest on `dir` (under clients/python) with `python`, bounded by [`LIMIT`].
fn pytest(python: &Path, dir: &str) {
    let log = std::env::temp_dir().join(format!(
        "sb-pytest-{}.log",
        std::iter::repeat_with(fastrand::lowercase)
            .take(10)
            .collect::<String>()
    ));
    let mut child = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", dir])
        .current_dir(repo().join("clients/python"))
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("start pytest with {}: {e}", python.display()));
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    match status {
        Some(s) if s.success() => println!("{output}"),
        Some(s) => panic!("pytest (clients/python/{dir}) failed ({s}):\n{output}"),
        None => {
            panic!("pytest (clients/python/{dir}) took longer than {LIMIT:?}; killed:\n{output}")
        }
    }
}
