//! The call journal: its fold, idempotent appends, claims and finishes in groups, and the
//! connections and files under it.

use super::*;

use std::time::Duration;
use switchboard_runtime::journal::JournalError;

on_both_backends!(
    journal_round_trip_equals_the_in_memory_fold,
    journal_appends_are_idempotent_and_ended_clears_checkpoints,
    concurrent_claims_and_finishes_each_land_once_and_a_fenced_one_is_refused,
    a_claim_racing_its_function_calls_finish_is_taken,
    a_write_dropped_while_its_transaction_begins_leaves_the_pool_clean,
    a_finish_writes_the_calls_row_only_when_it_changed,
);

/// A finish writes the call's row only when something of it changed: a read tool's record
/// leaves the row as it was (rewriting it cost every read a page in the log); a handoff or a
/// new context writes it.
async fn a_finish_writes_the_calls_row_only_when_it_changed(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_1");
    let start = Context::new(&info, json!({}));
    let journal = s.journal("acme");
    journal
        .append(
            "rtc_1",
            JournalEntry::Started {
                call: info.clone(),
                context: start.clone(),
            },
        )
        .await
        .unwrap();
    // Every later write of a call's row, counted by a trigger.
    let counter: &[&str] = match h.backend {
        Backend::Sqlite => &[
            "CREATE TABLE call_row_writes (n INTEGER)",
            "CREATE TRIGGER count_call_row_writes AFTER UPDATE ON calls \
             BEGIN INSERT INTO call_row_writes VALUES (1); END",
        ],
        Backend::Postgres => &[
            "CREATE TABLE call_row_writes (n BIGINT)",
            "CREATE FUNCTION count_call_row_write() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN INSERT INTO call_row_writes VALUES (1); RETURN NULL; END $$",
            "CREATE TRIGGER count_call_row_writes AFTER UPDATE ON calls \
             FOR EACH ROW EXECUTE FUNCTION count_call_row_write()",
        ],
    };
    execute_raw(&h, counter).await;
    let writes = || async { raw_cells(&h, "call_row_writes").await.len() };
    let finish = |fc: &str, context: Option<Context>, handoffs: u32| JournalEntry::Finished {
        record: Box::new(record(fc, true)),
        context,
        handoffs,
    };
    journal
        .append("rtc_1", finish("fc_1", None, 0))
        .await
        .unwrap();
    assert_eq!(writes().await, 0, "a read leaves the call's row as it was");
    journal
        .append("rtc_1", finish("fc_2", None, 1))
        .await
        .unwrap();
    assert_eq!(writes().await, 1, "a handoff writes it");
    let mut changed = start.clone();
    changed.apply(&append_item(1)).unwrap();
    journal
        .append("rtc_1", finish("fc_3", Some(changed.clone()), 1))
        .await
        .unwrap();
    assert_eq!(writes().await, 2, "a new context writes it");
    journal
        .append("rtc_1", finish("fc_3", None, 0))
        .await
        .unwrap();
    assert_eq!(writes().await, 2, "a repeated finish writes nothing");
    let state = journal.load("rtc_1").await.unwrap().unwrap();
    let recorded: Vec<&str> = state
        .records
        .iter()
        .map(|r| r.function_call_id.as_str())
        .collect();
    assert_eq!(recorded, ["fc_1", "fc_2", "fc_3"]);
    assert_eq!(state.handoffs, 1);
    assert_eq!(state.context, Some(changed));
}

