//! Call sessions end to end: real tools, real HTTP servers on 127.0.0.1, a real session task.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::effect::{EffectOutcome, McpRequest};
use switchboard_core::transfer::ReferConfig;
use switchboard_core::{CallInfo, Limits, Tool};
use switchboard_runtime::effects::CallAction;
use switchboard_runtime::executor::CallConfig;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::session::{SessionDeps, SessionSnapshot};
use switchboard_runtime::{
    BoxFuture, CallControl, CallJournal, CallSession, Delivery, Effects, Executor, Invocation,
    McpCalls, MemoryJournal, OutputSink, SessionOptions, ToolEntry,
};
use tokio::sync::mpsc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Collects deliveries for the test to read.
struct ChannelSink(mpsc::UnboundedSender<Delivery>);

impl OutputSink for ChannelSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        let _ = self.0.send(delivery);
        Box::pin(async {})
    }
}

/// Records REFERs and hang-ups; fails REFERs to targets containing "fail".
#[derive(Default)]
struct FakeCallControl {
    refers: Mutex<Vec<String>>,
    hangups: Mutex<Vec<Option<String>>>,
}

impl CallControl for FakeCallControl {
    fn refer<'a>(
        &'a self,
        _call_id: &'a str,
        target_uri: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.refers.lock().unwrap().push(target_uri.to_owned());
        let fail = target_uri.contains("fail");
        Box::pin(async move {
            if fail {
                Err("404 call_id_not_found".to_owned())
            } else {
                Ok(())
            }
        })
    }
    fn hangup<'a>(
        &'a self,
        _call_id: &'a str,
        goodbye: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.hangups
            .lock()
            .unwrap()
            .push(goodbye.map(str::to_owned));
        Box::pin(async { Ok(()) })
    }
}

/// An MCP handler that panics, standing for any handler with a bug.
struct PanickingMcp;

impl McpCalls for PanickingMcp {
    fn call<'a>(
        &'a self,
        _: &'a str,
        _: &'a McpRequest,
        _: Duration,
    ) -> BoxFuture<'a, EffectOutcome> {
        Box::pin(async { panic!("a bug in an effect handler") })
    }
}

/// Accepts every message and answers with what it was given, config included.
#[derive(Default)]
struct FakeEmail;

impl switchboard_runtime::effects::EmailSender for FakeEmail {
    fn send<'a>(
        &'a self,
        scope: &'a switchboard_runtime::effects::ToolkitScope<'a>,
        message: &'a switchboard_runtime::effects::EmailMessage,
    ) -> BoxFuture<'a, Result<Value, String>> {
        let sent = json!({"to": message.to.list(), "subject": message.subject, "from": scope.config["from"], "key": scope.idempotency_key});
        Box::pin(async move { Ok(sent) })
    }
}

struct Harness {
    session: CallSession,
    rx: mpsc::UnboundedReceiver<Delivery>,
    control: Arc<FakeCallControl>,
    journal: Arc<MemoryJournal>,
    deps: SessionDeps,
}

fn tool(def: Value) -> Arc<Tool> {
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap_or_else(|e| panic!("{e}")))
}

fn call_info(id: &str) -> CallInfo {
    CallInfo {
        id: id.into(),
        tenant_id: "acme-corp".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    }
}

fn refer() -> Arc<ReferConfig> {
    let cfg: Value =
        serde_json::from_str(include_str!("../../../examples/acme-corp.json")).unwrap();
    Arc::new(ReferConfig::parse(&cfg["features"]["refer"]).unwrap())
}

