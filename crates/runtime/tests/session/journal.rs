//! The journal under a session: checkpoints and restarts, moves between nodes, slow and failing
//! storage.

use super::*;
use switchboard_runtime::journal::{CallState, Claim, JournalEntry, JournalError};
use switchboard_runtime::{BoxFuture, CallJournal};

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
            JournalEntry::Started {
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
            JournalEntry::Checkpoint {
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

impl CallJournal for SlowJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            if matches!(entry, JournalEntry::Finished { .. }) {
                self.gate.acquire().await.unwrap().forget();
            }
            self.inner.append(call_id, entry).await
        })
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        self.inner.load(call_id)
    }
}

#[tokio::test]
async fn answer_before_journal_answers_unchanged_reads_first_and_holds_writes() {
    let server = server_with_slow(0).await;
    // A read that asks for an effect is claimed before it runs.
    let lookup = tool(
        json!({"name": "lookup", "description": "Look up.", "actions": [
        {"type": "api_call", "method": "GET", "url": format!("{}/slow", server.uri()), "retry_count": 0},
        {"type": "respond", "message": "found"}]}),
    );
    let note = tool(json!({"name": "note", "description": "Note.", "actions": [
        {"type": "context.set", "data": {"noted": true}},
        {"type": "respond", "message": "noted"}]}));
    // A read without effects is claimed by its record alone, so its answer follows it.
    let local = tool(
        json!({"name": "local", "description": "Answer.", "actions": [{"type": "respond", "message": "here"}]}),
    );
    for answer_first in [true, false] {
        let options = SessionOptions {
            answer_before_journal: answer_first,
            ..SessionOptions::default()
        };
        let tools = vec![lookup.clone(), note.clone(), local.clone()];
        let h = harness(vec![("main", tools)], options).await;
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
        let mut inv_local = inv("fc3", "local", json!({}), None);
        inv_local.call_id = "rtc_slow".into();
        session.submit(inv_local);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), rx.recv())
                .await
                .is_err(),
            "an unclaimed read answered before its record was journaled"
        );
        gate.add_permits(1);
        let d = rx.recv().await.unwrap();
        assert_eq!(output(&d)["message"], "here");
    }
}

/// A journal that counts what it is asked, or refuses every write as a journal does once
/// another node has taken the call over.
#[derive(Default)]
struct WatchedJournal {
    inner: MemoryJournal,
    claims: Mutex<Vec<String>>,
    finishes: Mutex<Vec<String>>,
    fenced: std::sync::atomic::AtomicBool,
}

impl WatchedJournal {
    fn refusal(&self) -> Option<JournalError> {
        self.fenced
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| JournalError::Fenced("another node owns it".into()))
    }
}

impl CallJournal for WatchedJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        if let JournalEntry::Finished { record, .. } = &entry {
            self.finishes
                .lock()
                .unwrap()
                .push(record.function_call_id.clone());
        }
        if let Some(e) = self.refusal() {
            return Box::pin(async { Err(e) });
        }
        self.inner.append(call_id, entry)
    }

    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        self.claims
            .lock()
            .unwrap()
            .push(invocation.function_call_id.clone());
        if let Some(e) = self.refusal() {
            return Box::pin(async { Err(e) });
        }
        self.inner.claim(call_id, invocation)
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        self.inner.load(call_id)
    }
}

/// Tools of every kind for [`WatchedJournal`]'s tests: without effects (a write, a read, an
/// async one, a handoff), and with one (a read and a write over HTTP).
fn tools_with_and_without_effects(url: &str) -> Vec<Arc<Tool>> {
    vec![
        tool(json!({"name": "note", "description": "Note.", "actions": [
            {"type": "context.set", "data": {"noted": true}},
            {"type": "respond", "message": "noted"}]})),
        tool(
            json!({"name": "local", "description": "Answer.", "actions": [
            {"type": "respond", "message": "here"}]}),
        ),
        tool(
            json!({"name": "later", "description": "Later.", "async": true, "actions": [
            {"type": "context.set", "data": {"later": true}}]}),
        ),
        tool(
            json!({"name": "lookup", "description": "Look up.", "actions": [
            {"type": "api_call", "method": "GET", "url": format!("{url}/slow"), "retry_count": 0}]}),
        ),
        tool(json!({"name": "post", "description": "Post.", "actions": [
            {"type": "api_call", "method": "POST", "url": format!("{url}/slow"), "retry_count": 0}]})),
    ]
}

