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
        _function_call_id: &'a str,
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
        _function_call_id: &'a str,
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
    harness_guarded(agents, options, HashMap::new()).await
}

/// Runaway guards at their most lenient for agent `main`, for tests of other bounds that make
/// many calls at once.
fn lenient_guards() -> HashMap<String, switchboard_core::guards::Guards> {
    use switchboard_core::guards::{
        Guards, IdenticalCalls, MAX_CALLS_PER_MINUTE, MAX_IDENTICAL_CALLS,
    };
    HashMap::from([(
        "main".to_owned(),
        Guards {
            identical_calls: IdenticalCalls {
                max: MAX_IDENTICAL_CALLS,
                window_s: 1,
            },
            calls_per_minute: MAX_CALLS_PER_MINUTE,
        },
    )])
}

/// [`harness`] with agents' runaway guards.
async fn harness_guarded(
    agents: Vec<(&str, Vec<Arc<Tool>>)>,
    options: SessionOptions,
    guards: HashMap<String, switchboard_core::guards::Guards>,
) -> Harness {
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
        guards,
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

#[path = "session/answers.rs"]
mod answers;
#[path = "session/guards.rs"]
mod guards;
#[path = "session/interruptions.rs"]
mod interruptions;
#[path = "session/journal.rs"]
mod journal;
#[path = "session/outages.rs"]
mod outages;
#[path = "session/runaway.rs"]
mod runaway;
