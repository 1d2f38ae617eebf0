//! A call taken over from a node that died between a turn's outputs and the `response.create`
//! that must follow them: the journal holds every answer of the turn, the model (Realtime) or
//! the backend (GPT-Live) has every output, and nothing continues it unless the new owner does.
//! The old owner is played by a bare WebSocket that sends the outputs and vanishes, so the
//! death falls exactly between the two.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use secrecy::SecretString;
use serde_json::{Value, json};
use switchboard_core::{CallInfo, Context};
use switchboard_realtime::{
    Api, CallEnd, CallPlan, CallsApi, DriverOptions, Endpoints, RealtimeDoor,
};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::journal::JournalEntry;
use switchboard_runtime::{
    CallConfig, CallJournal, CallSession, Effects, Executor, InvocationRecord, MemoryJournal,
    SessionDeps, SessionOptions,
};
use switchboard_sim::Simulator;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const KEY: &str = "sk-takeover";
const WAIT: Duration = Duration::from_secs(5);
const OUTPUT: &str = r#"{"ok":true,"message":"Logged."}"#;

fn key() -> SecretString {
    SecretString::from(KEY.to_owned())
}

/// The node that dies: a bare socket to the call.
async fn old_owner(url: &str) -> WebSocketStream<MaybeTlsStream<TcpStream>> {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    tokio_tungstenite::connect_async(req)
        .await
        .expect("attached")
        .0
}

/// The journal the old owner left: the call started, and `answered` (function call, response
/// or delegation id) finished just now.
async fn journal(call_id: &str, answered: &[(&str, &str)]) -> Arc<MemoryJournal> {
    journal_at(call_id, answered, &switchboard_runtime::now_rfc3339()).await
}

/// [`journal`] with the answers finished at `finished_at`.
async fn journal_at(
    call_id: &str,
    answered: &[(&str, &str)],
    finished_at: &str,
) -> Arc<MemoryJournal> {
    let journal = Arc::new(MemoryJournal::default());
    let call = CallInfo {
        id: call_id.to_owned(),
        tenant_id: "acme".to_owned(),
        agent: "assistant".to_owned(),
        from: None,
        to: None,
        started_at: "2026-11-24T08:00:00.000Z".to_owned(),
    };
    let context = Context::new(&call, json!({}));
    journal
        .append(call_id, JournalEntry::Started { call, context })
        .await
        .unwrap();
    for (fc, response) in answered {
        let record: InvocationRecord = serde_json::from_value(json!({
            "function_call_id": fc, "tool": "save_meal", "arguments": "{}", "ok": true,
            "error": null, "output": OUTPUT, "latency_ms": 3.0,
            "started_at": "2026-11-24T08:00:01.000Z", "finished_at": finished_at,
            "response_id": response, "interrupted": false, "duplicate_of": null}))
        .unwrap();
        let entry = JournalEntry::Finished {
            record: Box::new(record),
            context: None,
            handoffs: 0,
        };
        journal.append(call_id, entry).await.unwrap();
    }
    journal
}

/// A journal that, like the database's, tells how long ago its newest record was stored by
/// its own clock: `age`.
struct Aged {
    inner: Arc<MemoryJournal>,
    age: Duration,
}