async fn harness(agents: Vec<(&str, Vec<Arc<Tool>>)>, options: SessionOptions) -> Harness {
    let http = Arc::new(
        HttpEffects::new(HttpConfig {
            allow_private_networks: true,
            ..HttpConfig::default()
        })
        .unwrap(),
    );
    let control = Arc::new(FakeCallControl::default());
    let effects = Effects {
        http,
        call_control: Some(control.clone()),
        mcp: Some(Arc::new(PanickingMcp)),
        email: Some(Arc::new(FakeEmail)),
        calendar: None,
        memory: None,
    };
    let mut config = CallConfig {
        tenant_id: "acme-corp".into(),
        refer: Some(refer()),
        ..CallConfig::default()
    };
    for (agent, tools) in agents {
        let mut map: HashMap<String, ToolEntry> = tools
            .into_iter()
            .map(|t| (t.name().to_owned(), ToolEntry::new(t)))
            .collect();
        if let Some(rt) =
            switchboard_core::transfer::request_transfer_tool(&refer(), &Limits::default())
        {
            map.insert("request_transfer".into(), ToolEntry::new(Arc::new(rt)));
        }
        config.agents.insert(agent.to_owned(), map);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let journal = Arc::new(MemoryJournal::default());
    let deps = SessionDeps {
        config: Arc::new(config),
        executor: Executor::new(Arc::new(effects)),
        sink: Arc::new(ChannelSink(tx)),
        journal: journal.clone(),
        options,
    };
    let session = CallSession::start(
        call_info("rtc_1"),
        json!({"id": "u_42", "auth_token": "tok_secret_123"}),
        deps.clone(),
    )
    .await
    .unwrap();
    Harness {
        session,
        rx,
        control,
        journal,
        deps,
    }
}

fn inv(fc: &str, name: &str, args: Value, response: Option<&str>) -> Invocation {
    Invocation {
        call_id: "rtc_1".into(),
        function_call_id: fc.into(),
        name: name.into(),
        arguments_json: args.to_string(),
        response_id: response.map(str::to_owned),
        item_id: None,
    }
}

impl Harness {
    async fn next(&mut self) -> Delivery {
        tokio::time::timeout(Duration::from_secs(10), self.rx.recv())
            .await
            .expect("a delivery within 10 s")
            .expect("the sink is open")
    }

    async fn nothing_more(&mut self) {
        assert!(
            tokio::time::timeout(Duration::from_millis(300), self.rx.recv())
                .await
                .is_err(),
            "no further delivery expected"
        );
    }

    async fn snapshot(&self) -> SessionSnapshot {
        self.session.snapshot().await.unwrap()
    }
}

fn output(d: &Delivery) -> Value {
    serde_json::from_str(&d.result.output).unwrap()
}

fn save_meal(url: &str) -> Arc<Tool> {
    let mut def: Value =
        serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap();
    def["actions"][2]["url"] = json!(format!("{url}/meals"));
    def["actions"][2]["retry_delay"] = json!(0.01);
    tool(def)
}

fn slow(name: &str, url: &str, method: &str, side_effect: Option<&str>) -> Arc<Tool> {
    let mut def = json!({
        "name": name, "description": "slow",
        "actions": [
            {"type": "context.set", "data": {format!("{name}_ran"): true}},
            {"type": "api_call", "method": method, "url": format!("{url}/slow"), "retry_count": 0, "response_path": format!("{name}_response")}
        ],
        "on_success": [{"type": "respond", "message": "done"}]
    });
    if let Some(se) = side_effect {
        def["side_effect"] = json!(se);
    }
    tool(def)
}

async fn server_with_slow(delay_ms: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"done": true}))
                .set_delay(Duration::from_millis(delay_ms)),
        )
        .mount(&server)
        .await;
    Mock::given(path("/meals"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1})))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_tool_call_is_answered_and_its_writes_committed() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv(
        "fc1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
        Some("resp_1"),
    ));
    let d = h.next().await;
    assert_eq!(
        output(&d),
        json!({"ok": true, "message": "I've logged your lunch!", "data": {}})
    );
    assert_eq!(
        h.snapshot().await.context.workflow["logged_meals"],
        json!([{"meal_type": "lunch", "dishes": ["soup"]}])
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].headers.get("idempotency-key").unwrap(),
        "rtc_1-fc1-2"
    );
    let record = &h.snapshot().await.records[0];
    assert!(record.ok && record.latency_ms > 0.0);
}