async fn journal_round_trip_equals_the_in_memory_fold(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_1");
    let start = Context::new(&info, json!({"auth_token": "SENTINEL-CONTEXT-TOKEN"}));
    let mut changed = start.clone();
    changed.apply(&append_item(1)).unwrap();
    changed.set_active_agent("billing");
    let entries = vec![
        JournalEntry::Started {
            call: info.clone(),
            context: start.clone(),
        },
        JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("rtc_1", "fc_1")),
        },
        JournalEntry::Checkpoint {
            function_call_id: "fc_2".into(),
            checkpoint: Box::new(checkpoint("rtc_1", "fc_2")),
        },
        JournalEntry::Finished {
            record: Box::new(record("fc_1", true)),
            context: Some(changed.clone()),
            handoffs: 1,
        },
        JournalEntry::Finished {
            record: Box::new(record("fc_3", false)),
            context: None,
            handoffs: 1,
        },
    ];
    let journal: Arc<dyn CallJournal> = Arc::new(s.journal("acme"));
    let mut folded = CallState::default();
    for e in entries {
        folded.apply(e.clone());
        journal.append("rtc_1", e).await.unwrap();
    }
    let mut loaded = journal.load("rtc_1").await.unwrap().unwrap();
    // The database also tells how long ago its newest record was stored; a fold cannot.
    assert!(loaded.newest_record_age.take().is_some());
    assert_eq!(loaded, folded);
    assert_eq!(
        loaded.checkpoints.len(),
        1,
        "fc_2 still waits at its effect"
    );
    assert_eq!(loaded.context.as_ref(), Some(&changed));
    assert_eq!(journal.load("rtc_unknown").await.unwrap(), None);

    // The checkpoint's run may hold credentials: it is sealed at rest.
    assert_absent(&h, "call_checkpoints", "SENTINEL-CHECKPOINT-TOKEN").await;
    // The context holds the user's tokens: it is sealed at rest too.
    assert_absent(&h, "calls", "SENTINEL-CONTEXT-TOKEN").await;
    assert_absent(&h, "calls", "auth_token").await;

    let row = s.get_call("acme", "rtc_1").await.unwrap().unwrap();
    assert_eq!(row.status, CallStatus::Active);
    assert_eq!(row.agent, "billing");
    assert_eq!(row.context, changed);
    assert_eq!(row.handoffs, 1);
    assert_eq!(row.version, 1, "one context write after Started");
    assert_eq!(
        s.invocations("acme", "rtc_1").await.unwrap(),
        loaded.records
    );

    folded.apply(JournalEntry::Ended);
    journal.append("rtc_1", JournalEntry::Ended).await.unwrap();
    let mut loaded = journal.load("rtc_1").await.unwrap().unwrap();
    // The database also tells how long ago its newest record was stored; a fold cannot.
    assert!(loaded.newest_record_age.take().is_some());
    assert_eq!(loaded, folded);
    assert!(loaded.ended && loaded.checkpoints.is_empty());
    let row = s.get_call("acme", "rtc_1").await.unwrap().unwrap();
    assert_eq!(row.status, CallStatus::Ended);
    assert!(row.ended_at.is_some());

    // Entries for a call that never started are errors, not silently dropped.
    let e = journal
        .append(
            "rtc_nope",
            JournalEntry::Finished {
                record: Box::new(record("fc_1", true)),
                context: None,
                handoffs: 0,
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("rtc_nope"), "{e}");
    assert!(
        journal
            .append("rtc_nope", JournalEntry::Ended)
            .await
            .is_err()
    );
}

async fn journal_appends_are_idempotent_and_ended_clears_checkpoints(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_2");
    let ctx = Context::new(&info, json!({}));
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Started {
            call: info.clone(),
            context: ctx.clone(),
        },
    )
    .await
    .unwrap();
    let mut first = ctx.clone();
    first.apply(&append_item(1)).unwrap();
    let finished = |c: Option<Context>| JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: c,
        handoffs: 0,
    };
    s.journal_append("acme", "rtc_2", finished(Some(first.clone())))
        .await
        .unwrap();
    // A retried append of the same function call changes nothing, not even the context.
    let mut other = ctx.clone();
    other.apply(&append_item(99)).unwrap();
    s.journal_append("acme", "rtc_2", finished(Some(other)))
        .await
        .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert_eq!(state.records.len(), 1);
    assert_eq!(state.context, Some(first));
    // How long ago the newest record was stored, by the database's clock.
    let age = state
        .newest_record_age
        .expect("the database tells the newest record's age");
    assert!(age < Duration::from_secs(60), "{age:?}");
    assert_eq!(
        s.get_call("acme", "rtc_2").await.unwrap().unwrap().version,
        1
    );

    // A checkpoint is replaced by a later one of the same function call.
    let mut cp = checkpoint("rtc_2", "fc_9");
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Checkpoint {
            function_call_id: "fc_9".into(),
            checkpoint: Box::new(cp.clone()),
        },
    )
    .await
    .unwrap();
    cp.suspended = json!({"pc": 4});
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Checkpoint {
            function_call_id: "fc_9".into(),
            checkpoint: Box::new(cp.clone()),
        },
    )
    .await
    .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert_eq!(state.checkpoints.get("fc_9"), Some(&cp));

    // A checkpoint that lands after its function call's record (a write given up on while
    // the database did not answer, stored once it did) is no run to resume: ignored.
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("rtc_2", "fc_1")),
        },
    )
    .await
    .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert!(!state.checkpoints.contains_key("fc_1"), "{state:?}");

    s.journal_append("acme", "rtc_2", JournalEntry::Ended)
        .await
        .unwrap();
    let ended_at = s.get_call("acme", "rtc_2").await.unwrap().unwrap().ended_at;
    s.journal_append("acme", "rtc_2", JournalEntry::Ended)
        .await
        .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert!(state.ended);
    assert!(state.checkpoints.is_empty());
    assert!(raw_cells(&h, "call_checkpoints").await.is_empty());
    assert_eq!(
        s.get_call("acme", "rtc_2").await.unwrap().unwrap().ended_at,
        ended_at,
        "the first end time stays"
    );
}

