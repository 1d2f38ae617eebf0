//! Searching a tenant's calls: every call reached a page at a time in both directions, each
//! search key, refusals naming the parameter, and no other tenant's call whatever the cursor.

use super::*;
use switchboard_store::{CallPage, CallSearch, CallsAt, StatusFilter, TimeBound};

on_both_backends!(
    pages_reach_every_call_both_ways,
    each_search_key_finds_its_calls,
    another_tenants_calls_never_appear,
    bad_searches_are_refused_naming_the_parameter,
    calls_stored_before_the_user_index_are_found_by_user,
);

/// Starts a call of `tenant` from `from`, with `user`, and returns its id.
async fn start(s: &Store, tenant: &str, id: &str, from: &str, user: Value) -> String {
    let info = CallInfo {
        from: Some(from.to_owned()),
        to: Some("+14155550199".to_owned()),
        ..call_info(tenant, id)
    };
    s.create_call(tenant, &info, &json!({}), &Context::new(&info, user))
        .await
        .unwrap();
    // Calls start a few milliseconds apart, so the newest first is the order they started in.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    id.to_owned()
}

/// Records one invocation of `tool` in the call, failing with `error` if given.
async fn invoke(
    s: &Store,
    tenant: &str,
    call: &str,
    fc: &str,
    tool: &str,
    error: Option<ErrorCode>,
) {
    let record = InvocationRecord {
        tool: tool.to_owned(),
        ok: error.is_none(),
        error,
        ..record(fc, true)
    };
    let entry = JournalEntry::Finished {
        record: Box::new(record),
        context: None,
        handoffs: 0,
    };
    s.journal_append(tenant, call, entry).await.unwrap();
}

async fn search(s: &Store, tenant: &str, search: &CallSearch, at: CallsAt, limit: u32) -> CallPage {
    s.search_calls(tenant, search, &at, limit).await.unwrap()
}

fn ids(page: &CallPage) -> Vec<&str> {
    page.items.iter().map(|c| c.id.as_str()).collect()
}

async fn found(s: &Store, tenant: &str, q: CallSearch) -> Vec<String> {
    let page = search(s, tenant, &q, CallsAt::Newest, 200).await;
    page.items.into_iter().map(|c| c.id).collect()
}

async fn pages_reach_every_call_both_ways(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let mut all = Vec::new();
    for i in 0..7 {
        all.push(start(s, "acme", &format!("call_{i}"), "+1555000", json!({})).await);
    }
    all.reverse(); // newest first; ties of the start's millisecond go by id, also descending
    let any = CallSearch::default();
    let first = search(s, "acme", &any, CallsAt::Newest, 3).await;
    assert_eq!(ids(&first), all[0..3]);
    assert_eq!(first.previous, None, "the newest page has no newer one");
    let second = search(
        s,
        "acme",
        &any,
        CallsAt::After(first.next.clone().unwrap()),
        3,
    )
    .await;
    assert_eq!(ids(&second), all[3..6]);
    let third = search(
        s,
        "acme",
        &any,
        CallsAt::After(second.next.clone().unwrap()),
        3,
    )
    .await;
    assert_eq!(ids(&third), all[6..7]);
    assert_eq!(third.next, None, "the last page has no older one");
    // Back up: `previous` of each page gives the page before it, exactly.
    let back = search(
        s,
        "acme",
        &any,
        CallsAt::Before(third.previous.clone().unwrap()),
        3,
    )
    .await;
    assert_eq!(ids(&back), ids(&second));
    let back = search(
        s,
        "acme",
        &any,
        CallsAt::Before(back.previous.clone().unwrap()),
        3,
    )
    .await;
    assert_eq!(ids(&back), ids(&first));
    assert_eq!(back.previous, None, "back at the newest calls");
    assert!(back.next.is_some());
    // A call that starts meanwhile shows on the newest page, not inside the pages read.
    start(s, "acme", "call_new", "+1555000", json!({})).await;
    let again = search(s, "acme", &any, CallsAt::After(first.next.unwrap()), 3).await;
    assert_eq!(ids(&again), all[3..6]);
    let newest = search(s, "acme", &any, CallsAt::Newest, 1).await;
    assert_eq!(ids(&newest), ["call_new"]);
}

