//! The adaptive policy on the Realtime door: a tool known to outlast the agent's turn budget
//! gets its filler at once, a tool without `messages` gets the agent's `filler`, a
//! `"async": "when_slow"` tool runs in the background when slow, and each record says what was
//! decided. What a tool takes is learnt on each node and shared through the store.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_sim::ModelHandle;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::phone_support::{LIVE_NUMBER, Phone, PhoneSetup, RT_NUMBER as NUMBER, WAIT};
use crate::support::Backend;

/// Tenant `acme` answering `NUMBER` with agent `assistant`: `stock` (600 ms upstream, its own
/// filler after the default 1.5 s), `order` (600 ms, no `messages`), `digest` (600 ms,
/// `"async": "when_slow"`).
async fn phone(backend: Backend, agent: Value) -> Phone {
    let mocks = vec![
        Mock::given(method("GET")).and(path("/slow")).respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"status": "ok"}))
                .set_delay(Duration::from_millis(600)),
        ),
        Mock::given(method("GET"))
            .and(path("/slower"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"status": "done"}))
                    .set_delay(Duration::from_millis(3500)),
            ),
    ];
    let phone = Phone::start(
        backend,
        PhoneSetup {
            mocks,
            phone: json!({"phone_numbers": {NUMBER: "assistant",
                LIVE_NUMBER: {"agent": "assistant", "api": "live"}}, "voice": "marin"}),
            tools,
        },
    )
    .await;
    phone.put_agent("assistant", agent).await;
    phone
}

fn tools(u: &str) -> Vec<Value> {
    let respond = json!([{"type": "respond", "message": "It is {{response.body.status}}."}]);
    vec![
        json!({"name": "stock", "description": "Counts the stock.",
               "messages": {"delayed": "Counting the stock now."},
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow")}],
               "on_success": respond}),
        json!({"name": "order", "description": "Finds an order.",
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow")}],
               "on_success": respond}),
        json!({"name": "audit", "description": "Audits the account.",
               "messages": {"delayed": "Still checking.", "delayed_after_ms": 100},
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slower")}],
               "on_success": respond}),
        json!({"name": "digest", "description": "Makes a digest.", "async": "when_slow",
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow")}],
               "on_success": respond}),
    ]
}

fn assistant() -> Value {
    json!({"instructions": "You are Alex at Acme.", "default": true,
           "tools": [{"tool": "stock"}, {"tool": "order"}, {"tool": "digest"}, {"tool": "audit"}]})
}

/// Another node has seen `tool` take `p95_ms` over 40 runs; this node reads the cluster's
/// figures now.
async fn seen_elsewhere(phone: &Phone, tool: &str, p95_ms: u32) {
    let state = &phone.app.state;
    state
        .store
        .note_tool_latencies(
            "node-elsewhere",
            &[("acme".into(), tool.into(), p95_ms, 40)],
        )
        .await
        .expect("stored");
    switchboard_server::latency::sync(state)
        .await
        .expect("read back");
}

/// One model response asking for one function call, completed; when it was asked.
async fn ask(m: &mut ModelHandle, fc: &str, name: &str) -> Instant {
    let r = m.start_response().await;
    let asked = Instant::now();
    m.function_call(&r, fc, name, "{}").await;
    m.finish_response(&r, "completed").await;
    asked
}

async fn output(m: &mut ModelHandle, fc: &str) -> Value {
    loop {
        let ev = m
            .recv_type("conversation.item.create", WAIT)
            .await
            .unwrap_or_else(|| panic!("no output for {fc}; seen {:?}", m.seen()));
        if ev["item"]["type"] == "function_call_output" && ev["item"]["call_id"] == fc {
            let text = ev["item"]["output"].as_str().expect("output is a string");
            return serde_json::from_str(text).expect("output is JSON");
        }
    }
}

/// The record of `fc`, once stored (a read's answer may go out before its record lands).
async fn stored(phone: &Phone, call: &str, fc: &str) -> Value {
    let until = Instant::now() + WAIT;
    loop {
        let (_, view) = phone
            .app
            .get(&format!("/v1/calls/{call}"), &phone.key)
            .await;
        let found = view["invocations"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["function_call_id"] == fc))
            .cloned();
        match found {
            Some(r) => return r,
            None if Instant::now() < until => tokio::time::sleep(Duration::from_millis(50)).await,
            None => panic!("no record of {fc}: {view}"),
        }
    }
}

/// The first `response.create` carrying words to say (a filler), if one comes within `within`.
async fn filler(m: &mut ModelHandle, within: Duration) -> Option<String> {
    let until = Instant::now() + within;
    loop {
        let left = until.checked_duration_since(Instant::now())?;
        let ev = m.recv_type("response.create", left).await?;
        if let Some(words) = ev["response"]["instructions"].as_str() {
            return Some(words.to_owned());
        }
    }
}