/// Many calls' claims and finishes at once (on SQLite, written in groups by one thread): each
/// is answered once, every record lands with the context it changed, no claim is left over,
/// and a finish of a node fenced off, sent among the others, is refused with nothing stored.
async fn concurrent_claims_and_finishes_each_land_once_and_a_fenced_one_is_refused(h: Harness) {
    use std::time::Duration;
    use switchboard_runtime::journal::JournalError;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    s.register_node("n1", None, Duration::from_secs(60))
        .await
        .unwrap();
    for c in 0..8 {
        let info = call_info("acme", &format!("c{c}"));
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
    }
    // c7 changes owner: its fence 1 is stale.
    s.register_node("n2", None, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        s.take_over_call("acme", "c7", "n2", 1).await.unwrap(),
        Some(2)
    );
    let journal = s.journal("acme").fenced(1);
    let mut runs = tokio::task::JoinSet::new();
    for c in 0..8 {
        for i in 0..25 {
            let journal = journal.clone();
            runs.spawn(async move {
                let call = format!("c{c}");
                let fc = format!("fc_{i}");
                let inv = Invocation {
                    call_id: call.clone(),
                    function_call_id: fc.clone(),
                    name: "save_meal".into(),
                    arguments_json: "{}".into(),
                    response_id: None,
                    item_id: None,
                };
                let claimed = journal.claim(&call, &inv).await;
                let mut ctx = Context::new(&call_info("acme", &call), json!({}));
                ctx.workflow = std::sync::Arc::new(json!({ "last": i }));
                let finished = journal
                    .append(
                        &call,
                        JournalEntry::Finished {
                            record: Box::new(record(&fc, true)),
                            context: Some(ctx),
                            handoffs: 0,
                        },
                    )
                    .await;
                (c, claimed, finished)
            });
        }
    }
    while let Some(run) = runs.join_next().await {
        let (c, claimed, finished) = run.unwrap();
        if c == 7 {
            assert!(
                matches!(claimed, Err(JournalError::Fenced(_))),
                "{claimed:?}"
            );
            assert!(
                matches!(finished, Err(JournalError::Fenced(_))),
                "{finished:?}"
            );
        } else {
            assert_eq!(claimed.unwrap(), Claim::Claimed);
            finished.unwrap();
        }
    }
    for c in 0..7 {
        let state = journal.load(&format!("c{c}")).await.unwrap().unwrap();
        assert_eq!(state.records.len(), 25, "c{c}: every finish recorded once");
        assert!(
            state.claimed.is_empty(),
            "c{c}: the records settled the claims"
        );
        let ctx = state.context.expect("a started call has a context");
        assert!(ctx.workflow["last"].is_u64(), "c{c}: {:?}", ctx.workflow);
    }
    let n2 = s.journal("acme").fenced(2);
    let state = n2.load("c7").await.unwrap().unwrap();
    assert!(
        state.records.is_empty() && state.claimed.is_empty(),
        "the stale node stored nothing"
    );
    assert_eq!(*state.context.expect("c7's context").workflow, json!({}));
}