#[tokio::test]
async fn a_hundred_concurrent_calls_all_land() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    for i in 0..100 {
        h.session.submit(inv(
            &format!("fc{i}"),
            "save_meal",
            json!({"meal_type": "dinner", "dishes": [format!("dish {i}")]}),
            None,
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for _ in 0..100 {
        let d = h.next().await;
        assert!(d.result.ok, "{}", d.result.output);
        ids.insert(d.result.function_call_id);
    }
    assert_eq!(ids.len(), 100);
    h.nothing_more().await;
    let meals = h.snapshot().await.context.workflow["logged_meals"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(meals, 100);
}

#[tokio::test]
async fn a_repeated_function_call_id_runs_once_and_is_answered_once() {
    let server = server_with_slow(200).await;
    let mut h = harness(
        vec![("main", vec![slow("lookup", &server.uri(), "GET", None)])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "lookup", json!({}), None));
    h.session.submit(inv("fc1", "lookup", json!({}), None)); // still pending
    let d = h.next().await;
    assert_eq!(d.result.function_call_id, "fc1");
    h.session.submit(inv("fc1", "lookup", json!({}), None)); // already executed
    h.nothing_more().await;
    match h.session.lookup("fc1").await {
        Some(switchboard_runtime::Lookup::Done(r)) => assert_eq!(r.output, d.result.output),
        other => panic!("fc1 is done, got {other:?}"),
    }
    assert!(h.session.lookup("fc_unknown").await.is_none());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_interrupted_read_tool_is_cancelled_and_writes_nothing() {
    let server = server_with_slow(2_000).await;
    let mut h = harness(
        vec![("main", vec![slow("lookup", &server.uri(), "GET", None)])],
        SessionOptions::default(),
    )
    .await;
    h.session
        .submit(inv("fc1", "lookup", json!({}), Some("resp_1")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "cancelled");
    assert!(d.interrupted);
    h.nothing_more().await;
    assert_eq!(h.snapshot().await.context.workflow.get("lookup_ran"), None);
}

#[tokio::test]
async fn an_interrupted_write_tool_finishes_and_reports_its_real_result() {
    let server = server_with_slow(300).await;
    let mut h = harness(
        vec![(
            "main",
            vec![slow("place_order", &server.uri(), "POST", None)],
        )],
        SessionOptions::default(),
    )
    .await;
    h.session
        .submit(inv("fc1", "place_order", json!({}), Some("resp_1")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(
        output(&d),
        json!({"ok": true, "message": "done", "data": {}})
    );
    assert!(d.interrupted, "the door must not ask for a new response");
    assert_eq!(
        h.snapshot().await.context.workflow["place_order_ran"],
        json!(true)
    );
}

#[tokio::test]
async fn a_transfer_in_an_interrupted_response_is_not_performed() {
    let options = SessionOptions {
        hold_terminal_effects: true,
        ..SessionOptions::default()
    };
    let mut h = harness(vec![("main", vec![])], options).await;
    h.session.submit(inv(
        "fc1",
        "request_transfer",
        json!({"destination_id": "sales"}),
        Some("resp_1"),
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        h.control.refers.lock().unwrap().is_empty(),
        "held until the response completes"
    );
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "cancelled");
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("not transferred")
    );
    assert!(h.control.refers.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_held_transfer_goes_ahead_once_its_response_completes() {
    let options = SessionOptions {
        hold_terminal_effects: true,
        ..SessionOptions::default()
    };
    let mut h = harness(vec![("main", vec![])], options).await;
    h.session.submit(inv(
        "fc1",
        "request_transfer",
        json!({"destination_id": "support", "reason": "router"}),
        Some("resp_1"),
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.session.response_done("resp_1");
    let d = h.next().await;
    assert!(d.result.ok, "{}", d.result.output);
    assert_eq!(*h.control.refers.lock().unwrap(), ["tel:+14155552000"]);
    // Asked again: the same target is not REFERred twice in one call.
    h.session.submit(inv(
        "fc2",
        "request_transfer",
        json!({"destination_id": "support"}),
        Some("resp_2"),
    ));
    h.session.response_done("resp_2");
    assert!(h.next().await.result.ok);
    assert_eq!(h.control.refers.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_refer_tells_the_model_to_go_on_without_transfer() {
    let t = tool(
        json!({"name": "to_pbx", "description": "d", "actions": [{"type": "transfer", "target_uri": "sip:fail@pbx.example.com"}]}),
    );
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "to_pbx", json!({}), None));
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "call_transfer_failed");
    assert_eq!(
        output(&d)["message"],
        "Failed to transfer the call. Please handle the call without transfer."
    );
}

#[tokio::test]
async fn the_same_write_twice_runs_once() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    let args = json!({"meal_type": "lunch", "dishes": ["soup"]});
    h.session
        .submit(inv("fc1", "save_meal", args.clone(), None));
    let first = h.next().await;
    // Same arguments, keys in another order: still the same call.
    h.session.submit(inv(
        "fc2",
        "save_meal",
        json!({"dishes": ["soup"], "meal_type": "lunch"}),
        None,
    ));
    let second = h.next().await;
    assert_eq!(output(&second)["duplicate_of"], "fc1");
    assert_eq!(output(&second)["message"], output(&first)["message"]);
    assert_eq!(second.duplicate_of.as_deref(), Some("fc1"));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert_eq!(
        h.snapshot().await.context.workflow["logged_meals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Different arguments run.
    h.session.submit(inv(
        "fc3",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["soup"]}),
        None,
    ));
    assert!(h.next().await.duplicate_of.is_none());
}

#[tokio::test]
async fn identical_writes_in_flight_share_one_run() {
    let server = server_with_slow(200).await;
    let mut h = harness(
        vec![(
            "main",
            vec![slow("place_order", &server.uri(), "POST", None)],
        )],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "place_order", json!({}), None));
    h.session.submit(inv("fc2", "place_order", json!({}), None));
    let a = h.next().await;
    let b = h.next().await;
    assert_eq!(
        (
            a.result.function_call_id.as_str(),
            b.result.function_call_id.as_str()
        ),
        ("fc1", "fc2")
    );
    assert_eq!(b.duplicate_of.as_deref(), Some("fc1"));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn end_cancels_everything_still_running() {
    let server = server_with_slow(5_000).await;
    let tools = vec![
        slow("lookup", &server.uri(), "GET", None),
        slow("place_order", &server.uri(), "POST", None),
    ];
    let mut h = harness(vec![("main", tools)], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "lookup", json!({}), None));
    h.session.submit(inv("fc2", "place_order", json!({}), None));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let end = h.session.end().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "end waits for aborted runs, not for their servers"
    );
    let mut codes: Vec<String> = Vec::new();
    for _ in 0..2 {
        codes.push(
            output(&h.next().await)["error"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(codes, ["cancelled", "cancelled"]);
    assert!(end.ended && end.pending.is_empty());
    assert!(end.context.workflow.get("place_order_ran").is_none());
    assert!(h.session.snapshot().await.is_none(), "the session is gone");
    assert!(h.journal.load("rtc_1").await.unwrap().unwrap().ended);
}

#[tokio::test]
async fn a_panicking_handler_fails_the_tool_and_the_call_goes_on() {
    let server = server_with_slow(0).await;
    let buggy = tool(
        json!({"name": "crm_lookup", "description": "d", "actions": [{"type": "mcp.call", "server": "crm", "tool": "lookup"}]}),
    );
    let mut h = harness(
        vec![("main", vec![buggy, save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "crm_lookup", json!({}), None));
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "tool_execution_failed");
    h.session.submit(inv(
        "fc2",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["x"]}),
        None,
    ));
    assert!(h.next().await.result.ok);
}

#[tokio::test]
async fn every_failure_mode_gets_its_code() {
    let server = MockServer::start().await;
    Mock::given(path("/slow"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    Mock::given(path("/down"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let quick = tool(
        json!({"name": "quick", "description": "d", "timeout": 0.2, "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/slow", server.uri()), "retry_count": 0}]}),
    );
    let down = tool(
        json!({"name": "down", "description": "d", "actions": [{"type": "api_call", "url": format!("{}/down", server.uri()), "retry_count": 1, "retry_delay": 0.01}]}),
    );
    let typed = tool(
        json!({"name": "typed", "description": "d", "parameters": [{"name": "n", "type": "integer", "required": true}]}),
    );
    let mut h = harness(
        vec![("main", vec![quick, down, typed])],
        SessionOptions::default(),
    )
    .await;
    let cases = [
        ("nope", json!({}), "tool_not_found"),
        ("typed", json!("{broken"), "tool_args_parse_error"),
        ("typed", json!({"n": "x"}), "invalid_arguments"),
        ("quick", json!({}), "timeout"),
        ("down", json!({}), "api_call_failed"),
    ];
    for (i, (name, args, code)) in cases.iter().enumerate() {
        let mut invocation = inv(&format!("fc{i}"), name, args.clone(), None);
        if let Value::String(raw) = args {
            invocation.arguments_json = raw.clone();
        }
        h.session.submit(invocation);
        let d = h.next().await;
        assert_eq!(output(&d)["error"], *code, "{name}: {}", d.result.output);
        assert_eq!(d.result.error.unwrap().as_str(), *code);
    }
}

/// A session with HTTP effects only (the outbound guard on) and one tool: the HTTP door's shape.
async fn http_only_session(
    call_id: &str,
    t: Arc<Tool>,
) -> (CallSession, mpsc::UnboundedReceiver<Delivery>) {
    let http = Arc::new(HttpEffects::new(HttpConfig::default()).unwrap());
    let mut config = CallConfig {
        tenant_id: "t".into(),
        ..CallConfig::default()
    };
    config.agents.insert(
        "main".into(),
        HashMap::from([(t.name().to_owned(), ToolEntry::new(t))]),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        config: Arc::new(config),
        executor: Executor::new(Arc::new(Effects::http_only(http))),
        sink: Arc::new(ChannelSink(tx)),
        journal: Arc::new(MemoryJournal::default()),
        options: SessionOptions::default(),
    };
    (
        CallSession::start(call_info(call_id), json!({}), deps)
            .await
            .unwrap(),
        rx,
    )
}

/// With the guard on (the default), a tool cannot reach the cloud metadata address.
async fn meta_refused_by_guard() {
    let meta = tool(
        json!({"name": "meta", "description": "d", "actions": [{"type": "api_call", "method": "GET", "url": "http://169.254.169.254/latest/meta-data", "retry_count": 0}]}),
    );
    let (session, mut rx) = http_only_session("rtc_m", meta).await;
    session.submit(Invocation {
        call_id: "rtc_m".into(),
        ..inv("m1", "meta", json!({}), None)
    });
    let d = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output(&d)["error"], "api_call_failed");
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("private or metadata address"),
        "{}",
        d.result.output
    );
}

#[tokio::test]
async fn metadata_address_is_refused() {
    meta_refused_by_guard().await;
}

#[tokio::test]
async fn handoff_changes_the_active_agent_and_its_tools() {
    let to_billing = tool(
        json!({"name": "to_billing", "description": "d", "actions": [{"type": "handoff", "agent": "billing", "reason": "invoice"}, {"type": "context.set", "data": {"agent.handed": true}}]}),
    );
    let invoice = tool(
        json!({"name": "invoice", "description": "d", "actions": [{"type": "context.set", "data": {"agent.seen": true}}]}),
    );
    let mut h = harness(
        vec![("main", vec![to_billing]), ("billing", vec![invoice])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "invoice", json!({}), None));
    assert_eq!(output(&h.next().await)["error"], "tool_not_found");
    h.session.submit(inv("fc2", "to_billing", json!({}), None));
    let d = h.next().await;
    assert_eq!(d.handoff.as_ref().unwrap().agent, "billing");
    h.session.submit(inv("fc3", "invoice", json!({}), None));
    assert!(h.next().await.result.ok);
    let ctx = h.snapshot().await.context;
    assert_eq!(ctx.active_agent(), "billing");
    assert_eq!(
        *ctx.agents,
        json!({"main": {"handed": true}, "billing": {"seen": true}})
    );
}

#[tokio::test]
async fn an_async_tool_is_answered_at_once_then_reports() {
    let server = server_with_slow(300).await;
    let mut def = json!({"name": "report", "description": "d", "async": true, "actions": [{"type": "api_call", "url": format!("{}/slow", server.uri()), "retry_count": 0}], "on_success": [{"type": "respond", "message": "report sent"}]});
    let t = tool(def.take());
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "report", json!({}), None));
    let first = h.next().await;
    assert_eq!(output(&first), json!({"ok": true, "message": "started"}));
    assert!(!first.async_completion);
    let done = h.next().await;
    assert!(done.async_completion);
    assert_eq!(output(&done)["message"], "report sent");
}

#[tokio::test]
async fn without_call_control_terminal_effects_become_client_actions() {
    let bye = tool(
        json!({"name": "hang_up", "description": "d", "actions": [{"type": "end_call", "message": "Goodbye!"}]}),
    );
    let (session, mut rx) = http_only_session("rtc_2", bye).await;
    session.submit(inv("fc1", "hang_up", json!({}), None));
    let d = rx.recv().await.unwrap();
    assert_eq!(
        d.actions,
        [CallAction::Hangup {
            message: Some("Goodbye!".into())
        }]
    );
}

#[tokio::test]
async fn secrets_never_reach_outputs_or_records() {
    let leaky = tool(
        json!({"name": "leaky", "description": "d", "parameters": [{"name": "note", "type": "string"}], "actions": [{"type": "respond", "message": "token is {{user.auth_token}}"}]}),
    );
    let mut h = harness(vec![("main", vec![leaky])], SessionOptions::default()).await;
    h.session.submit(inv(
        "fc1",
        "leaky",
        json!({"note": "my token tok_secret_123"}),
        None,
    ));
    let d = h.next().await;
    assert_eq!(output(&d)["message"], "token is [redacted]");
    let record = &h.snapshot().await.records[0];
    assert!(
        !record.arguments.contains("tok_secret_123"),
        "{}",
        record.arguments
    );
}

#[tokio::test]
async fn a_checkpointed_run_resumes_after_a_restart() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv(
        "fc1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
        None,
    ));
    h.next().await;
    // Take the journal as a crash would leave it mid-tool: the last checkpoint of fc1 still open.
    let state = h.journal.load("rtc_1").await.unwrap().unwrap();
    assert!(
        state.checkpoints.is_empty(),
        "a finished run leaves no checkpoint"
    );
    let crashed = Arc::new(MemoryJournal::default());
    let call = call_info("rtc_1");
    crashed
        .append(
            "rtc_1",
            switchboard_runtime::journal::JournalEntry::Started {
                call: call.clone(),
                context: state.context.clone().unwrap(),
            },
        )
        .await
        .unwrap();
    // A second save_meal, stopped at its api_call as the process died.
    let t = save_meal(&server.uri());
    let ctx = state.context.clone().unwrap();
    let step = switchboard_core::start(
        &t,
        switchboard_core::RunInput::new("fc2"),
        r#"{"meal_type":"dinner","dishes":["rice"]}"#,
        &ctx,
    );
    let switchboard_core::Step::Effect(request, suspended) = step else {
        panic!("save_meal stops at its api_call")
    };
    let checkpoint = switchboard_runtime::journal::Checkpoint {
        invocation: inv(
            "fc2",
            "save_meal",
            json!({"meal_type": "dinner", "dishes": ["rice"]}),
            None,
        ),
        request,
        suspended: serde_json::to_value(&suspended).unwrap(),
    };
    crashed
        .append(
            "rtc_1",
            switchboard_runtime::journal::JournalEntry::Checkpoint {
                function_call_id: "fc2".into(),
                checkpoint: Box::new(checkpoint),
            },
        )
        .await
        .unwrap();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        journal: crashed.clone(),
        sink: Arc::new(ChannelSink(tx)),
        ..h.deps.clone()
    };
    let restored = CallSession::restore("rtc_1", deps)
        .await
        .unwrap()
        .expect("the call is in the journal");
    let d = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.result.function_call_id, "fc2");
    assert_eq!(output(&d)["message"], "I've logged your dinner!");
    let meals = restored.snapshot().await.unwrap().context.workflow["logged_meals"].clone();
    assert_eq!(
        meals,
        json!([{"meal_type": "lunch", "dishes": ["soup"]}, {"meal_type": "dinner", "dishes": ["rice"]}])
    );
    let keys: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            r.headers
                .get("idempotency-key")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(keys, ["rtc_1-fc1-2", "rtc_1-fc2-2"]);
    assert!(
        crashed
            .load("rtc_1")
            .await
            .unwrap()
            .unwrap()
            .checkpoints
            .is_empty()
    );
}

#[tokio::test]
async fn on_error_continue_goes_on_through_a_session() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let t = tool(
        json!({"name": "notify", "description": "d", "actions": [{"type": "api_call", "url": server.uri(), "retry_count": 0, "on_error": "continue"}], "on_success": [{"type": "respond", "message": "noted ({{response.status}})"}]}),
    );
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "notify", json!({}), None));
    assert_eq!(output(&h.next().await)["message"], "noted (503)");
}