#[tokio::test]
async fn a_tool_known_to_be_slow_gets_its_filler_at_once_and_the_record_says_why() {
    let phone = phone(Backend::Sqlite, assistant()).await;
    // Unknown yet: the filler waits for the tool's `delayed_after_ms` (1.5 s), by which time
    // the 600 ms answer is in: no filler at all.
    let mut m = phone.ring_realtime("rtc_unknown").await;
    ask(&mut m, "call_u", "stock").await;
    assert_eq!(output(&mut m, "call_u").await["ok"], true);
    assert_eq!(filler(&mut m, Duration::from_millis(1200)).await, None);
    let record = stored(&phone, "rtc_unknown", "call_u").await;
    let policy = &record["policy"];
    assert_eq!(policy["slow"], false, "{record}");
    assert_eq!(policy["filler"], "tool", "{record}");
    assert_eq!(policy["filler_after_ms"], 1500, "{record}");
    assert_eq!(policy["timeout_from"], "default", "{record}");
    assert!(policy.get("expected_ms").is_none(), "{record}");

    // Another node has seen it take 2.6 s: over the 700 ms budget, so the filler goes at once.
    seen_elsewhere(&phone, "stock", 2600).await;
    let mut m = phone.ring_realtime("rtc_known").await;
    let asked = ask(&mut m, "call_k", "stock").await;
    let words = filler(&mut m, WAIT).await.expect("a filler");
    let waited = asked.elapsed();
    assert!(words.contains("Counting the stock now."), "{words}");
    assert!(
        waited < Duration::from_millis(500),
        "the filler came {waited:?} after the function call"
    );
    assert_eq!(output(&mut m, "call_k").await["ok"], true);
    let record = stored(&phone, "rtc_known", "call_k").await;
    let policy = &record["policy"];
    // The cluster's figure: 40 runs of 2.6 s elsewhere and this node's one of 0.6 s.
    let expected = policy["expected_ms"].as_u64().expect("expected_ms");
    assert!((2500..2600).contains(&expected), "{record}");
    assert_eq!(
        (
            &policy["slow"],
            &policy["budget_ms"],
            &policy["filler_after_ms"]
        ),
        (&json!(true), &json!(700), &json!(0)),
        "{record}"
    );
    // No `timeout` of its own: four times the p95 plus a second.
    assert_eq!(
        (&policy["timeout_ms"], &policy["timeout_from"]),
        (&json!(expected * 4 + 1000), &json!("observed")),
        "{record}"
    );

    // The console's timeline row says it in words.
    let b = crate::console::sign_in(&phone.app, &phone.key).await;
    let (_, page) = b.get("/console/calls/rtc_known").await;
    assert!(
        page.contains("over the 0.7 s turn budget · the tool&#x27;s filler at once"),
        "{page}"
    );

    // This node's own runs join the cluster's figures.
    switchboard_server::latency::sync(&phone.app.state)
        .await
        .expect("synced");
    let figures = phone.app.state.store.tool_latencies().await.unwrap();
    let stock = figures
        .iter()
        .find(|(t, tool, _, _)| t == "acme" && tool == "stock")
        .expect("stock's figure");
    assert_eq!(stock.3, 42, "two runs here and 40 elsewhere: {figures:?}");
    assert!(stock.2 < 2600 && stock.2 > 2000, "{figures:?}");
    phone.stop().await;
}

#[tokio::test]
async fn a_tool_without_messages_gets_the_agents_filler_within_the_turn_budget() {
    let mut agent = assistant();
    agent["filler"] = json!("Bear with me a moment.");
    agent["turn_budget_ms"] = json!(200);
    let phone = phone(Backend::Sqlite, agent).await;
    let mut m = phone.ring_realtime("rtc_agent_filler").await;
    let asked = ask(&mut m, "call_o", "order").await;
    let words = filler(&mut m, WAIT).await.expect("the agent's filler");
    let waited = asked.elapsed();
    assert!(words.contains("Bear with me a moment."), "{words}");
    assert!(
        waited >= Duration::from_millis(180) && waited < Duration::from_millis(600),
        "said {waited:?} after the call, with a 200 ms budget"
    );
    assert_eq!(output(&mut m, "call_o").await["ok"], true);
    let record = stored(&phone, "rtc_agent_filler", "call_o").await;
    assert_eq!(record["policy"]["filler"], "agent", "{record}");
    assert_eq!(record["policy"]["filler_after_ms"], 200, "{record}");
    phone.stop().await;
}

