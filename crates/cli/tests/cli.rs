//! The `switchboard` command as a user runs it, on the project's examples.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use serde_json::Value;

fn switchboard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn validate_accepts_the_good_examples() {
    let out = switchboard(&[
        "validate",
        "examples/save_meal.json",
        "examples/acme-corp.json",
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("tool `save_meal` (write side effect)"));
}

#[test]
fn validate_reports_every_problem_and_exits_1() {
    let out = switchboard(&["validate", "--json", "examples/broken_tool.json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = report[0]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 13);
    assert!(
        problems
            .iter()
            .all(|p| p["pointer"].is_string() && p["message"].is_string() && p["fix"].is_string())
    );
    let human = switchboard(&["validate", "examples/broken_tool.json"]);
    assert!(stdout(&human).contains("/actions/0/type: unknown action type `context.sett`\n      fix: did you mean `context.set`?"));
}

#[test]
fn validate_names_json_syntax_errors() {
    let dir = std::env::temp_dir().join(format!("sb-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.json");
    std::fs::write(&file, "{\"name\": \"x\",\n}").unwrap();
    let out = switchboard(&["validate", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("line 2"), "{}", stdout(&out));
}

#[test]
fn schema_renders_tools_and_the_transfer_tool() {
    let out = switchboard(&[
        "schema",
        "examples/save_meal.json",
        "--tenant",
        "examples/acme-corp.json",
        "--format",
        "openai-realtime",
    ]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["save_meal", "request_transfer"]);
    assert_eq!(v["tool_choice"], "auto");
    let bad = switchboard(&["schema", "examples/save_meal.json", "--format", "gemini"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn dry_run_prints_effects_and_the_answer() {
    let args = [
        "run",
        "examples/save_meal.json",
        "--dry-run",
        "--params",
        r#"{"meal_type":"lunch","dishes":["soup"]}"#,
    ];
    let out = switchboard(&[&args[..], &["--context", r#"{"user": {"id": "u1"}}"#]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["message"], "I've logged your lunch!");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("effect 1 (dry run): POST https://api.example.com/meals")
    );
    let invalid = switchboard(&[
        "run",
        "examples/save_meal.json",
        "--dry-run",
        "--params",
        r#"{"meal_type":"brunch","dishes":["x"]}"#,
    ]);
    assert_eq!(invalid.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&invalid.stdout).unwrap();
    assert_eq!(v["error"], "invalid_arguments");
    // A template reading a user field the call does not have fails the tool, and says where.
    let no_user = switchboard(&args);
    assert_eq!(no_user.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&no_user.stderr)
            .contains("/actions/2 (api_call): `user.id` is undefined")
    );
}

#[tokio::test]
async fn run_performs_api_calls_for_real() {
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/meals"))
        .and(header("idempotency-key", "call_cli-call_cli-2"))
        .respond_with(ResponseTemplate::new(201))
        .expect(1)
        .mount(&server)
        .await;
    let mut def: Value =
        serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap();
    def["actions"][2]["url"] = Value::String(format!("{}/meals", server.uri()));
    let dir = std::env::temp_dir().join(format!("sb-cli-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("save_meal.json");
    std::fs::write(&file, def.to_string()).unwrap();
    let f = file.to_str().unwrap().to_owned();
    let args = [
        "run",
        &f,
        "--params",
        r#"{"meal_type":"lunch","dishes":["soup"]}"#,
        "--context",
        r#"{"user": {"id": "u1"}}"#,
    ];
    // The outbound guard refuses loopback unless told otherwise.
    let refused = tokio::task::spawn_blocking({
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || switchboard(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let allowed = tokio::task::spawn_blocking({
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.push("--allow-private-network".into());
        move || switchboard(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let v: Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert_eq!(v["message"], "I've logged your lunch!");
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "validate",
            "examples/broken_tool.json",
            "examples/save_meal.json",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serve_refuses_a_limits_file_with_an_unknown_limit() {
    let dir = std::env::temp_dir().join(format!("sb-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("limits.json");
    std::fs::write(
        &file,
        r#"{"max_json_depth": 32, "max_transform_outputs": 10}"#,
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.join("sb.db").display());
    let key = dir.join("master.key");
    let out = switchboard(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--database",
        &db,
        "--key-file",
        key.to_str().unwrap(),
        "--limits",
        file.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert!(!out.status.success(), "serve started: {stderr}");
    assert!(
        stderr.contains("`max_transform_outputs` is not a limit")
            && stderr.contains("max_transform_output"),
        "{stderr}"
    );
}

#[test]
fn bench_calls_drives_gpt_live_calls_end_to_end() {
    let out = switchboard(&[
        "bench",
        "calls",
        "--api",
        "live",
        "--concurrency",
        "3",
        "--duration",
        "1",
        "--think-ms",
        "50",
        "--json",
    ]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = text
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the JSON report");
    assert_eq!(report["api"], "live");
    assert_eq!(report["errors"], 0);
    assert!(report["tool_calls"].as_u64().unwrap() > 0, "{report}");
}

/// `--api http` starts its calls with `POST /v1/calls` and times the invocations; `--tool api`
/// calls the bench's own loopback upstream, `--tool write` writes each call's context: every
/// answer is a success.
#[test]
fn bench_calls_drives_the_http_door_and_tools_that_write_or_call_out() {
    for (api, tool) in [("http", "api"), ("http", "write"), ("realtime", "write")] {
        let out = switchboard(&[
            "bench",
            "calls",
            "--api",
            api,
            "--tool",
            tool,
            "--concurrency",
            "3",
            "--duration",
            "1",
            "--think-ms",
            "50",
            "--json",
        ]);
        let text = stdout(&out);
        assert!(
            out.status.success(),
            "{api} {tool}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = text
            .lines()
            .find_map(|l| serde_json::from_str(l).ok())
            .expect("the JSON report");
        assert_eq!(report["api"], api);
        assert_eq!(report["errors"], 0, "{report}");
        assert!(report["tool_calls"].as_u64().unwrap() > 3, "{report}");
    }
}