/// A claim that waits while its function call's finish commits (another path recording the
/// same function call) must see that record: `Taken`, never a second run.
async fn a_claim_racing_its_function_calls_finish_is_taken(h: Harness) {
    use std::time::Duration;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "c1");
    let ctx = Context::new(&info, json!({}));
    s.register_node("n1", None, Duration::from_secs(60))
        .await
        .unwrap();
    s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
        .await
        .unwrap()
        .unwrap();
    let journal = s.journal("acme").fenced(1);
    let inv = Invocation {
        call_id: "c1".into(),
        function_call_id: "fc_r".into(),
        name: "save_meal".into(),
        arguments_json: "{}".into(),
        response_id: None,
        item_id: None,
    };
    // A finish in flight on another connection: the call's row locked, the record written,
    // not yet committed.
    let record = "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                  VALUES ('acme', 'c1', 'fc_r', '{}', '2026-11-24T00:00:00.000Z')";
    macro_rules! race {
        ($conn:expr, $begin:expr) => {{
            let mut conn = $conn;
            conn.execute($begin).await.unwrap();
            conn.execute(
                "UPDATE calls SET handoffs = handoffs WHERE tenant_id = 'acme' AND id = 'c1'",
            )
            .await
            .unwrap();
            conn.execute(record).await.unwrap();
            let claiming = {
                let journal = journal.clone();
                let inv = inv.clone();
                tokio::spawn(async move { journal.claim("c1", &inv).await })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            conn.execute("COMMIT").await.unwrap();
            claiming.await.unwrap().unwrap()
        }};
    }
    let claim = match h.backend {
        Backend::Sqlite => race!(
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap(),
            "BEGIN IMMEDIATE"
        ),
        Backend::Postgres => race!(sqlx::PgConnection::connect(&h.url).await.unwrap(), "BEGIN"),
    };
    assert_eq!(
        claim,
        Claim::Taken,
        "a recorded function call is claimed again"
    );
}

/// The journal's writer leaves SQLite's checkpoints to a connection of its own: while tool
/// calls keep writing, the write-ahead log is still copied back and rewound, so it does not
/// grow with every write the node ever made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_write_ahead_log_stays_small_while_the_journal_writes() {
    use std::time::Duration;
    use switchboard_store::Door;
    run(Backend::Sqlite, |h| async move {
        let s = &h.store;
        tenant(s, "acme").await;
        s.register_node("n1", None, Duration::from_secs(60))
            .await
            .unwrap();
        let info = call_info("acme", "c1");
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
        let journal = s.journal("acme").fenced(1);
        let wal = format!("{}-wal", h.url);
        let mut largest = 0;
        for round in 0..10 {
            // One after another: a transaction each, as tool calls spread over time are.
            for i in 0..300 {
                let fc = format!("fc_{round}_{i}");
                let inv = Invocation {
                    call_id: "c1".into(),
                    function_call_id: fc.clone(),
                    name: "save_meal".into(),
                    arguments_json: "{}".into(),
                    response_id: None,
                    item_id: None,
                };
                journal.claim("c1", &inv).await.unwrap();
                let finished = JournalEntry::Finished {
                    record: Box::new(record(&fc, true)),
                    context: None,
                    handoffs: 0,
                };
                journal.append("c1", finished).await.unwrap();
            }
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        // 6,000 transactions; uncheckpointed, the log holds all of them (tens of MiB).
        eprintln!("largest write-ahead log: {largest} bytes");
        assert!(
            largest < 32 << 20,
            "the write-ahead log grew to {largest} bytes"
        );
        for fc in ["fc_0_0", "fc_9_299"] {
            assert!(journal.recorded("c1", fc).await.unwrap().is_some(), "{fc}");
        }
    })
    .await;
}

/// On PostgreSQL a finish waiting for its call's row (locked by another node's transaction,
/// say around a takeover) holds up no other call's: the journal writes on more than one
/// connection, so the next batch goes while the first waits. With one, every tool call of the
/// node waited behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_waiting_for_its_calls_row_holds_up_no_other_call() {
    run(Backend::Postgres, |h| async move {
        let (journal, mut holder) = calls_with_rows_held(&h, &["c1"], &["c1", "c2"]).await;
        let first = spawn_finish(&journal, "c1", "fc_1");
        lock_waits_reach(&h, 1).await;
        finish_within(&journal, "c2", "fc_2", Duration::from_secs(5))
            .await
            .expect("the other call's finish waited behind the locked call's");
        assert!(journal.recorded("c2", "fc_2").await.unwrap().is_some());
        assert!(
            !first.is_finished(),
            "the locked call's finish went past the lock"
        );
        holder.execute("COMMIT").await.unwrap();
        first.await.unwrap().unwrap();
        assert!(journal.recorded("c1", "fc_1").await.unwrap().is_some());
    })
    .await;
}