#[tokio::test]
async fn a_when_slow_tool_runs_in_the_background_only_once_known_to_be_slow() {
    let phone = phone(Backend::Sqlite, assistant()).await;
    let mut m = phone.ring_realtime("rtc_when_slow").await;
    ask(&mut m, "call_fast", "digest").await;
    let out = output(&mut m, "call_fast").await;
    assert_eq!(out["message"], "It is ok.", "not known to be slow: {out}");

    seen_elsewhere(&phone, "digest", 3000).await;
    let mut m = phone.ring_realtime("rtc_when_slow_2").await;
    let asked = ask(&mut m, "call_bg", "digest").await;
    let out = output(&mut m, "call_bg").await;
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "answered after {:?}",
        asked.elapsed()
    );
    assert_eq!(out["message"], "started", "{out}");
    // Its result follows as news once the run ends.
    let news = loop {
        let ev = m
            .recv_type("conversation.item.create", WAIT)
            .await
            .expect("the background result");
        if ev["item"]["type"] == "message" {
            break ev;
        }
    };
    assert!(news.to_string().contains("It is ok."), "{news}");
    let record = stored(&phone, "rtc_when_slow_2", "call_bg").await;
    assert_eq!(record["policy"]["background"], true, "{record}");
    assert_eq!(record["ok"], true, "{record}");
    phone.stop().await;
}

#[tokio::test]
async fn an_agents_filler_is_checked_at_save() {
    let phone = phone(Backend::Sqlite, assistant()).await;
    for bad in [
        json!(""),
        json!("   "),
        json!(42),
        json!("x".repeat(201)),
        json!("one\ntwo"),
    ] {
        let mut agent = assistant();
        agent["filler"] = bad.clone();
        let (s, answer) = phone
            .app
            .put("/v1/agents/assistant", &phone.key, agent)
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {answer}");
        assert_eq!(
            answer["error"]["details"][0]["pointer"], "/filler",
            "{answer}"
        );
    }
    let mut agent = assistant();
    agent["filler"] = json!("One moment, please.");
    let stored = phone.put_agent("assistant", agent).await;
    assert_eq!(stored["filler"], "One moment, please.");
    let stored = phone.put_agent("assistant", assistant()).await;
    assert!(stored.get("filler").is_none(), "{stored}");
    phone.stop().await;
}

/// GPT-Live says nothing when commentary has been spoken: a slow tool's later fillers follow
/// once the first has had time to be said and the turn budget has passed in silence, each
/// asking for new words.
#[tokio::test]
async fn a_slow_tool_on_gpt_live_gets_later_fillers_spaced_after_the_first_is_said() {
    let phone = phone(Backend::Sqlite, assistant()).await;
    let backend = phone.ring_live("live_slow").await;
    let calls = backend.call_tools(&[("audit", json!({}))]);
    let live = &phone.live;
    assert!(
        live.wait_until("live_slow", WAIT, |l| l
            .outputs("live_slow")
            .iter()
            .any(|(c, _)| c == &calls[0]))
            .await,
        "no output"
    );
    let said = live.commentary("live_slow");
    // "Still checking." (about 1.1 s to say) at 100 ms, the next once it has been said and
    // 700 ms more have passed (about 1.9 s in), the one after that only at about 4.1 s: the
    // answer (3.5 s) comes first.
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(said[0], "Still checking.");
    assert!(said[1].contains("words you have not used yet"), "{said:?}");
    phone.stop().await;
}

/// Figures a node learns while the database is away reach it when it returns, even for a
/// tool that does not run again (they were taken as stored and dropped with the failed round).
async fn figures_learnt_while_the_database_is_away_are_stored_when_it_returns(backend: Backend) {
    use sqlx::{Connection, Executor};
    let app = crate::support::spawn_app(backend).await;
    let tenant = app.tenant("quiet").await;
    assert!(!tenant.is_empty());
    for _ in 0..6 {
        app.state
            .latency
            .observe("quiet", "rare", Duration::from_millis(2_400));
    }
    // The table is away: every round fails.
    let away = |sql: &'static str| {
        let url = app.url.clone();
        async move {
            match backend {
                Backend::Sqlite => {
                    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
                    c.execute(sql).await.unwrap();
                }
                Backend::Postgres => {
                    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
                    c.execute(sql).await.unwrap();
                }
            }
        }
    };
    away("ALTER TABLE tool_latency RENAME TO tool_latency_away").await;
    for _ in 0..2 {
        assert!(
            switchboard_server::latency::sync(&app.state).await.is_err(),
            "the store took figures without its table"
        );
    }
    away("ALTER TABLE tool_latency_away RENAME TO tool_latency").await;
    switchboard_server::latency::sync(&app.state)
        .await
        .expect("synced once the database is back");
    let figures = app.state.store.tool_latencies().await.unwrap();
    let rare = figures
        .iter()
        .find(|(t, tool, _, _)| t == "quiet" && tool == "rare")
        .unwrap_or_else(|| panic!("the figure was lost: {figures:?}"));
    assert_eq!((rare.2, rare.3), (2_400, 6), "{figures:?}");
    app.stop().await;
}

#[tokio::test]
async fn figures_learnt_while_the_database_is_away_are_stored_when_it_returns_sqlite() {
    figures_learnt_while_the_database_is_away_are_stored_when_it_returns(Backend::Sqlite).await;
}

#[tokio::test]
async fn figures_learnt_while_the_database_is_away_are_stored_when_it_returns_postgres() {
    figures_learnt_while_the_database_is_away_are_stored_when_it_returns(Backend::Postgres).await;
}
