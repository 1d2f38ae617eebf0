//! `switchboard serve` as real processes: killed with SIGKILL mid-call and restarted on the same
//! database; two nodes on one PostgreSQL database serving one tenant and one call; a node under a
//! low open-files limit flooded by slow clients.
//!
//! Every process is killed when its guard drops (also when a test fails); every PostgreSQL
//! database is made for its test and dropped after it, pass or fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{Serve, TempDir, bounded, client, integrity_check, send, with_postgres};

fn save_meal(message: &str) -> Value {
    json!({
        "name": "save_meal",
        "description": "Log a meal the user consumed",
        "parameters": [
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true}
        ],
        "actions": [{"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}],
        "on_success": [{"type": "respond", "message": message}]
    })
}

fn meals(call: &Value) -> Vec<String> {
    call["context"]["workflow"]["logged_meals"]
        .as_array()
        .unwrap_or_else(|| panic!("no logged_meals: {call}"))
        .iter()
        .map(|m| m["meal_type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_call_then_restart() {
    bounded(async {
        let dir = TempDir::new();
        let db_file = dir.path().join("switchboard.db");
        let database = format!("sqlite://{}", db_file.display());

        // An upstream that takes its time: the slow tool is mid-request when the server dies.
        let upstream = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .and(wiremock::matchers::path("/slow"))
            .respond_with(
                wiremock::ResponseTemplate::new(200)
                    .set_body_json(json!({"found": true}))
                    .set_delay(Duration::from_secs(5)),
            )
            .mount(&upstream)
            .await;

        let mut first = Serve::start(&database, dir.path(), "first").await;
        let admin = first.admin_key();
        let key = first.tenant(&admin, "acme").await;
        first
            .post("/v1/tools", &key, save_meal("Logged your {{params.meal_type}}."))
            .await;
        let slow = json!({
            "name": "slow_lookup",
            "description": "Look something up in a slow system",
            "parameters": [{"name": "q", "type": "string", "required": true}],
            "actions": [
                {"type": "context.set", "data": {"lookups[+]": "{{params.q}}"}},
                {"type": "api_call", "url": format!("{}/slow", upstream.uri()), "body": {"q": "{{params.q}}"},
                 "timeout": 15, "retry_count": 0, "response_path": "workflow.lookup"}
            ],
            "on_success": [{"type": "respond", "message": "Found it."}]
        });
        first.post("/v1/tools", &key, slow).await;
        first
            .put(
                "/v1/agents/assistant",
                &key,
                json!({"instructions": "Help.", "default": true,
                       "tools": [{"tool": "save_meal"}, {"tool": "slow_lookup"}]}),
            )
            .await;
        first.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        first
            .invoke(&key, "c1", "f1", "save_meal", json!({"meal_type": "breakfast", "dishes": ["eggs"]}))
            .await;
        first
            .invoke(&key, "c1", "f2", "save_meal", json!({"meal_type": "lunch", "dishes": ["soup"]}))
            .await;

        // The slow tool's invocation, not waited for; the server dies while it waits upstream.
        let in_flight = tokio::spawn({
            let url = format!("{}/v1/calls/c1/invocations", first.base);
            let key = key.clone();
            async move {
                let _ = client()
                    .post(url)
                    .bearer_auth(key)
                    .json(&json!({"function_call_id": "f3", "name": "slow_lookup", "arguments": {"q": "order 7"}}))
                    .send()
                    .await;
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while upstream.received_requests().await.unwrap_or_default().is_empty() {
            assert!(Instant::now() < deadline, "the slow tool never reached its upstream");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        first.kill9();
        in_flight.abort();
        drop(first);

        // The file as the killed process left it: sound.
        integrity_check(&db_file).await;

        let second = Serve::start(&database, dir.path(), "second").await;
        assert!(
            !second.log().contains("created the admin key"),
            "a restart must not make another admin key"
        );
        let call = second.get("/v1/calls/c1", &key).await;
        assert_eq!(call["status"], "active", "{call}");
        assert_eq!(meals(&call), ["breakfast", "lunch"], "{call}");
        let answered: Vec<&str> = call["invocations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["function_call_id"].as_str())
            .collect();
        assert!(
            answered.starts_with(&["f1", "f2"]),
            "the committed invocations are recorded: {call}"
        );

        // The call goes on…
        second
            .invoke(&key, "c1", "f4", "save_meal", json!({"meal_type": "dinner", "dishes": ["rice"]}))
            .await;
        let call = second.get("/v1/calls/c1", &key).await;
        assert_eq!(meals(&call), ["breakfast", "lunch", "dinner"], "{call}");
        // …and ends.
        let ended = second.call(Method::DELETE, "/v1/calls/c1", &key, None).await;
        assert_eq!(ended["status"], "ended", "{ended}");
        assert_eq!(meals(&ended), ["breakfast", "lunch", "dinner"], "{ended}");
        let call = second.get("/v1/calls/c1", &key).await;
        assert_eq!(call["status"], "ended", "{call}");
        drop(second);
        integrity_check(&db_file).await;
    })
    .await;
}

/// Two nodes on one database (A started first: it makes the master key file both share, and
/// the admin key), a tenant, `save_meal` and `add_item` on a default agent; returns the
/// tenant's key.
async fn two_nodes(database: &str, dir: &Path) -> (Serve, Serve, String) {
    let a = Serve::start(database, dir, "a").await;
    let admin = a.admin_key();
    let b = Serve::start(database, dir, "b").await;
    let key = a.tenant(&admin, "acme").await;
    a.post(
        "/v1/tools",
        &key,
        save_meal("v1 logged your {{params.meal_type}}"),
    )
    .await;
    let add_item = json!({
        "name": "add_item",
        "description": "Add an item to the list",
        "parameters": [{"name": "item", "type": "string", "required": true}],
        "actions": [{"type": "context.set", "data": {"items[+]": "{{params.item}}"}}],
        "on_success": [{"type": "respond", "message": "Added {{params.item}}."}]
    });
    a.post("/v1/tools", &key, add_item).await;
    a.put(
        "/v1/agents/assistant",
        &key,
        json!({"instructions": "Help.", "default": true,
               "tools": [{"tool": "save_meal"}, {"tool": "add_item"}]}),
    )
    .await;
    (a, b, key)
}

/// Starts call `alt` on A and adds i1..i4 to its list through A, B, A, B.
async fn alternate(a: &Serve, b: &Serve, key: &str) {
    a.post("/v1/calls", key, json!({"call_id": "alt"})).await;
    for (i, node) in [a, b, a, b].into_iter().enumerate() {
        let item = format!("i{}", i + 1);
        node.invoke(
            key,
            "alt",
            &format!("fc{}", i + 1),
            "add_item",
            json!({"item": item}),
        )
        .await;
    }
}

async fn items_on_both(a: &Serve, b: &Serve, key: &str, when: &str) {
    for node in [a, b] {
        let call = node.get("/v1/calls/alt", key).await;
        assert_eq!(
            call["context"]["workflow"]["items"],
            json!(["i1", "i2", "i3", "i4"]),
            "{when}, the call as {} sees it: {call}",
            node.base
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_postgres() {
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let (a, b, key) = two_nodes(&database, dir.path()).await;
        // Warm A's view of the tenant, so a cache on A would be stale after B's change.
        a.post("/v1/calls", &key, json!({"call_id": "warm"})).await;
        let r = a
            .invoke(
                &key,
                "warm",
                "f1",
                "save_meal",
                json!({"meal_type": "lunch", "dishes": ["soup"]}),
            )
            .await;
        assert_eq!(r["result"]["message"], "v1 logged your lunch", "{r}");

        // The tool changes through B; the next call created on A uses the change.
        b.put(
            "/v1/tools/save_meal",
            &key,
            save_meal("v2 logged your {{params.meal_type}}"),
        )
        .await;
        a.post("/v1/calls", &key, json!({"call_id": "next"})).await;
        let r = a
            .invoke(
                &key,
                "next",
                "f1",
                "save_meal",
                json!({"meal_type": "dinner", "dishes": ["rice"]}),
            )
            .await;
        assert_eq!(r["result"]["message"], "v2 logged your dinner", "{r}");

        // One call, its invocations alternating between the nodes: one context.
        alternate(&a, &b, &key).await;
        items_on_both(&a, &b, &key, "after A, B, A, B").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_one_invocation_record() {
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let (a, b, key) = two_nodes(&database, dir.path()).await;
        alternate(&a, &b, &key).await;
        // A client's retry may reach the other node: it is answered from the record, not run
        // again (a run again repeats its effects: HTTP requests, transfers).
        for (node, fc, item) in [(&a, "fc2", "i2"), (&b, "fc3", "i3")] {
            let r = node
                .invoke(&key, "alt", fc, "add_item", json!({"item": item}))
                .await;
            assert_eq!(r["result"]["message"], format!("Added {item}."), "{r}");
            assert_eq!(
                r["replayed"], true,
                "a retry of {fc} on {} ran the tool again: {r}",
                node.base
            );
        }
        items_on_both(&a, &b, &key, "after retries").await;
        // Both nodes show the call's whole invocation record.
        for node in [&a, &b] {
            let call = node.get("/v1/calls/alt", &key).await;
            let answered: Vec<&str> = call["invocations"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|r| r["function_call_id"].as_str())
                .collect();
            assert_eq!(
                answered,
                ["fc1", "fc2", "fc3", "fc4"],
                "the record as {} sees it: {call}",
                node.base
            );
        }
    })
    .await;
}

/// Runs `switchboard replay` against a server; returns its exit code and stdout.
fn run_replay(base: &str, key: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("replay")
        .args(args)
        .args(["--server", base])
        .env("SWITCHBOARD_API_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchboard_replay_tells_which_recorded_calls_a_draft_changes() {
    bounded(async {
        let dir = TempDir::new();
        let database = format!("sqlite://{}", dir.path().join("switchboard.db").display());
        let serve = Serve::start(&database, dir.path(), "replay").await;
        let admin = serve.admin_key();
        let key = serve.tenant(&admin, "acme").await;
        serve
            .post(
                "/v1/tools",
                &key,
                save_meal("Logged your {{params.meal_type}}."),
            )
            .await;
        serve
            .put(
                "/v1/agents/assistant",
                &key,
                json!({"default": true, "tools": [{"tool": "save_meal"}]}),
            )
            .await;
        serve
            .post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await;
        serve
            .invoke(
                &key,
                "c1",
                "f1",
                "save_meal",
                json!({"meal_type": "breakfast", "dishes": ["eggs"]}),
            )
            .await;
        serve
            .invoke(
                &key,
                "c1",
                "f2",
                "save_meal",
                json!({"meal_type": "lunch", "dishes": ["soup"]}),
            )
            .await;

        let (code, out) = run_replay(&serve.base, &key, &["save_meal"]);
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("2 replayed: 2 unchanged, 0 changed"), "{out}");

        // A new message changes both; dropping `lunch` from the enum makes one fail.
        let draft = dir.path().join("draft.json");
        let mut def = save_meal("Noted: {{params.meal_type}}.");
        def["parameters"][0]["enum"] = json!(["breakfast", "dinner"]);
        std::fs::write(&draft, def.to_string()).unwrap();
        let (code, out) = run_replay(
            &serve.base,
            &key,
            &["save_meal", "--draft", draft.to_str().unwrap()],
        );
        assert_eq!(code, Some(1), "a newly failing call exits 1: {out}");
        assert!(
            out.contains("2 replayed: 0 unchanged, 1 changed, 1 newly failing"),
            "{out}"
        );
        assert!(
            out.contains(r#"+ output: {"ok":true,"message":"Noted: breakfast.","data":{}}"#),
            "{out}"
        );

        // A broken draft: the server's problems, each with its place.
        std::fs::write(
            &draft,
            json!({"name": "save_meal", "description": "d", "actions": [{"type": "respnd"}]})
                .to_string(),
        )
        .unwrap();
        let (code, out) = run_replay(
            &serve.base,
            &key,
            &["save_meal", "--draft", draft.to_str().unwrap()],
        );
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains("/actions/0/type"), "{out}");
    })
    .await;
}

/// The per-tenant limits set on the command line hold: two live calls at most, and a third is
/// refused with 429; a tenant's requests beyond its rate get `rate_limited`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_flags_set_the_tenant_call_cap_and_request_rate() {
    bounded(async {
        let dir = TempDir::new();
        let database = format!("sqlite://{}", dir.path().join("switchboard.db").display());
        let flags = [
            "--max-calls-per-tenant",
            "2",
            "--tenant-requests-per-second",
            "5",
        ]
        .map(str::to_owned);
        let serve = Serve::start_with(&database, dir.path(), "limits", &flags, None).await;
        let admin = serve.admin_key();
        let key = serve.tenant(&admin, "acme").await;
        serve
            .put(
                "/v1/agents/front",
                &key,
                json!({"instructions": "Help.", "default": true, "tools": []}),
            )
            .await;
        let client = client();
        let mut statuses = Vec::new();
        for i in 0..3 {
            let body = json!({ "call_id": format!("cap-{i}") });
            let url = format!("{}/v1/calls", serve.base);
            statuses.push(send(&client, Method::POST, url, &key, Some(body)).await);
        }
        assert!(
            statuses[..2].iter().all(|(s, _)| s.is_success()),
            "{statuses:?}"
        );
        assert_eq!(statuses[2].0, StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
        assert!(
            statuses[2].1.to_string().contains("max_calls_per_tenant")
                || statuses[2].1.to_string().contains("live call"),
            "{:?}",
            statuses[2].1
        );
        // The rate: a burst of 40 requests at 5 a second (burst 10) meets `rate_limited`.
        let mut limited = 0;
        for _ in 0..40 {
            let (status, body) = send(
                &client,
                Method::GET,
                format!("{}/v1/tools", serve.base),
                &key,
                None,
            )
            .await;
            if status == StatusCode::TOO_MANY_REQUESTS {
                assert_eq!(body["error"]["code"], "rate_limited", "{body}");
                limited += 1;
            }
        }
        assert!(
            limited > 0,
            "40 requests at once passed a rate of 5 a second"
        );
    })
    .await;
}

/// A node with 256 open files, flooded by 300 clients that each send one byte of a request
/// head every half second and never finish it: `/healthz` answers throughout, and every slow
/// connection is closed, the last within the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cannot_take_a_nodes_descriptors() {
    bounded(async {
        let dir = TempDir::new();
        let database = format!("sqlite://{}", dir.path().join("switchboard.db").display());
        let header = Duration::from_secs(2);
        let flags = ["--header-read-timeout-ms", "2000"].map(str::to_owned);
        let serve =
            Serve::start_within(&database, dir.path(), "slow", &flags, None, Some(256)).await;
        // This process holds a socket per slow client too.
        rlimit::increase_nofile_limit(4096).unwrap();
        let address = format!("127.0.0.1:{}", serve.port);
        let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".repeat(10);
        let opened = Instant::now();
        let mut slow = Vec::new();
        for _ in 0..300 {
            let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
            let head = head.clone();
            slow.push(tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut reader, mut writer) = stream.into_split();
                let mut buf = [0u8; 1024];
                for b in head {
                    if writer.write_all(&[b]).await.is_err() {
                        return Some(Instant::now());
                    }
                    match tokio::time::timeout(Duration::from_millis(500), reader.read(&mut buf))
                        .await
                    {
                        Ok(_) => return Some(Instant::now()),
                        Err(_) => continue,
                    }
                }
                None
            }));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        for _ in 0..5 {
            let answer = client
                .get(format!("{}/healthz", serve.base))
                .send()
                .await
                .map(|r| r.status());
            assert!(
                matches!(answer, Ok(StatusCode::OK)),
                "/healthz during the flood: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        for task in slow {
            let closed = tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("a slow client's task ends")
                .unwrap()
                .expect("every slow connection is closed by the node");
            let after = closed.duration_since(opened);
            assert!(
                after < header + Duration::from_secs(3),
                "closed after {after:?}"
            );
        }
        assert!(
            serve.log().contains("max_connections=64"),
            "{}",
            serve.log()
        );
    })
    .await;
}