#[tokio::test]
async fn toolkit_effects_reach_their_handler_with_the_tool_config() {
    let email = tool(
        json!({"name": "send_receipt", "description": "d", "actions": [
        {"type": "email.send", "to": ["a@example.com", "b@example.com"], "subject": "Receipt", "body": "Thanks", "into": "result.sent"}]}),
    );
    let cal = tool(
        json!({"name": "book", "description": "d", "actions": [{"type": "calendar.list_events", "time_min": "2026-12-01T00:00:00Z"}]}),
    );
    let bad = tool(
        json!({"name": "bad_mail", "description": "d", "actions": [{"type": "email.send", "to": 42, "subject": "s", "body": "b"}]}),
    );
    let mut h = harness(
        vec![("main", vec![email, cal, bad])],
        SessionOptions::default(),
    )
    .await;
    // Give send_receipt a config, as an agent tool would have.
    let mut config = (*h.deps.config).clone();
    let entry = config
        .agents
        .get_mut("main")
        .unwrap()
        .get_mut("send_receipt")
        .unwrap();
    entry.config = Arc::new(json!({"from": "shop@example.com"}));
    let deps = SessionDeps {
        config: Arc::new(config),
        ..h.deps.clone()
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        sink: Arc::new(ChannelSink(tx)),
        ..deps
    };
    h.session = CallSession::start(call_info("rtc_tk"), json!({}), deps)
        .await
        .unwrap();
    h.rx = rx;
    h.session.submit(Invocation {
        call_id: "rtc_tk".into(),
        ..inv("fc1", "send_receipt", json!({}), None)
    });
    let d = h.next().await;
    assert_eq!(
        output(&d)["data"]["sent"],
        json!({"to": ["a@example.com", "b@example.com"], "subject": "Receipt", "from": "shop@example.com", "key": "rtc_tk-fc1-0"})
    );
    h.session.submit(inv("fc2", "book", json!({}), None));
    let d = h.next().await;
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("no calendar handler is configured"),
        "{}",
        d.result.output
    );
    h.session.submit(inv("fc3", "bad_mail", json!({}), None));
    let d = h.next().await;
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("do not fit"),
        "{}",
        d.result.output
    );
}