/// However many calls' rows are held, the journal's writer is not: a batch waits a bounded
/// time for a row, then gives its jobs to the ordinary path (where only their own callers
/// wait), so a third call's finish lands while two others still wait for theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finishes_waiting_for_held_rows_leave_the_journal_writer_free() {
    run(Backend::Postgres, |h| async move {
        let calls = ["c1", "c2", "c3"];
        let (journal, mut holder) = calls_with_rows_held(&h, &calls[..2], &calls).await;
        let waiting = [
            spawn_finish(&journal, "c1", "fc_1"),
            spawn_finish(&journal, "c2", "fc_2"),
        ];
        lock_waits_reach(&h, 2).await;
        finish_within(&journal, "c3", "fc_3", Duration::from_secs(10))
            .await
            .expect("the third call's finish waited behind the held rows");
        assert!(
            waiting.iter().all(|w| !w.is_finished()),
            "a finish went past a held row"
        );
        holder.execute("COMMIT").await.unwrap();
        for (w, (call, fc)) in waiting.into_iter().zip([("c1", "fc_1"), ("c2", "fc_2")]) {
            w.await.unwrap().unwrap();
            assert!(journal.recorded(call, fc).await.unwrap().is_some(), "{fc}");
        }
    })
    .await;
}

/// `calls` started on node `n1`, and a transaction of another connection holding the rows of
/// `held` (committed or rolled back by the caller).
async fn calls_with_rows_held(
    h: &Harness,
    held: &[&str],
    calls: &[&str],
) -> (switchboard_store::TenantJournal, sqlx::PgConnection) {
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    s.register_node("n1", None, Duration::from_secs(60))
        .await
        .unwrap();
    for id in calls {
        let info = call_info("acme", id);
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
    }
    let mut holder = sqlx::PgConnection::connect(&h.url).await.unwrap();
    holder.execute("BEGIN").await.unwrap();
    for id in held {
        sqlx::query("SELECT 1 FROM calls WHERE tenant_id = 'acme' AND id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut holder)
            .await
            .unwrap();
    }
    (s.journal("acme").fenced(1), holder)
}

fn finished(fc: &str) -> JournalEntry {
    JournalEntry::Finished {
        record: Box::new(record(fc, true)),
        context: None,
        handoffs: 0,
    }
}

fn spawn_finish(
    journal: &switchboard_store::TenantJournal,
    call: &str,
    fc: &str,
) -> tokio::task::JoinHandle<Result<(), JournalError>> {
    let (journal, call, entry) = (journal.clone(), call.to_owned(), finished(fc));
    tokio::spawn(async move { journal.append(&call, entry).await })
}

/// Appends `fc`'s finish to `call`; `Err` when it has not landed within `limit`.
async fn finish_within(
    journal: &switchboard_store::TenantJournal,
    call: &str,
    fc: &str,
    limit: Duration,
) -> Result<(), tokio::time::error::Elapsed> {
    let appended = tokio::time::timeout(limit, journal.append(call, finished(fc))).await?;
    appended.unwrap();
    Ok(())
}

/// Waits until `n` of the test database's sessions wait for a lock.
async fn lock_waits_reach(h: &Harness, n: i64) {
    let mut watcher = sqlx::PgConnection::connect(&h.url).await.unwrap();
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sqlx::query_scalar::<_, i64>(waiting)
        .fetch_one(&mut watcher)
        .await
        .unwrap()
        < n
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {n} finishes ever waited for a held row"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A request dropped while its transaction begins (its client went away) leaves the pooled
/// connection as it found it: every later statement and transaction on it works. On
/// PostgreSQL a `BEGIN` abandoned between sending and its answer used to leave the server
/// inside a transaction sqlx did not count: later users' statements ran inside it, uncommitted,
/// and the next `BEGIN ISOLATION LEVEL …` on that connection failed, and with it every
/// statement after (`current transaction is aborted`).
async fn a_write_dropped_while_its_transaction_begins_leaves_the_pool_clean(h: Harness) {
    let options = StoreOptions {
        max_connections: 1,
        ..StoreOptions::default()
    };
    let s = Store::connect_with(&h.url, h.key.clone(), options)
        .await
        .unwrap();
    tenant(&s, "acme").await;
    let info = call_info("acme", "c1");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    let journal = s.journal("acme");
    // A write is polled `polls` times, then dropped: for some of these, while its `BEGIN` is
    // on its way to the server.
    for polls in 1..40 {
        let entry = JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("c1", "fc_1")),
        };
        let mut write = Box::pin(journal.append("c1", entry));
        for _ in 0..polls {
            let ready = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(write.as_mut().poll(cx).is_ready())
            })
            .await;
            if ready {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(write);
        // A statement of its own, then a transaction, on the same (only) connection.
        s.call_owner("acme", "c1").await.unwrap();
        let state = journal.load("c1").await;
        assert!(
            matches!(state, Ok(Some(_))),
            "after a write dropped at its poll {polls}: {state:?}"
        );
    }
    s.close().await;
}
