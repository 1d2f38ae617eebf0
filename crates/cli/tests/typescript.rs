//! The TypeScript client (`clients/typescript`) and its `@openai/agents-realtime` and
//! `@livekit/agents` adapters: `tsc --strict` over the package, its tests and the README's
//! examples, then `node --test` against this build's `switchboard serve` (each test file starts
//! the binary itself on a free loopback port with a temporary SQLite database).
//!
//! The dependencies are `target/ts-client/node_modules`, installed once by
//! `scripts/ts-client-deps.sh` (`npm ci`, exact pins from package-lock.json). Without `node` the
//! test is skipped with a message, unless `SWITCHBOARD_TS_TESTS=required` (CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on the whole run (compile and tests): past it, node is killed and the test fails.
const LIMIT: Duration = Duration::from_secs(480);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node_available() -> bool {
    let found = Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("SWITCHBOARD_TS_TESTS").as_deref() != Ok("required"),
            "SWITCHBOARD_TS_TESTS=required but `node` is not on PATH: install Node.js 20 or newer"
        );
        eprintln!(
            "skipped: the TypeScript client's tests need Node.js 20+ (`node` is not on PATH); \
             set SWITCHBOARD_TS_TESTS=required to fail instead"
        );
    }
    found
}

/// The install directory (`target/ts-client`), made by the script on first use.
fn deps() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/ts-client-deps.sh"))
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/ts-client-deps.sh");
    assert!(
        out.status.success(),
        "scripts/ts-client-deps.sh could not install the TypeScript client's dependencies (the npm registry must be reachable): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Runs `program args` in clients/typescript within what is left of `deadline`; its output.
fn run(program: &Path, args: &[&str], deadline: Instant) -> String {
    let log = std::env::temp_dir().join(format!(
        "sb-ts-{}.log",
        std::iter::repeat_with(fastrand::lowercase)
            .take(10)
            .collect::<String>()
    ));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(repo().join("clients/typescript"))
        .env("SWITCHBOARD_BIN", env!("CARGO_BIN_EXE_switchboard"))
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&log).unwrap(),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
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
    let what = format!("{} {}", program.display(), args.join(" "));
    match status {
        Some(s) if s.success() => output,
        Some(s) => panic!("{what} failed ({s}):\n{output}"),
        None => panic!("{what} took longer than {LIMIT:?} in all; killed:\n{output}"),
    }
}

#[test]
fn typescript_client_and_adapters() {
    if !node_available() {
        return;
    }
    let dir = deps();
    let deadline = Instant::now() + LIMIT;
    let out = dir.join("out");
    let tsc = dir.join("node_modules/.bin/tsc");
    let out_arg = out.to_string_lossy().into_owned();
    // Strict type check of the package, its tests and the README's examples, emitting the tests.
    print!(
        "{}",
        run(
            &tsc,
            &["-p", "tsconfig.json", "--outDir", &out_arg],
            deadline
        )
    );
    // The files by name: node 20 and node 22 read a directory argument differently.
    let mut files: Vec<String> = std::fs::read_dir(out.join("test"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".test.js"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no compiled tests in {}", out.display());
    let mut args = vec!["--test", "--test-concurrency=1"];
    args.extend(files.iter().map(String::as_str));
    let output = run(Path::new("node"), &args, deadline);
    println!("{output}");
}