#[tokio::test]
async fn only_a_tool_that_can_reach_outside_the_call_is_claimed_before_it_runs() {
    let server = server_with_slow(0).await;
    let tools = tools_with_and_without_effects(&server.uri());
    let h = harness(vec![("main", tools)], SessionOptions::default()).await;
    let journal = Arc::new(WatchedJournal::default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        sink: Arc::new(ChannelSink(tx)),
        journal: journal.clone(),
        ..h.deps.clone()
    };
    let session = CallSession::start(call_info("rtc_watch"), json!({}), deps)
        .await
        .unwrap();
    let names = ["note", "local", "later", "lookup", "post"];
    for (n, name) in names.iter().enumerate() {
        let mut i = inv(&format!("fc_{name}"), name, json!({}), None);
        i.call_id = "rtc_watch".into();
        session.submit(i);
        let d = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(d.result.ok, "{n}: {}", d.result.output);
    }
    // The async tool's news follows its "started".
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        *journal.claims.lock().unwrap(),
        ["fc_later", "fc_lookup", "fc_post"],
        "claimed: async runs and those that ask for effects"
    );
    let mut finished = journal.finishes.lock().unwrap().clone();
    finished.sort();
    assert_eq!(
        finished,
        ["fc_later", "fc_local", "fc_lookup", "fc_note", "fc_post"],
        "every run is journaled once"
    );
    // The same function calls again are answered by no one: the records stand for the claims.
    for name in names {
        let mut i = inv(&format!("fc_{name}"), name, json!({}), None);
        i.call_id = "rtc_watch".into();
        session.submit(i);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "a function call answered twice"
    );
    let stored = journal.inner.load("rtc_watch").await.unwrap().unwrap();
    assert_eq!(stored.records.len(), 5);
    assert!(stored.claimed.is_empty(), "{:?}", stored.claimed);
    assert_eq!(stored.context.unwrap().workflow["noted"], json!(true));
}

#[tokio::test]
async fn a_node_that_lost_the_call_answers_no_tool_with_or_without_effects() {
    let server = server_with_slow(0).await;
    let tools = tools_with_and_without_effects(&server.uri());
    // Reads are answered before their journal where the door allows it: an unclaimed one
    // still is not, or a node cut off would answer beside the call's new owner.
    let options = SessionOptions {
        answer_before_journal: true,
        ..SessionOptions::default()
    };
    for name in ["note", "local", "later", "lookup", "post"] {
        let h = harness(vec![("main", tools.clone())], options.clone()).await;
        let journal = Arc::new(WatchedJournal::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let deps = SessionDeps {
            sink: Arc::new(ChannelSink(tx)),
            journal: journal.clone(),
            ..h.deps.clone()
        };
        let session = CallSession::start(call_info("rtc_lost"), json!({}), deps)
            .await
            .unwrap();
        journal
            .fenced
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut i = inv("fc_1", name, json!({}), None);
        i.call_id = "rtc_lost".into();
        session.submit(i);
        // Released, the session stops: its sink closes with nothing sent.
        let answered = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(
            !matches!(answered, Ok(Some(_))),
            "`{name}` answered by a node that no longer owns the call: {answered:?}"
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 0, "{name}");
    }
}

/// A journal whose first `failures` appends of `Finished` entries fail: a database that is
/// unavailable for a while.
struct FailingJournal {
    inner: MemoryJournal,
    failures: std::sync::atomic::AtomicUsize,
}

impl CallJournal for FailingJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        use std::sync::atomic::Ordering;
        let finished = matches!(entry, JournalEntry::Finished { .. });
        if finished
            && self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Box::pin(async { Err(JournalError::Failed("the disk is unavailable".into())) });
        }
        self.inner.append(call_id, entry)
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
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