async fn each_search_key_finds_its_calls(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    start(
        s,
        "acme",
        "c_alice",
        "+14155550001",
        json!({"id": "alice", "auth_token": "tok"}),
    )
    .await;
    start(s, "acme", "c_bob", "+14155550002", json!({"id": 42})).await;
    start(s, "acme", "c_anon", "+14155550001", json!({})).await;
    invoke(s, "acme", "c_alice", "fc_1", "book_table", None).await;
    invoke(
        s,
        "acme",
        "c_bob",
        "fc_1",
        "book_table",
        Some(ErrorCode::Timeout),
    )
    .await;
    invoke(s, "acme", "c_bob", "fc_2", "save_meal", None).await;
    invoke(
        s,
        "acme",
        "c_anon",
        "fc_1",
        "save_meal",
        Some(ErrorCode::ValidationFailed),
    )
    .await;
    s.journal_append("acme", "c_alice", JournalEntry::Ended)
        .await
        .unwrap();
    let q = CallSearch::default;

    let by_id = found(
        s,
        "acme",
        CallSearch {
            call_id: Some("c_bob".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_id, ["c_bob"]);
    let by_from = found(
        s,
        "acme",
        CallSearch {
            number: Some("+14155550001".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_from, ["c_anon", "c_alice"]);
    let by_to = found(
        s,
        "acme",
        CallSearch {
            number: Some("+14155550199".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_to.len(), 3, "the number called matches too");
    let by_user = found(
        s,
        "acme",
        CallSearch {
            user_id: Some("alice".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_user, ["c_alice"]);
    let by_number_id = found(
        s,
        "acme",
        CallSearch {
            user_id: Some("42".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(
        by_number_id,
        ["c_bob"],
        "a numeric user id is found as its digits"
    );
    let by_tool = found(
        s,
        "acme",
        CallSearch {
            tool: Some("book_table".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_tool, ["c_bob", "c_alice"]);
    let by_error = found(
        s,
        "acme",
        CallSearch {
            error: Some("timeout".into()),
            ..q()
        },
    )
    .await;
    assert_eq!(by_error, ["c_bob"]);
    let active = found(
        s,
        "acme",
        CallSearch {
            status: Some(StatusFilter::Active),
            ..q()
        },
    )
    .await;
    assert_eq!(active, ["c_anon", "c_bob"]);
    let ended = found(
        s,
        "acme",
        CallSearch {
            status: Some(StatusFilter::Ended),
            ..q()
        },
    )
    .await;
    assert_eq!(ended, ["c_alice"]);
    let failed = found(
        s,
        "acme",
        CallSearch {
            status: Some(StatusFilter::Failed),
            ..q()
        },
    )
    .await;
    assert_eq!(failed, ["c_anon", "c_bob"]);
    let fine = CallSearch {
        failed: Some(false),
        ..q()
    };
    assert_eq!(
        found(s, "acme", fine).await,
        ["c_alice"],
        "no invocation failed"
    );
    let both = CallSearch {
        number: Some("+14155550001".into()),
        status: Some(StatusFilter::Failed),
        ..q()
    };
    assert_eq!(found(s, "acme", both).await, ["c_anon"], "keys combine");
    let nobody = found(
        s,
        "acme",
        CallSearch {
            user_id: Some("carol".into()),
            ..q()
        },
    )
    .await;
    assert!(nobody.is_empty());

    // The list's own fields: numbers, user id, whether it failed; never a token.
    let page = search(s, "acme", &q(), CallsAt::Newest, 10).await;
    let alice = page.items.iter().find(|c| c.id == "c_alice").unwrap();
    assert_eq!(alice.from.as_deref(), Some("+14155550001"));
    assert_eq!(alice.to.as_deref(), Some("+14155550199"));
    assert_eq!(alice.user_id.as_deref(), Some("alice"));
    assert_eq!(alice.status, CallStatus::Ended);
    assert!(alice.ended_at.is_some());
    assert!(!alice.failed);
    assert!(page.items.iter().find(|c| c.id == "c_bob").unwrap().failed);
    assert_eq!(
        page.items
            .iter()
            .find(|c| c.id == "c_anon")
            .unwrap()
            .user_id,
        None
    );
    assert!(!serde_json::to_string(&page).unwrap().contains("tok"));

    // A time range: calls started at or after `since` and before `until`.
    let all = search(s, "acme", &q(), CallsAt::Newest, 10).await;
    let middle = &all.items[1].created_at;
    let since = TimeBound::parse("since", middle).unwrap();
    let from_middle = found(
        s,
        "acme",
        CallSearch {
            since: Some(since),
            ..q()
        },
    )
    .await;
    let at_or_after: Vec<String> = all
        .items
        .iter()
        .filter(|c| c.created_at >= *middle)
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(from_middle, at_or_after);
    let until = TimeBound::parse("until", middle).unwrap();
    let before_middle = found(
        s,
        "acme",
        CallSearch {
            until: Some(until),
            ..q()
        },
    )
    .await;
    let before: Vec<String> = all
        .items
        .iter()
        .filter(|c| c.created_at < *middle)
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(before_middle, before);
    let future = TimeBound::parse("since", "2999-01-01").unwrap();
    assert!(
        found(
            s,
            "acme",
            CallSearch {
                since: Some(future),
                ..q()
            }
        )
        .await
        .is_empty()
    );
    let past = TimeBound::parse("since", "2000-01-01T00:00:00+02:00").unwrap();
    assert_eq!(
        found(
            s,
            "acme",
            CallSearch {
                since: Some(past),
                ..q()
            }
        )
        .await
        .len(),
        3
    );
}

async fn another_tenants_calls_never_appear(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    for i in 0..4 {
        start(
            s,
            "acme",
            &format!("a_{i}"),
            "+14155550001",
            json!({"id": "shared"}),
        )
        .await;
        invoke(
            s,
            "acme",
            &format!("a_{i}"),
            "fc",
            "book_table",
            Some(ErrorCode::Timeout),
        )
        .await;
    }
    // The same call id in both tenants: each sees only its own.
    start(s, "acme", "same", "+14155550001", json!({"id": "shared"})).await;
    start(s, "globex", "same", "+14155550009", json!({})).await;
    start(s, "globex", "g_0", "+14155550009", json!({})).await;
    let q = CallSearch::default;
    let searches = [
        q(),
        CallSearch {
            call_id: Some("a_1".into()),
            ..q()
        },
        CallSearch {
            number: Some("+14155550001".into()),
            ..q()
        },
        CallSearch {
            user_id: Some("shared".into()),
            ..q()
        },
        CallSearch {
            tool: Some("book_table".into()),
            ..q()
        },
        CallSearch {
            error: Some("timeout".into()),
            ..q()
        },
        CallSearch {
            status: Some(StatusFilter::Failed),
            ..q()
        },
        CallSearch {
            status: Some(StatusFilter::Active),
            ..q()
        },
    ];
    // acme's cursors, from its first and second pages, used by globex.
    let first = search(s, "acme", &q(), CallsAt::Newest, 2).await;
    let second = search(
        s,
        "acme",
        &q(),
        CallsAt::After(first.next.clone().unwrap()),
        2,
    )
    .await;
    let cursors = [
        CallsAt::Newest,
        CallsAt::After(first.next.unwrap()),
        CallsAt::After(second.next.unwrap()),
        CallsAt::Before(second.previous.unwrap()),
    ];
    for search_ in &searches {
        for at in &cursors {
            let page = search(s, "globex", search_, at.clone(), 200).await;
            for c in &page.items {
                assert!(
                    c.id == "g_0" || c.id == "same",
                    "{search_:?} at {at:?}: {c:?}"
                );
                assert_ne!(
                    c.from.as_deref(),
                    Some("+14155550001"),
                    "acme's call: {c:?}"
                );
            }
        }
    }
    let globex_all = found(s, "globex", q()).await;
    assert_eq!(globex_all.len(), 2);
}

async fn bad_searches_are_refused_naming_the_parameter(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    start(s, "acme", "c_1", "+14155550001", json!({})).await;
    let refused = |r: Result<CallPage, StoreError>| match r {
        Err(StoreError::Invalid(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let any = CallSearch::default();
    for limit in [0, 201] {
        let m = refused(s.search_calls("acme", &any, &CallsAt::Newest, limit).await);
        assert!(m.contains("1 to 200"), "{m}");
    }
    for (at, param) in [
        (CallsAt::After("not-a-cursor".into()), "`after`"),
        (CallsAt::Before("WyJ4Il0".into()), "`before`"),
    ] {
        let m = refused(s.search_calls("acme", &any, &at, 10).await);
        assert!(m.contains(param) && m.contains("next"), "{m}");
    }
    let m = refused(
        s.search_calls(
            "acme",
            &CallSearch {
                number: Some(String::new()),
                ..CallSearch::default()
            },
            &CallsAt::Newest,
            10,
        )
        .await,
    );
    assert!(m.contains("`number`"), "{m}");
    let range = CallSearch {
        since: Some(TimeBound::parse("since", "2026-11-25").unwrap()),
        until: Some(TimeBound::parse("until", "2026-11-24").unwrap()),
        ..CallSearch::default()
    };
    let m = refused(s.search_calls("acme", &range, &CallsAt::Newest, 10).await);
    assert!(m.contains("`since`") && m.contains("`until`"), "{m}");
    match TimeBound::parse("since", "yesterday") {
        Err(StoreError::Invalid(m)) => {
            assert!(m.contains("`since`") && m.contains("RFC 3339"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(StatusFilter::parse("live").is_err());
    assert_eq!(
        TimeBound::parse("since", "2026-11-24T10:00:00+01:00")
            .unwrap()
            .as_str(),
        "2026-11-24T09:00:00.000Z"
    );
}

async fn calls_stored_before_the_user_index_are_found_by_user(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    start(s, "acme", "old", "+14155550001", json!({"id": "u_7"})).await;
    execute_raw(&h, &["UPDATE calls SET user_id = NULL"]).await;
    let by_user = CallSearch {
        user_id: Some("u_7".into()),
        ..CallSearch::default()
    };
    assert!(
        found(s, "acme", by_user.clone()).await.is_empty(),
        "not indexed yet"
    );
    assert_eq!(s.index_call_users().await.unwrap(), 1);
    assert_eq!(found(s, "acme", by_user).await, ["old"]);
    assert_eq!(s.index_call_users().await.unwrap(), 0, "done once");
}