impl CallJournal for Aged {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> switchboard_runtime::BoxFuture<'a, Result<(), switchboard_runtime::journal::JournalError>>
    {
        self.inner.append(call_id, entry)
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> switchboard_runtime::BoxFuture<
        'a,
        Result<
            Option<switchboard_runtime::journal::CallState>,
            switchboard_runtime::journal::JournalError,
        >,
    > {
        Box::pin(async move {
            let mut state = self.inner.load(call_id).await?;
            if let Some(s) = &mut state {
                s.newest_record_age = Some(self.age);
            }
            Ok(state)
        })
    }
}

/// The node that takes the call over: restores its session from `journal` and resumes it.
async fn new_owner(
    sim: &Simulator,
    call_id: &str,
    api: Api,
    journal: Arc<dyn CallJournal>,
) -> (Arc<RealtimeDoor>, JoinHandle<CallEnd>) {
    let endpoints = Endpoints::from_api_base(&sim.base_url());
    let door = RealtimeDoor::new(CallsApi::new(endpoints), DriverOptions::default());
    let (sink, opened) = door.open(call_id, key(), api).expect("opened");
    let http = HttpEffects::new(HttpConfig::default()).expect("http");
    let deps = SessionDeps {
        config: Arc::new(CallConfig::default()),
        executor: Executor::new(Arc::new(Effects::http_only(Arc::new(http)))),
        sink,
        journal,
        options: SessionOptions {
            hold_terminal_effects: true,
            answer_before_journal: true,
            ..SessionOptions::default()
        },
    };
    let session = CallSession::restore(call_id, deps)
        .await
        .expect("journal")
        .expect("the call goes on");
    let plan = CallPlan {
        agent: "assistant".to_owned(),
        agents: Arc::new(HashMap::new()),
        accept_extra: serde_json::Map::new(),
        live: None,
    };
    let running = Arc::clone(&door);
    let task = tokio::spawn(async move { running.resume(opened, plan, session).await });
    (door, task)
}

/// Ends the call from this side (as a shutdown does).
async fn stop(door: Arc<RealtimeDoor>, task: JoinHandle<CallEnd>) {
    door.stop_all();
    let end = tokio::time::timeout(WAIT, task)
        .await
        .expect("ends")
        .unwrap();
    assert_eq!(end, CallEnd::Stopped);
}

#[tokio::test]
async fn a_live_turn_answered_before_its_owner_died_is_continued_once() {
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key(KEY);
    let live = sim.live();
    let id = "live_edge";
    live.add_session(id);
    let api = CallsApi::new(Endpoints::from_api_base(&sim.base_url()));
    let accept = json!({"type": "live", "model": "gpt-live-1",
        "delegation": {"type": "responses", "responses": {"model": "gpt-5.2-mini"}}});
    api.accept_live(&key(), id, &accept)
        .await
        .expect("accepted");

    // The old owner answers both calls of the backend's turn, then dies before continuing it.
    let mut old = old_owner(&api.endpoints().live_sideband(id)).await;
    let backend = live.backend(id, WAIT).await.expect("attached");
    let calls = backend.call_tools(&[("save_meal", json!({})), ("save_meal", json!({}))]);
    let delegation = delegation_of(&mut old).await;
    for (n, call) in calls.iter().enumerate() {
        let output = json!({"type": "response.item.create", "event_id": format!("old_{n}"),
            "item": {"type": "function_call_output", "call_id": call, "output": OUTPUT}});
        old.send(Message::text(output.to_string())).await.unwrap();
    }
    assert!(
        live.wait_until(id, WAIT, |l| l.outputs(id).len() == 2)
            .await
    );
    drop(old);
    assert_eq!(live.response_creates(id), 0);

    let answered: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.as_str(), delegation.as_str()))
        .collect();
    let (door, task) = new_owner(&sim, id, Api::Live, journal(id, &answered).await).await;
    let backend = live
        .backend(id, WAIT)
        .await
        .expect("re-attached by the new owner");
    assert!(
        backend.wait_continued(&calls[0], WAIT).await,
        "the backend is continued after the takeover"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(live.response_creates(id), 1, "exactly one continuation");
    assert_eq!(live.outputs(id).len(), 2, "no output sent twice");
    let v = live.violations();
    assert!(v.is_empty(), "GPT-Live protocol violations: {v:?}");
    stop(door, task).await;
}

/// The delegation of the backend's turn, as the sideband tells the old owner.
async fn delegation_of(old: &mut WebSocketStream<MaybeTlsStream<TcpStream>>) -> String {
    loop {
        let frame = tokio::time::timeout(WAIT, old.next())
            .await
            .expect("a backend event")
            .expect("open")
            .expect("readable");
        if let Message::Text(text) = frame {
            let ev: Value = serde_json::from_str(text.as_str()).unwrap();
            if ev["type"] == "response.event" {
                return ev["delegation_id"].as_str().expect("delegation").to_owned();
            }
        }
    }
}