#[tokio::test]
async fn a_call_moving_between_nodes_on_one_journal_keeps_one_context() {
    // The call changes owner before every tool call: each node restores it from the journal
    // (as a takeover does), runs one tool, and lets go. Every new owner reads what the last
    // one journaled.
    let append = tool(
        json!({"name": "note", "description": "d", "parameters": [{"name": "n", "type": "integer", "required": true}],
        "actions": [{"type": "context.set", "data": {"notes[+]": "{{params.n}}", "count": "{{ workflow.count | default(0) + 1 }}"}}]}),
    );
    let journal = Arc::new(MemoryJournal::default());
    let deps = |tx| {
        let mut config = CallConfig {
            tenant_id: "t".into(),
            ..CallConfig::default()
        };
        config.agents.insert(
            "main".into(),
            HashMap::from([("note".to_owned(), ToolEntry::new(Arc::clone(&append)))]),
        );
        let http = Arc::new(HttpEffects::new(HttpConfig::default()).unwrap());
        SessionDeps {
            config: Arc::new(config),
            executor: Executor::new(Arc::new(Effects::http_only(http))),
            sink: Arc::new(ChannelSink(tx)),
            journal: journal.clone(),
            options: SessionOptions::default(),
        }
    };
    let (tx, _rx) = mpsc::unbounded_channel();
    drop(
        CallSession::start(call_info("shared"), json!({}), deps(tx))
            .await
            .unwrap(),
    );
    let mut last = None;
    for n in 0..6 {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let session = CallSession::restore("shared", deps(tx))
            .await
            .unwrap()
            .unwrap();
        session.submit(Invocation {
            call_id: "shared".into(),
            ..inv(&format!("fc{n}"), "note", json!({"n": n}), None)
        });
        assert!(rx.recv().await.unwrap().result.ok);
        last = Some(session);
    }
    let ctx = last.unwrap().snapshot().await.unwrap().context;
    assert_eq!(
        ctx.workflow["notes"],
        json!([0, 1, 2, 3, 4, 5]),
        "each owner reads what the one before committed"
    );
    assert_eq!(ctx.workflow["count"], json!(6));
}

