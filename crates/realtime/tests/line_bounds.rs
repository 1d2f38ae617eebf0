//! A phone call's socket to OpenAI has an idle and a total bound: a socket from which nothing
//! comes back (not an event, not a pong to the line's pings) is taken for dead and attached
//! again, a quiet socket whose peer answers pings is kept, and a call served past its longest
//! is hung up. OpenAI is played by the simulator, or by a bare WebSocket server on 127.0.0.1 that
//! answers pings or does not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use secrecy::SecretString;
use serde_json::json;
use switchboard_core::{CallInfo, Context};
use switchboard_realtime::{
    Api, CallEnd, CallPlan, CallsApi, DriverOptions, Endpoints, RealtimeDoor,
};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::journal::JournalEntry;
use switchboard_runtime::{
    CallConfig, CallJournal, CallSession, Effects, Executor, MemoryJournal, SessionDeps,
    SessionOptions,
};
use switchboard_sim::Simulator;
use tokio::task::JoinHandle;

const KEY: &str = "sk-bounds";
const WAIT: Duration = Duration::from_secs(5);

/// Runs call `call_id` (already accepted at `base`) on a door with `options`, as a node that
/// takes a call over does: attach and serve.
async fn serve(
    base: &str,
    call_id: &str,
    options: DriverOptions,
) -> (Arc<RealtimeDoor>, JoinHandle<CallEnd>) {
    let door = RealtimeDoor::new(CallsApi::new(Endpoints::from_api_base(base)), options);
    let key = SecretString::from(KEY.to_owned());
    let (sink, opened) = door.open(call_id, key, Api::Realtime).expect("opened");
    let journal = Arc::new(MemoryJournal::default());
    let call = CallInfo {
        id: call_id.to_owned(),
        tenant_id: "acme".to_owned(),
        agent: "assistant".to_owned(),
        from: None,
        to: None,
        started_at: switchboard_runtime::now_rfc3339(),
    };
    let context = Context::new(&call, json!({}));
    journal
        .append(call_id, JournalEntry::Started { call, context })
        .await
        .unwrap();
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

/// A WebSocket server standing in for OpenAI's call socket: it reads what comes (so answers
/// pings) when `answers`, else it holds each socket open and never reads from it. Counts the
/// sockets attached.
async fn peer(answers: bool) -> (String, Arc<AtomicUsize>, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let attached = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&attached);
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                continue;
            };
            count.fetch_add(1, Ordering::SeqCst);
            if answers {
                tokio::spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
            } else {
                held.push(socket);
            }
        }
    });
    (base, attached, task)
}

fn quick_pings() -> DriverOptions {
    DriverOptions {
        ping_every: Duration::from_millis(100),
        silent_for: Duration::from_millis(400),
        reattach_for: Duration::from_secs(2),
        ..DriverOptions::default()
    }
}

async fn stop(door: Arc<RealtimeDoor>, task: JoinHandle<CallEnd>) -> CallEnd {
    door.stop_all();
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the call's loop ends")
        .unwrap()
}

#[tokio::test]
async fn a_socket_from_which_nothing_comes_back_is_attached_again() {
    let (base, attached, server) = peer(false).await;
    let (door, task) = serve(&base, "rtc_mute", quick_pings()).await;
    let started = std::time::Instant::now();
    while attached.load(Ordering::SeqCst) < 2 {
        assert!(
            started.elapsed() < WAIT,
            "a socket silent for {:?} was kept",
            quick_pings().silent_for
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    stop(door, task).await;
    server.abort();
}

#[tokio::test]
async fn a_quiet_socket_whose_peer_answers_pings_is_kept() {
    let (base, attached, server) = peer(true).await;
    let (door, task) = serve(&base, "rtc_quiet", quick_pings()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        attached.load(Ordering::SeqCst),
        1,
        "the quiet socket was dropped"
    );
    stop(door, task).await;
    server.abort();
}

#[tokio::test]
async fn a_call_served_past_its_longest_is_hung_up() {
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key(KEY);
    let id = "rtc_long";
    sim.add_call(id);
    let api = CallsApi::new(Endpoints::from_api_base(&sim.base_url()));
    let key = SecretString::from(KEY.to_owned());
    api.accept(
        &key,
        id,
        &json!({"type": "realtime", "model": "gpt-realtime"}),
    )
    .await
    .expect("accepted");
    let options = DriverOptions {
        longest_call: Some(Duration::from_millis(800)),
        ..DriverOptions::default()
    };
    let (_door, task) = serve(&sim.base_url(), id, options).await;
    let end = tokio::time::timeout(WAIT, task)
        .await
        .expect("the call ends at its longest")
        .unwrap();
    assert_eq!(end, CallEnd::HungUp);
    assert!(sim.is_hung_up(id), "the call was not hung up");
    assert_eq!(sim.count("hangup", id), 1);
}
