//! Calls: their pinned versions, their context under concurrent updates, their list, and their one
//! owner.

use super::*;

on_both_backends!(
    create_call_then_started_keeps_pinned_versions,
    concurrent_context_updates_all_land,
    update_call_context_refusals,
    calls_list_newest_first_with_a_cursor,
    a_call_has_one_owner_and_a_stale_owner_is_fenced_off,
    the_live_call_limit_counts_live_calls_of_the_tenant_only,
    concurrent_starts_take_no_more_places_than_the_limit,
    a_tenants_live_calls_follow_every_start_and_end,
    orphans_come_in_a_fixed_order_past_those_skipped,
    idle_orphans_are_the_dead_nodes_http_calls_unused_since,
);

/// The idle orphans the expiry ends: a dead node's HTTP-door calls that started before the
/// time and recorded no invocation since; not one recorded since, a live node's, a phone call,
/// nor an ended call.
async fn idle_orphans_are_the_dead_nodes_http_calls_unused_since(h: Harness) {
    use std::time::Duration;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    for node in ["dead", "alive"] {
        s.register_node(node, None, Duration::from_secs(60))
            .await
            .unwrap();
    }
    let start = |id: &'static str, node: &'static str, door| async move {
        let info = call_info("acme", id);
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 100, (node, door))
            .await
            .unwrap()
            .unwrap();
    };
    start("idle", "dead", Door::Http).await;
    start("used", "dead", Door::Http).await;
    start("ended", "dead", Door::Http).await;
    start("owned", "alive", Door::Http).await;
    start("phone", "dead", Door::Realtime).await;
    s.journal_append("acme", "ended", JournalEntry::Ended)
        .await
        .unwrap();
    s.retire_node("dead").await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let finished = JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: None,
        handoffs: 0,
    };
    s.journal_append("acme", "used", finished).await.unwrap();
    let idle = s
        .idle_orphaned_calls(Door::Http, Duration::from_millis(200), 10)
        .await
        .unwrap();
    assert_eq!(idle, [("acme".to_owned(), "idle".to_owned())]);
    // Idle for an hour: none of them yet.
    assert!(
        s.idle_orphaned_calls(Door::Http, Duration::from_secs(3600), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A dead node's live calls of a door come as orphans in the order of tenant and call id, past
/// the ones a sweep skips (those it failed to take over, which come first); a live node's,
/// another door's and ended calls do not come at all.
async fn orphans_come_in_a_fixed_order_past_those_skipped(h: Harness) {
    use std::time::Duration;
    use switchboard_store::Door;
    let s = &h.store;
    for t in ["acme", "globex"] {
        tenant(s, t).await;
    }
    s.register_node("dead", None, Duration::from_secs(60))
        .await
        .unwrap();
    s.register_node("alive", None, Duration::from_secs(60))
        .await
        .unwrap();
    let start = |tenant: &'static str, id: &'static str, node: &'static str, door| async move {
        let info = call_info(tenant, id);
        let ctx = Context::new(&info, json!({}));
        s.create_call_within(tenant, &info, &json!({}), &ctx, 100, (node, door))
            .await
            .unwrap()
            .unwrap();
    };
    for (tenant, id) in [
        ("globex", "c2"),
        ("acme", "c3"),
        ("acme", "c1"),
        ("globex", "c1"),
    ] {
        start(tenant, id, "dead", Door::Realtime).await;
    }
    start("acme", "c4", "dead", Door::Realtime).await;
    s.journal("acme")
        .append("c4", JournalEntry::Ended)
        .await
        .unwrap();
    start("acme", "c5", "alive", Door::Realtime).await;
    start("acme", "c6", "dead", Door::Http).await;
    s.retire_node("dead").await.unwrap();
    let ids = |rows: Vec<(String, String, i64)>| -> Vec<String> {
        rows.into_iter()
            .map(|(t, c, _)| format!("{t}/{c}"))
            .collect()
    };
    assert_eq!(
        ids(s.orphaned_calls(Door::Realtime, 10, 0).await.unwrap()),
        ["acme/c1", "acme/c3", "globex/c1", "globex/c2"]
    );
    assert_eq!(
        ids(s.orphaned_calls(Door::Realtime, 2, 1).await.unwrap()),
        ["acme/c3", "globex/c1"]
    );
    assert!(
        s.orphaned_calls(Door::Realtime, 10, 4)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Starts call `id` of `tenant` on node `n1` within a limit of `max` live calls.
async fn start_within(
    s: &Store,
    tenant: &str,
    id: &str,
    max: usize,
    door: switchboard_store::Door,
) -> Result<Option<switchboard_store::CallRow>, StoreError> {
    let info = call_info(tenant, id);
    let ctx = Context::new(&info, json!({}));
    s.create_call_within(tenant, &info, &json!({}), &ctx, max, ("n1", door))
        .await
}

/// A call start counts the tenant's live calls against its limit: not its ended calls, not
/// another tenant's.
async fn the_live_call_limit_counts_live_calls_of_the_tenant_only(h: Harness) {
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    s.register_node("n1", None, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let start = |tenant: &'static str, id: &'static str| async move {
        start_within(s, tenant, id, 2, Door::Http)
            .await
            .unwrap()
            .is_some()
    };
    assert!(start("acme", "a1").await);
    assert!(start("acme", "a2").await);
    assert!(!start("acme", "a3").await, "two live calls are the limit");
    assert!(
        start("globex", "g1").await,
        "another tenant's calls do not count"
    );
    s.journal_append("acme", "a1", JournalEntry::Ended)
        .await
        .unwrap();
    assert!(start("acme", "a3").await, "an ended call frees its place");
    assert!(!start("acme", "a4").await);
    assert_eq!(
        s.get_call("acme", "a1").await.unwrap().unwrap().status,
        CallStatus::Ended
    );
}

/// Starts racing for a tenant's last places take exactly the places there are, and a start
/// within the limit refuses a call id the tenant used already and a tenant that does not exist
/// as a plain insert would.
async fn concurrent_starts_take_no_more_places_than_the_limit(h: Harness) {
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    s.register_node("n1", None, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let start = |tenant: &'static str, id: String| async move {
        start_within(s, tenant, &id, 5, Door::Realtime).await
    };
    let started = futures_util::future::join_all((0..20).map(|n| start("acme", format!("c{n}"))))
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Some(_))))
        .count();
    assert_eq!(started, 5, "five places, five calls");
    let stored = s.list_calls("acme", Page::first(100)).await.unwrap();
    assert_eq!(stored.items.len(), 5, "a refused start stores nothing");

    // Which five won is the race's: end one of them, and its id stays used.
    let ended = stored.items[0].id.clone();
    s.journal_append("acme", &ended, JournalEntry::Ended)
        .await
        .unwrap();
    let again = start("acme", ended).await.unwrap_err();
    assert!(matches!(again, StoreError::Conflict(_)), "{again:?}");
    let nobody = start("nobody", "n1".to_owned()).await.unwrap_err();
    assert!(matches!(nobody, StoreError::NotFound(_)), "{nobody:?}");
}

/// The number of live calls a tenant keeps (read by every call start) is the number of its
/// calls that are live, through starts with and without the limit, ends, an end repeated, and
/// ended calls removed.
async fn a_tenants_live_calls_follow_every_start_and_end(h: Harness) {
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    s.register_node("n1", None, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let kept_and_counted = || async {
        let kept = query_i64(&h, "SELECT live_calls FROM tenants WHERE id = 'acme'").await;
        let counted = query_i64(
            &h,
            "SELECT COUNT(*) FROM calls WHERE tenant_id = 'acme' AND status = 'active'",
        )
        .await;
        (kept, counted)
    };
    for n in 0..4 {
        start_within(s, "acme", &format!("w{n}"), 10, Door::Realtime)
            .await
            .unwrap()
            .unwrap();
    }
    let info = call_info("acme", "plain");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    let info = call_info("globex", "g1");
    s.create_call("globex", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    assert_eq!(kept_and_counted().await, (5, 5));
    for call in ["w0", "w1", "w1", "plain"] {
        s.journal_append("acme", call, JournalEntry::Ended)
            .await
            .unwrap();
    }
    assert_eq!(
        kept_and_counted().await,
        (2, 2),
        "an end repeated counts once"
    );
    execute_raw(
        &h,
        &["DELETE FROM calls WHERE tenant_id = 'acme' AND id IN ('w0', 'w2')"],
    )
    .await;
    assert_eq!(
        kept_and_counted().await,
        (1, 1),
        "a live call removed is no longer live"
    );
    assert_eq!(
        query_i64(&h, "SELECT live_calls FROM tenants WHERE id = 'globex'").await,
        1
    );
}

async fn create_call_then_started_keeps_pinned_versions(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_3");
    let ctx = Context::new(&info, json!({"auth_token": "t"}));
    let pinned = json!({"save_meal": 3, "request_transfer": 1});
    let row = s.create_call("acme", &info, &pinned, &ctx).await.unwrap();
    assert_eq!(row.version, 0);
    assert_eq!(row.status, CallStatus::Active);
    assert_eq!(
        s.get_call("acme", "rtc_3").await.unwrap(),
        Some(row.clone())
    );
    let e = s
        .create_call("acme", &info, &pinned, &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");

    s.journal_append(
        "acme",
        "rtc_3",
        JournalEntry::Started {
            call: info.clone(),
            context: ctx.clone(),
        },
    )
    .await
    .unwrap();
    let after = s.get_call("acme", "rtc_3").await.unwrap().unwrap();
    assert_eq!(after.pinned, pinned);
    assert_eq!(after.context, ctx);
    let state = s.journal_load("acme", "rtc_3").await.unwrap().unwrap();
    assert_eq!(state.call, Some(info));
}

async fn concurrent_context_updates_all_land(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_busy");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    // Two stores on one database stand for two nodes; 50 tasks, each on its own connection.
    let options = StoreOptions {
        max_connections: 25,
        ..StoreOptions::default()
    };
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(
            Store::connect_with(&h.url, h.key.clone(), options.clone())
                .await
                .unwrap(),
        );
    }
    let gate = Arc::new(tokio::sync::Barrier::new(50));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let node = nodes[i % 2].clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            gate.wait().await;
            node.update_call_context("acme", "rtc_busy", |c| c.apply(&append_item(i)))
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let row = s.get_call("acme", "rtc_busy").await.unwrap().unwrap();
    let items: BTreeSet<u64> = row.context.workflow["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(items, (0..50).collect::<BTreeSet<u64>>());
    assert_eq!(row.context.workflow["items"].as_array().unwrap().len(), 50);
    assert_eq!(row.version, 50);
    for n in nodes {
        n.close().await;
    }
}

async fn update_call_context_refusals(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_4");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    let ctx = s
        .update_call_context("acme", "rtc_4", |c| {
            c.apply(&Write::Set {
                scope: Scope::Workflow,
                keys: vec!["x".into()].into(),
                value: json!("text"),
            })
        })
        .await
        .unwrap();
    assert_eq!(ctx.workflow["x"], json!("text"));

    // A write the context refuses changes nothing.
    let e = s
        .update_call_context("acme", "rtc_4", |c| {
            c.apply(&Write::Set {
                scope: Scope::Workflow,
                keys: vec!["y".into()].into(),
                value: json!(1),
            })?;
            c.apply(&Write::Append {
                scope: Scope::Workflow,
                keys: vec!["x".into()].into(),
                value: json!(1),
            })
        })
        .await
        .unwrap_err();
    let StoreError::Rejected(inner) = &e else {
        panic!("expected Rejected, got {e:?}");
    };
    assert!(inner.to_string().contains("not a list"), "{inner}");
    let row = s.get_call("acme", "rtc_4").await.unwrap().unwrap();
    assert_eq!(row.version, 1);
    assert_eq!(row.context.workflow.get("y"), None);

    let e = s
        .update_call_context("acme", "rtc_nope", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    s.journal_append("acme", "rtc_4", JournalEntry::Ended)
        .await
        .unwrap();
    let e = s
        .update_call_context("acme", "rtc_4", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
}

async fn calls_list_newest_first_with_a_cursor(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let info = call_info("acme", &format!("call_{i}"));
        s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
            .await
            .unwrap();
        ids.push(info.id);
    }
    let mut page = Page::first(3);
    let mut seen = Vec::new();
    loop {
        let got = s.list_calls("acme", page).await.unwrap();
        seen.extend(got.items.into_iter().map(|c| (c.created_at, c.id)));
        match got.next {
            Some(n) => page = Page::after(3, n),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, expected, "newest first, ties by id");
    let got: BTreeSet<String> = seen.into_iter().map(|(_, id)| id).collect();
    assert_eq!(got, ids.into_iter().collect::<BTreeSet<_>>());
}

async fn a_call_has_one_owner_and_a_stale_owner_is_fenced_off(h: Harness) {
    use std::time::Duration;
    use switchboard_runtime::journal::JournalError;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "c1");
    let ctx = Context::new(&info, json!({}));
    s.register_node("n1", Some("http://10.0.0.1:8080"), Duration::from_secs(60))
        .await
        .unwrap();
    s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
        .await
        .unwrap()
        .unwrap();
    let owner = s.call_owner("acme", "c1").await.unwrap().unwrap();
    let node = owner.node.clone().unwrap();
    assert_eq!((node.id.as_str(), node.alive, owner.fence), ("n1", true, 1));
    assert!(!owner.orphaned());
    assert!(
        s.orphaned_calls(Door::Http, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );

    // n1's journal claims a function call: once.
    let n1 = s.journal("acme").fenced(1);
    let inv = |fc: &str| Invocation {
        call_id: "c1".into(),
        function_call_id: fc.into(),
        name: "save_meal".into(),
        arguments_json: "{}".into(),
        response_id: None,
        item_id: None,
    };
    assert_eq!(n1.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Claimed);
    assert_eq!(n1.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Taken);

    // A new process at n1's address: n1 is dead, its call an orphan; n2 takes it over, once.
    s.register_node("n2", Some("http://10.0.0.1:8080"), Duration::from_secs(60))
        .await
        .unwrap();
    let owner = s.call_owner("acme", "c1").await.unwrap().unwrap();
    assert!(owner.orphaned(), "{owner:?}");
    assert_eq!(s.orphaned_calls(Door::Http, 10, 0).await.unwrap().len(), 1);
    assert_eq!(
        s.take_over_call("acme", "c1", "n2", 1).await.unwrap(),
        Some(2)
    );
    assert_eq!(s.take_over_call("acme", "c1", "n3", 1).await.unwrap(), None);

    // n1 wakes up: every write it tries is refused, nothing stored.
    let fenced = |r: Result<(), JournalError>| matches!(r, Err(JournalError::Fenced(_)));
    assert!(matches!(
        n1.claim("c1", &inv("fc_2")).await,
        Err(JournalError::Fenced(_))
    ));
    let finished = JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: None,
        handoffs: 0,
    };
    assert!(fenced(n1.append("c1", finished.clone()).await));
    assert!(fenced(n1.append("c1", JournalEntry::Ended).await));

    // The new owner finds n1's claimed run, which never reached an effect, and runs it.
    let n2 = s.journal("acme").fenced(2);
    let state = n2.load("c1").await.unwrap().unwrap();
    assert_eq!(state.claimed.keys().collect::<Vec<_>>(), ["fc_1"]);
    assert_eq!(state.claimed["fc_1"], inv("fc_1"));
    assert!(state.records.is_empty() && !state.ended);
    let mut after = ctx.clone();
    after.apply(&append_item(1)).unwrap();
    let finished = JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: Some(after),
        handoffs: 0,
    };
    n2.append("c1", finished).await.unwrap();
    let state = n2.load("c1").await.unwrap().unwrap();
    assert_eq!(state.context.unwrap().workflow["items"], json!([1]));
    assert!(state.claimed.is_empty(), "the record replaces the claim");
    // Recorded: not claimed again.
    assert_eq!(n2.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Taken);
    n2.append("c1", JournalEntry::Ended).await.unwrap();
    assert!(
        s.orphaned_calls(Door::Http, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    s.retire_node("n2").await.unwrap();
}
