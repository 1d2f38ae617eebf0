//! A journal away for longer than every retry — a database failing over, or cut off and not
//! answering at all — under a session with the node's outbox in front of it: a run that
//! reached an effect is answered with its result at once and stored once the journal is back,
//! an identical write meanwhile joins it, a tool without effects changes nothing, and no wait
//! for the journal outlasts its budget.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use super::*;
use switchboard_runtime::journal::{CallState, Claim, JournalEntry, JournalError};
use switchboard_runtime::outbox::{Outbox, OutboxLimits};
use switchboard_runtime::{BoxFuture, CallJournal};
use wiremock::Request;

const UP: u8 = 0;
/// Every write fails at once (connections refused).
const REFUSING: u8 = 1;
/// Every write waits for ever (a database cut off, not refusing).
const SILENT: u8 = 2;
/// Every write is fenced off: another node took the call over meanwhile.
const FENCED: u8 = 3;

/// A journal in memory that can be made to refuse or to hang.
#[derive(Default)]
struct Flaky {
    inner: MemoryJournal,
    state: AtomicU8,
}

impl Flaky {
    fn set(&self, state: u8) {
        self.state.store(state, Ordering::SeqCst);
    }

    /// `up` when the journal is up; refused or never answered otherwise. (`MemoryJournal`
    /// writes when its future is made, so `up` is called only when up.)
    fn gate<'a, T: Send + 'a>(
        &self,
        up: impl FnOnce() -> BoxFuture<'a, Result<T, JournalError>>,
    ) -> BoxFuture<'a, Result<T, JournalError>> {
        match self.state.load(Ordering::SeqCst) {
            UP => up(),
            REFUSING => Box::pin(async { Err(JournalError::failed("connection refused")) }),
            FENCED => Box::pin(async { Err(JournalError::Fenced("a new owner".into())) }),
            _ => Box::pin(std::future::pending()),
        }
    }

    async fn records(&self, call: &str) -> Vec<String> {
        self.inner
            .load(call)
            .await
            .unwrap()
            .map(|s| {
                s.records
                    .iter()
                    .map(|r| r.function_call_id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl CallJournal for Flaky {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.gate(|| self.inner.append(call_id, entry))
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        self.inner.load(call_id)
    }

    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        self.gate(|| self.inner.claim(call_id, invocation))
    }
}

fn place_order(url: &str) -> Arc<Tool> {
    tool(json!({
        "name": "place_order", "description": "Order an item.", "timeout": 2,
        "parameters": [{"name": "item", "type": "string", "required": true}],
        "actions": [
            {"type": "api_call", "method": "POST", "url": format!("{url}/orders"),
             "body": {"item": "{{params.item}}"}, "retry_count": 0, "response_path": "order"},
            {"type": "context.set", "data": {"orders[+]": "{{params.item}}"}}
        ],
        "on_success": [{"type": "respond", "message": "Ordered {{params.item}}: {{workflow.order.order_id}}."}]
    }))
}

fn note() -> Arc<Tool> {
    tool(
        json!({"name": "note", "description": "Note.", "timeout": 1, "actions": [
        {"type": "context.set", "data": {"noted": true}},
        {"type": "respond", "message": "noted"}]}),
    )
}

/// An order API whose every order takes the journal down (`state`) while it is answered: the
/// database fails over after the order was taken.
async fn orders_that_take_the_journal(journal: Arc<Flaky>, state: u8) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(move |_: &Request| {
            journal.set(state);
            ResponseTemplate::new(201).set_body_json(json!({"order_id": "ord_1"}))
        })
        .mount(&server)
        .await;
    server
}

struct Outage {
    session: CallSession,
    rx: mpsc::UnboundedReceiver<Delivery>,
    flaky: Arc<Flaky>,
    outbox: Arc<Outbox>,
}

async fn outage(tools: Vec<Arc<Tool>>, flaky: Arc<Flaky>, limits: OutboxLimits) -> Outage {
    let h = harness(
        vec![("main", tools)],
        SessionOptions {
            commit_retry: Duration::from_millis(300),
            ..SessionOptions::default()
        },
    )
    .await;
    let outbox = Outbox::new(limits);
    let (tx, rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        sink: Arc::new(ChannelSink(tx)),
        journal: Arc::new(outbox.journal("acme-corp", flaky.clone())),
        ..h.deps.clone()
    };
    let session = CallSession::start(call_info("rtc_out"), json!({}), deps)
        .await
        .unwrap();
    Outage {
        session,
        rx,
        flaky,
        outbox,
    }
}

impl Outage {
    fn submit(&self, fc: &str, name: &str, args: Value) {
        let mut i = inv(fc, name, args, None);
        i.call_id = "rtc_out".into();
        self.session.submit(i);
    }

    async fn next(&mut self) -> Delivery {
        tokio::time::timeout(Duration::from_secs(10), self.rx.recv())
            .await
            .expect("a delivery within 10 s")
            .expect("the sink is open")
    }

    /// Waits until the journal holds `records` for the call (and nothing waits in the outbox).
    async fn stored(&self, records: &[&str]) -> CallState {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = self.flaky.inner.load("rtc_out").await.unwrap().unwrap();
            let ids: Vec<&str> = state
                .records
                .iter()
                .map(|r| r.function_call_id.as_str())
                .collect();
            if ids == records && self.outbox.held() == 0 {
                return state;
            }
            assert!(
                Instant::now() < deadline,
                "the journal holds {ids:?}, not {records:?}; {} entries wait",
                self.outbox.held()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn an_effect_whose_commit_the_journal_cannot_take_is_answered_and_stored_once_it_returns() {
    for state in [REFUSING, SILENT] {
        let flaky = Arc::new(Flaky::default());
        let server = orders_that_take_the_journal(flaky.clone(), state).await;
        let mut o = outage(
            vec![place_order(&server.uri()), note()],
            flaky.clone(),
            OutboxLimits::default(),
        )
        .await;
        let started = Instant::now();
        o.submit("fc_1", "place_order", json!({"item": "pizza"}));
        let first = o.next().await;
        // The order was taken: the model hears so, with the order's id, not "nothing was
        // changed" — and within the commit's retry of the order's answer, whether the journal
        // refuses or never answers.
        assert!(first.result.ok, "{}", first.result.output);
        assert!(
            output(&first)["message"]
                .as_str()
                .unwrap()
                .contains("ord_1"),
            "{}",
            first.result.output
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(o.flaky.records("rtc_out").await.is_empty());
        assert_eq!(o.outbox.held(), 1);
        // The model's natural retry — a new function call id, the same arguments — joins the
        // first: no second order.
        o.submit("fc_2", "place_order", json!({"item": "pizza"}));
        let second = o.next().await;
        assert_eq!(second.duplicate_of.as_deref(), Some("fc_1"), "{second:?}");
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
        // A tool without effects cannot be stored either, and is not answered as done: it
        // waits for the database within its deadline, then says nothing was changed — or, when
        // the database never answered (the write may still land), that it is not known.
        let asked = Instant::now();
        o.submit("fc_3", "note", json!({}));
        let noted = o.next().await;
        assert!(!noted.result.ok, "{}", noted.result.output);
        let said = if state == REFUSING {
            "nothing was changed"
        } else {
            "not known whether this was saved"
        };
        assert!(
            noted.result.output.contains(said),
            "{}",
            noted.result.output
        );
        // Its 1 s deadline and the 0.3 s retry, not more.
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
        // The session went on as if stored: its context has the order, not the note.
        let live = o.session.snapshot().await.unwrap().context;
        assert_eq!(live.workflow["orders"], json!(["pizza"]), "{live:?}");
        assert!(live.workflow.get("noted").is_none(), "{live:?}");
        // The journal returns: the records land, in their order, with the order's context —
        // the note's as the answer it got, having changed nothing.
        o.flaky.set(UP);
        let stored = o.stored(&["fc_1", "fc_2", "fc_3"]).await;
        assert!(!stored.records[2].ok, "{:?}", stored.records[2]);
        let context = stored.context.unwrap();
        assert_eq!(
            context.workflow["orders"],
            json!(["pizza"]),
            "state {state}"
        );
        assert!(context.workflow.get("noted").is_none(), "state {state}");
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_call_ended_while_the_journal_is_away_is_ended_once_it_returns() {
    let flaky = Arc::new(Flaky::default());
    let server = orders_that_take_the_journal(flaky.clone(), REFUSING).await;
    let mut o = outage(
        vec![place_order(&server.uri())],
        flaky.clone(),
        OutboxLimits::default(),
    )
    .await;
    o.submit("fc_1", "place_order", json!({"item": "tea"}));
    assert!(o.next().await.result.ok);
    let ended = o.session.end().await.unwrap();
    assert_eq!(ended.records.len(), 1);
    assert!(!o.flaky.inner.load("rtc_out").await.unwrap().unwrap().ended);
    o.flaky.set(UP);
    let state = o.stored(&["fc_1"]).await;
    assert!(state.ended, "the end is stored after the call's record");
}

#[tokio::test]
async fn past_the_nodes_bound_a_run_is_still_answered_truly_and_its_changes_ride_the_next_commit() {
    let flaky = Arc::new(Flaky::default());
    let server = orders_that_take_the_journal(flaky.clone(), REFUSING).await;
    let mut o = outage(
        vec![place_order(&server.uri()), note()],
        flaky.clone(),
        OutboxLimits {
            max_entries: 0,
            ..OutboxLimits::default()
        },
    )
    .await;
    o.submit("fc_1", "place_order", json!({"item": "tea"}));
    let first = o.next().await;
    assert!(first.result.ok, "{}", first.result.output);
    assert_eq!(o.outbox.held(), 0);
    o.flaky.set(UP);
    o.submit("fc_2", "note", json!({}));
    assert!(o.next().await.result.ok);
    // The first record is lost (counted and logged); its order is in the stored context.
    let stored = o.stored(&["fc_2"]).await;
    assert_eq!(stored.context.unwrap().workflow["orders"], json!(["tea"]));
}

#[tokio::test]
async fn a_claim_the_journal_never_answers_is_answered_within_its_tools_deadline() {
    let flaky = Arc::new(Flaky::default());
    let server = orders_that_take_the_journal(flaky.clone(), UP).await;
    let mut o = outage(
        vec![place_order(&server.uri())],
        flaky.clone(),
        OutboxLimits::default(),
    )
    .await;
    o.flaky.set(SILENT);
    let started = Instant::now();
    o.submit("fc_1", "place_order", json!({"item": "tea"}));
    let answer = o.next().await;
    assert!(!answer.result.ok);
    assert!(
        answer.result.output.contains("nothing was done"),
        "{}",
        answer.result.output
    );
    // `place_order`'s 2 s deadline and the record's 0.3 s retry.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 0);
}

#[tokio::test]
async fn entries_waiting_for_a_call_another_node_took_over_are_dropped_and_the_session_stops() {
    let flaky = Arc::new(Flaky::default());
    let server = orders_that_take_the_journal(flaky.clone(), REFUSING).await;
    let mut o = outage(
        vec![place_order(&server.uri()), note()],
        flaky.clone(),
        OutboxLimits::default(),
    )
    .await;
    o.submit("fc_1", "place_order", json!({"item": "tea"}));
    assert!(o.next().await.result.ok);
    assert_eq!(o.outbox.held(), 1);
    // The database returns with the call moved to another node (this one's lease ran out):
    // nothing of this node's is stored, and its session answers no more.
    o.flaky.set(FENCED);
    let deadline = Instant::now() + Duration::from_secs(10);
    while o.outbox.held() > 0 {
        assert!(Instant::now() < deadline, "the fenced entry is still kept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    o.submit("fc_2", "note", json!({}));
    let answered = tokio::time::timeout(Duration::from_millis(500), o.rx.recv()).await;
    assert!(
        !matches!(answered, Ok(Some(_))),
        "answered by a node that no longer owns the call: {answered:?}"
    );
    assert!(o.flaky.records("rtc_out").await.is_empty());
}