/// A journal whose `Finished` entries wait until the test lets them through: a slow disk.
struct SlowJournal {
    inner: MemoryJournal,
    gate: Arc<tokio::sync::Semaphore>,
}

impl switchboard_runtime::CallJournal for SlowJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: switchboard_runtime::journal::JournalEntry,
    ) -> switchboard_runtime::BoxFuture<'a, Result<(), switchboard_runtime::journal::JournalError>>
    {
        Box::pin(async move {
            if matches!(
                entry,
                switchboard_runtime::journal::JournalEntry::Finished { .. }
            ) {
                self.gate.acquire().await.unwrap().forget();
            }
            self.inner.append(call_id, entry).await
        })
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
        self.inner.load(call_id)
    }
}

#[tokio::test]
async fn answer_before_journal_answers_unchanged_reads_first_and_holds_writes() {
    let lookup = tool(
        json!({"name": "lookup", "description": "Look up.", "actions": [{"type": "respond", "message": "found"}]}),
    );
    let note = tool(json!({"name": "note", "description": "Note.", "actions": [
        {"type": "context.set", "data": {"noted": true}},
        {"type": "respond", "message": "noted"}]}));
    for answer_first in [true, false] {
        let options = SessionOptions {
            answer_before_journal: answer_first,
            ..SessionOptions::default()
        };
        let h = harness(vec![("main", vec![lookup.clone(), note.clone()])], options).await;
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let deps = SessionDeps {
            sink: Arc::new(ChannelSink(tx)),
            journal: Arc::new(SlowJournal {
                inner: MemoryJournal::default(),
                gate: gate.clone(),
            }),
            ..h.deps.clone()
        };
        let session = CallSession::start(call_info("rtc_slow"), json!({}), deps)
            .await
            .unwrap();
        let mut inv_slow = inv("fc1", "lookup", json!({}), None);
        inv_slow.call_id = "rtc_slow".into();
        session.submit(inv_slow);
        let early = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert_eq!(
            early.is_ok(),
            answer_first,
            "a read that changed nothing is answered before the journal has it only when allowed"
        );
        gate.add_permits(1);
        if !answer_first {
            rx.recv().await.unwrap();
        }
        // A tool that changed the context always waits for the journal.
        let mut inv_write = inv("fc2", "note", json!({}), None);
        inv_write.call_id = "rtc_slow".into();
        session.submit(inv_write);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), rx.recv())
                .await
                .is_err(),
            "answered before its writes were journaled"
        );
        gate.add_permits(1);
        let d = rx.recv().await.unwrap();
        assert_eq!(output(&d)["message"], "noted");
    }
}