#[tokio::test]
async fn a_realtime_response_answered_before_its_owner_died_is_spoken_once() {
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key(KEY);
    let id = "rtc_edge";
    sim.add_call(id);
    let api = CallsApi::new(Endpoints::from_api_base(&sim.base_url()));
    let accept = json!({"type": "realtime", "model": "gpt-realtime"});
    api.accept(&key(), id, &accept).await.expect("accepted");

    // The old owner answers the response's call, then dies before asking the model to speak.
    let mut old = old_owner(&api.endpoints().call_socket(id)).await;
    let mut m = sim.model(id, WAIT).await.expect("attached");
    let r = m.start_response().await;
    m.function_call(&r, "fc_edge", "save_meal", "{}").await;
    m.finish_response(&r, "completed").await;
    let output = json!({"type": "conversation.item.create", "item": {"type": "function_call_output",
        "call_id": "fc_edge", "output": OUTPUT}});
    old.send(Message::text(output.to_string())).await.unwrap();
    for _ in 0..100 {
        if !sim.outputs(id).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sim.outputs(id).len(), 1);
    drop(old);

    let (door, task) = new_owner(
        &sim,
        id,
        Api::Realtime,
        journal(id, &[("fc_edge", &r)]).await,
    )
    .await;
    let mut m = sim
        .model(id, WAIT)
        .await
        .expect("re-attached by the new owner");
    m.recv_type("response.create", WAIT)
        .await
        .expect("the model is asked to speak after the takeover");
    assert!(
        m.recv_type("response.create", Duration::from_millis(400))
            .await
            .is_none(),
        "a second response.create"
    );
    assert_eq!(sim.response_creates(id).len(), 1);
    assert_eq!(sim.outputs(id).len(), 1, "no output sent twice");
    let v = sim.violations();
    assert!(v.is_empty(), "Realtime protocol violations: {v:?}");
    stop(door, task).await;
}

#[tokio::test]
async fn a_response_answered_long_before_the_takeover_is_not_spoken_again() {
    // The old owner lived on for minutes after this answer, so it asked the model to speak
    // then; the new owner must not make the model speak a second time.
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key(KEY);
    let id = "rtc_old_answer";
    sim.add_call(id);
    let api = CallsApi::new(Endpoints::from_api_base(&sim.base_url()));
    let accept = json!({"type": "realtime", "model": "gpt-realtime"});
    api.accept(&key(), id, &accept).await.expect("accepted");
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(600);
    let finished_at = humantime::format_rfc3339_millis(long_ago).to_string();

    let (door, task) = new_owner(
        &sim,
        id,
        Api::Realtime,
        journal_at(id, &[("fc_old", "resp_old")], &finished_at).await,
    )
    .await;
    let mut m = sim
        .model(id, WAIT)
        .await
        .expect("re-attached by the new owner");
    assert!(
        m.recv_type("response.create", Duration::from_millis(600))
            .await
            .is_none(),
        "the model was asked to speak again for an answer of ten minutes ago"
    );
    assert!(sim.response_creates(id).is_empty());
    let v = sim.violations();
    assert!(v.is_empty(), "Realtime protocol violations: {v:?}");
    stop(door, task).await;
}

/// A takeover where the old owner's clock and this node's disagree by ten minutes: whether the
/// model is owed a `response.create` goes by the journal's clock alone.
#[tokio::test]
async fn whether_a_continuation_is_owed_goes_by_the_journals_clock_not_the_old_owners() {
    let ten_minutes = Duration::from_secs(600);
    // (the old owner's stamp on its answer, how long ago the journal stored it, owed)
    let cases = [
        (
            std::time::SystemTime::now() - ten_minutes,
            Duration::ZERO,
            true,
        ),
        (std::time::SystemTime::now(), ten_minutes, false),
    ];
    for (n, (stamped, age, owed)) in cases.into_iter().enumerate() {
        let sim = Simulator::start().await.expect("simulator");
        sim.set_api_key(KEY);
        let id = format!("rtc_skew_{n}");
        sim.add_call(&id);
        let api = CallsApi::new(Endpoints::from_api_base(&sim.base_url()));
        let accept = json!({"type": "realtime", "model": "gpt-realtime"});
        api.accept(&key(), &id, &accept).await.expect("accepted");
        let finished_at = humantime::format_rfc3339_millis(stamped).to_string();
        let inner = journal_at(&id, &[("fc_skew", "resp_skew")], &finished_at).await;
        let journal = Arc::new(Aged { inner, age });
        let (door, task) = new_owner(&sim, &id, Api::Realtime, journal).await;
        let mut m = sim
            .model(&id, WAIT)
            .await
            .expect("re-attached by the new owner");
        let spoke = m
            .recv_type("response.create", Duration::from_millis(800))
            .await
            .is_some();
        assert_eq!(
            spoke, owed,
            "case {n}: stamped {finished_at}, stored {age:?} ago"
        );
        stop(door, task).await;
    }
}