/// A journal whose first `failures` appends of `Finished` entries fail: a database that is
/// unavailable for a while.
struct FailingJournal {
    inner: MemoryJournal,
    failures: std::sync::atomic::AtomicUsize,
}

impl switchboard_runtime::CallJournal for FailingJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: switchboard_runtime::journal::JournalEntry,
    ) -> switchboard_runtime::BoxFuture<'a, Result<(), switchboard_runtime::journal::JournalError>>
    {
        use std::sync::atomic::Ordering;
        let finished = matches!(
            entry,
            switchboard_runtime::journal::JournalEntry::Finished { .. }
        );
        if finished
            && self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Box::pin(async {
                Err(switchboard_runtime::journal::JournalError::Failed(
                    "the disk is unavailable".into(),
                ))
            });
        }
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
        self.inner.load(call_id)
    }
}

#[tokio::test]
async fn a_journal_that_fails_is_retried_and_the_context_stays_as_journaled() {
    let note = tool(json!({"name": "note", "description": "Note.", "actions": [
        {"type": "context.set", "data": {"noted": true}},
        {"type": "respond", "message": "noted"}]}));
    // Failing for good: an error, and nothing applied; failing for a moment: retried, stored.
    for (failures, ok) in [(usize::MAX, false), (2, true)] {
        let options = SessionOptions {
            commit_retry: Duration::from_millis(300),
            ..SessionOptions::default()
        };
        let h = harness(vec![("main", vec![note.clone()])], options).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let journal = Arc::new(FailingJournal {
            inner: MemoryJournal::default(),
            failures: failures.into(),
        });
        let deps = SessionDeps {
            sink: Arc::new(ChannelSink(tx)),
            journal: journal.clone(),
            ..h.deps.clone()
        };
        let session = CallSession::start(call_info("rtc_fail"), json!({}), deps)
            .await
            .unwrap();
        let mut i = inv("fc1", "note", json!({}), None);
        i.call_id = "rtc_fail".into();
        session.submit(i);
        let d = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.result.ok, ok, "{}", d.result.output);
        let live = session.snapshot().await.unwrap().context;
        let stored = journal
            .inner
            .load("rtc_fail")
            .await
            .unwrap()
            .unwrap()
            .context
            .unwrap();
        assert_eq!(live, stored);
        assert_eq!(live.workflow.get("noted").is_some(), ok, "{live:?}");
    }
}
