//! Caller memory on both backends: ranked search, idempotent writes, limits, traversal, the
//! profile, forgetting, and isolation between tenants and callers.

use serde_json::json;
use switchboard_runtime::effects::{Memory, MemoryOp, ToolkitScope};
use switchboard_store::memory::{NewObservation, NewRelation};
use switchboard_store::{MemoryHandler, MemoryLimits, Store, StoreError};

use sqlx::Connection;
use switchboard_store::Backend;

use super::{Harness, run, tenant};

on_both_backends!(
    search_ranks_the_best_match_first,
    a_retried_write_is_stored_once,
    limits_per_caller_and_tenant_are_clear_and_leave_nothing,
    traversal_follows_relations_to_a_bounded_depth,
    profile_is_newest_first_and_bounded,
    forgetting_a_caller_removes_every_row,
    other_tenants_and_callers_see_nothing,
    the_handler_answers_the_model,
    writes_and_forgetting_at_once_keep_the_counters_exact,
);

async fn note(
    s: &Store,
    tenant: &str,
    caller: &str,
    entity: &str,
    content: &str,
    key: &str,
) -> i64 {
    let new = NewObservation {
        entity,
        content,
        relations: &[],
        call_id: Some("call_1"),
        idempotency_key: key,
    };
    s.remember(tenant, caller, &new, &MemoryLimits::default())
        .await
        .unwrap()
        .id
}

async fn search_ranks_the_best_match_first(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    note(
        s,
        "acme",
        "+15550100",
        "caller",
        "prefers appointments in the morning",
        "k1",
    )
    .await;
    note(
        s,
        "acme",
        "+15550100",
        "caller",
        "is allergic to peanuts; peanut allergy is severe",
        "k2",
    )
    .await;
    note(
        s,
        "acme",
        "+15550100",
        "Max",
        "a golden retriever, due for vaccination",
        "k3",
    )
    .await;
    let l = MemoryLimits::default();
    let found = s
        .search_memory("acme", "+15550100", "peanut allergy?", 5, &l)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].content.contains("peanut"), "{found:?}");
    assert!(found[0].rank.is_some_and(|r| r > 0.0), "{found:?}");
    assert_eq!(found[0].call_id.as_deref(), Some("call_1"));
    // Any word matches; stemming finds "appointments" from "appointment"; the entity counts.
    let found = s
        .search_memory("acme", "+15550100", "appointment Max", 5, &l)
        .await
        .unwrap();
    let contents: Vec<&str> = found.iter().map(|o| o.entity.as_str()).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(contents.contains(&"Max"), "{found:?}");
    // Query syntax of either engine is only words here.
    for hostile in ["\" OR 1=1 --", "NEAR(a b) * ^x", "a:* | !b", "scope : m00"] {
        s.search_memory("acme", "+15550100", hostile, 5, &l)
            .await
            .unwrap();
    }
    // No words: the newest first.
    let recent = s
        .search_memory("acme", "+15550100", "  ", 2, &l)
        .await
        .unwrap();
    assert_eq!(
        recent.iter().map(|o| o.entity.as_str()).collect::<Vec<_>>(),
        ["Max", "caller"]
    );
    assert!(
        s.search_memory("acme", "+15550100", "zebra", 5, &l)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_retried_write_is_stored_once(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let a = note(s, "acme", "+1", "caller", "likes jazz", "c1-fc1-0").await;
    let new = NewObservation {
        entity: "caller",
        content: "likes jazz",
        relations: &[],
        call_id: Some("call_1"),
        idempotency_key: "c1-fc1-0",
    };
    let again = s
        .remember("acme", "+1", &new, &MemoryLimits::default())
        .await
        .unwrap();
    assert_eq!((again.id, again.created), (a, false));
    let m = s.caller_memory("acme", "+1").await.unwrap().unwrap();
    assert_eq!(m.observations.len(), 1);
    // Concurrent runs with one key: one row.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let new = NewObservation {
                entity: "caller",
                content: "owns a boat",
                relations: &[],
                call_id: None,
                idempotency_key: "c1-fc2-0",
            };
            s.remember("acme", "+1", &new, &MemoryLimits::default())
                .await
                .unwrap()
                .id
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let m = s.caller_memory("acme", "+1").await.unwrap().unwrap();
    assert_eq!(m.observations.len(), 2);
}

async fn limits_per_caller_and_tenant_are_clear_and_leave_nothing(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let limits = MemoryLimits {
        max_observations_per_caller: 2,
        max_observations_per_tenant: 3,
        max_entities_per_caller: 3,
        ..MemoryLimits::default()
    };
    let put = |caller: &'static str, entity: &'static str, key: &'static str| {
        let s = s.clone();
        async move {
            let new = NewObservation {
                entity,
                content: "something",
                relations: &[],
                call_id: None,
                idempotency_key: key,
            };
            s.remember("acme", caller, &new, &limits).await
        }
    };
    put("+1", "caller", "k1").await.unwrap();
    put("+1", "caller", "k2").await.unwrap();
    let e = put("+1", "caller", "k3").await.unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e}");
    let text = e.to_string();
    assert!(text.contains("max_observations_per_caller = 2"), "{text}");
    assert!(text.contains("DELETE /v1/memory/callers/"), "{text}");
    put("+2", "caller", "k4").await.unwrap();
    let e = put("+2", "caller", "k5").await.unwrap_err().to_string();
    assert!(e.contains("max_observations_per_tenant = 3"), "{e}");
    // Refused writes left nothing; the counters still match the rows.
    assert_eq!(
        s.caller_memory("acme", "+1")
            .await
            .unwrap()
            .unwrap()
            .observations
            .len(),
        2
    );
    assert_eq!(
        s.caller_memory("acme", "+2")
            .await
            .unwrap()
            .unwrap()
            .observations
            .len(),
        1
    );
    // Entities: one write naming too many new ones is refused whole.
    let rels = [
        NewRelation {
            relation: "owns".into(),
            to: "A".into(),
        },
        NewRelation {
            relation: "owns".into(),
            to: "B".into(),
        },
        NewRelation {
            relation: "owns".into(),
            to: "C".into(),
        },
    ];
    s.forget_caller("acme", "+1").await.unwrap();
    let new = NewObservation {
        entity: "caller",
        content: "has pets",
        relations: &rels,
        call_id: None,
        idempotency_key: "k6",
    };
    let e = s
        .remember("acme", "+1", &new, &limits)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_entities_per_caller"), "{e}");
    assert!(s.caller_memory("acme", "+1").await.unwrap().is_none());
    // Bad input names the thing and the fix.
    let long = "x".repeat(2_000);
    let new = NewObservation {
        content: &long,
        ..new
    };
    let e = s
        .remember("acme", "+1", &new, &limits)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_content_chars"), "{e}");
    let e = s
        .remember(
            "nobody",
            "+1",
            &NewObservation {
                content: "x",
                ..new
            },
            &limits,
        )
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

async fn traversal_follows_relations_to_a_bounded_depth(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let l = MemoryLimits::default();
    let chain = [
        ("caller", "owns", "Max"),
        ("Max", "sees", "Dr Vet"),
        ("Dr Vet", "works_at", "City Clinic"),
        ("City Clinic", "in", "Springfield"),
    ];
    for (i, (from, rel, to)) in chain.iter().enumerate() {
        let rels = [NewRelation {
            relation: (*rel).into(),
            to: (*to).into(),
        }];
        let new = NewObservation {
            entity: from,
            content: &format!("{from} fact"),
            relations: &rels,
            call_id: None,
            idempotency_key: &format!("t{i}"),
        };
        s.remember("acme", "+1", &new, &l).await.unwrap();
    }
    let t = s
        .traverse_memory("acme", "+1", "CALLER", "owns", 2, &l)
        .await
        .unwrap();
    assert_eq!(t.from.as_deref(), Some("caller"));
    assert_eq!(t.entities.len(), 1, "only `owns` edges: {t:?}");
    assert_eq!(t.entities[0].name, "Max");
    assert_eq!(t.entities[0].observations, ["Max fact"]);
    let t = s
        .traverse_memory("acme", "+1", "caller", "*", 2, &l)
        .await
        .unwrap();
    let names: Vec<(&str, u32)> = t
        .entities
        .iter()
        .map(|r| (r.name.as_str(), r.depth))
        .collect();
    assert_eq!(names, [("Max", 1), ("Dr Vet", 2)]);
    // Depth is capped by max_traverse_depth (3).
    let t = s
        .traverse_memory("acme", "+1", "caller", "*", 99, &l)
        .await
        .unwrap();
    assert_eq!(t.entities.len(), 3, "{t:?}");
    let small = MemoryLimits {
        max_traverse_entities: 1,
        ..l
    };
    let t = s
        .traverse_memory("acme", "+1", "caller", "*", 3, &small)
        .await
        .unwrap();
    assert!(t.truncated && t.entities.len() == 1, "{t:?}");
    let t = s
        .traverse_memory("acme", "+1", "nobody", "*", 3, &l)
        .await
        .unwrap();
    assert!(t.from.is_none() && t.entities.is_empty());
}

async fn profile_is_newest_first_and_bounded(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    for i in 0..5 {
        note(
            s,
            "acme",
            "+1",
            "caller",
            &format!("fact number {i}"),
            &format!("p{i}"),
        )
        .await;
    }
    let l = MemoryLimits::default();
    let p = s
        .caller_profile("acme", "+1", 3, &l)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.observations.len(), 3);
    assert!(
        p.text.starts_with("- caller: fact number 4 ("),
        "{}",
        p.text
    );
    assert_eq!(p.text.lines().count(), 3);
    let tight = MemoryLimits {
        max_profile_chars: 60,
        ..l
    };
    let p = s
        .caller_profile("acme", "+1", 10, &tight)
        .await
        .unwrap()
        .unwrap();
    assert!(
        p.text.chars().count() <= 60 && p.observations.len() == 1,
        "{}",
        p.text
    );
    assert!(
        s.caller_profile("acme", "+2", 3, &l)
            .await
            .unwrap()
            .is_none()
    );
}

async fn forgetting_a_caller_removes_every_row(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let l = MemoryLimits {
        max_observations_per_tenant: 2,
        ..MemoryLimits::default()
    };
    let rels = [NewRelation {
        relation: "owns".into(),
        to: "Max".into(),
    }];
    let new = NewObservation {
        entity: "caller",
        content: "walks the dog at dawn",
        relations: &rels,
        call_id: None,
        idempotency_key: "f1",
    };
    s.remember("acme", "+1", &new, &l).await.unwrap();
    note(s, "acme", "+2", "caller", "walks at dusk", "f2").await;
    let gone = s.forget_caller("acme", "+1").await.unwrap();
    assert_eq!(
        (gone.observations, gone.entities, gone.relations),
        (1, 2, 1)
    );
    assert!(s.caller_memory("acme", "+1").await.unwrap().is_none());
    assert!(
        s.search_memory("acme", "+1", "dog dawn", 5, &l)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.forget_caller("acme", "+1").await.unwrap().observations, 0);
    // The tenant's count went down with it: room for one more.
    s.remember(
        "acme",
        "+1",
        &NewObservation {
            idempotency_key: "f3",
            ..new
        },
        &l,
    )
    .await
    .unwrap();
    // The other caller is untouched and still found by the full-text index.
    assert_eq!(
        s.search_memory("acme", "+2", "walks", 5, &l)
            .await
            .unwrap()
            .len(),
        1
    );
    // SQLite's full-text index lost the forgotten row with it: one entry for "dawn" remains.
    if h.backend == Backend::Sqlite {
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
            .await
            .unwrap();
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM memory_observations_fts WHERE memory_observations_fts MATCH 'dawn'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(n, 1);
    }
}

async fn other_tenants_and_callers_see_nothing(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    let l = MemoryLimits::default();
    note(s, "acme", "+1", "caller", "secret birthday surprise", "i1").await;
    // Same caller number at another tenant, another caller at the same tenant.
    for (t, c) in [("globex", "+1"), ("acme", "+2")] {
        assert!(
            s.search_memory(t, c, "birthday surprise", 5, &l)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(s.search_memory(t, c, "", 5, &l).await.unwrap().is_empty());
        assert!(s.caller_memory(t, c).await.unwrap().is_none());
        assert!(s.caller_profile(t, c, 5, &l).await.unwrap().is_none());
        assert_eq!(s.forget_caller(t, c).await.unwrap().observations, 0);
        assert!(
            s.traverse_memory(t, c, "caller", "*", 3, &l)
                .await
                .unwrap()
                .from
                .is_none()
        );
    }
    // The same idempotency key at another tenant is its own write.
    note(s, "globex", "+1", "caller", "other tenant", "i1").await;
    assert_eq!(
        s.search_memory("acme", "+1", "birthday", 5, &l)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.caller_memory("globex", "+1")
            .await
            .unwrap()
            .unwrap()
            .observations[0]
            .content,
        "other tenant"
    );
    // Deleting the tenant removes its memory.
    assert!(s.delete_tenant("acme").await.unwrap());
    assert!(s.caller_memory("acme", "+1").await.unwrap().is_none());
    assert!(
        s.search_memory("acme", "+1", "birthday", 5, &l)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn the_handler_answers_the_model(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let handler = MemoryHandler::new(s.clone(), MemoryLimits::default());
    let cfg = json!({});
    let scope = |caller: Option<&'static str>, key: &'static str| ToolkitScope {
        tenant_id: "acme",
        call_id: "call_9",
        caller,
        config: &cfg,
        secrets: &cfg,
        idempotency_key: key,
    };
    let create = MemoryOp::Create {
        entity: "caller".into(),
        content: "wants a callback on Fridays".into(),
        relations: Some(json!([{"relation": "has_pet", "to": "Rex"}])),
    };
    let v = handler
        .call(&scope(Some("+1"), "h1"), &create)
        .await
        .unwrap();
    assert_eq!(
        (v["entity"].clone(), v["created"].clone()),
        (json!("caller"), json!(true)),
        "{v}"
    );
    let search = MemoryOp::Search {
        query: "callback friday".into(),
        limit: None,
    };
    let v = handler
        .call(&scope(Some("+1"), "h2"), &search)
        .await
        .unwrap();
    assert_eq!(v["count"], json!(1), "{v}");
    assert_eq!(v["results"][0]["call_id"], json!("call_9"), "{v}");
    let walk = MemoryOp::Traverse {
        from: "caller".into(),
        relation: "has_pet".into(),
        depth: None,
    };
    let v = handler.call(&scope(Some("+1"), "h3"), &walk).await.unwrap();
    assert_eq!(v["entities"][0]["name"], json!("Rex"), "{v}");
    let e = handler.call(&scope(None, "h4"), &search).await.unwrap_err();
    assert!(e.contains("`from`") && e.contains("user.id"), "{e}");
    let bad = MemoryOp::Create {
        entity: "caller".into(),
        content: "x".into(),
        relations: Some(json!({"owns": "Rex"})),
    };
    let e = handler
        .call(&scope(Some("+1"), "h5"), &bad)
        .await
        .unwrap_err();
    assert!(e.contains("`relations` must be a list"), "{e}");
}

async fn writes_and_forgetting_at_once_keep_the_counters_exact(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            if i % 6 == 5 {
                s.forget_caller("acme", "+1").await.map(|_| ())
            } else {
                let key = format!("race-{i}");
                let rels = [NewRelation {
                    relation: "knows".into(),
                    to: format!("friend {i}"),
                }];
                let new = NewObservation {
                    entity: "caller",
                    content: "a fact",
                    relations: &rels,
                    call_id: None,
                    idempotency_key: &key,
                };
                s.remember("acme", "+1", &new, &MemoryLimits::default())
                    .await
                    .map(|_| ())
            }
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // The stored counters equal the rows left, whatever the interleaving.
    let rows = s.caller_memory("acme", "+1").await.unwrap();
    let (obs, ents, rels) = rows.as_ref().map_or((0, 0, 0), |m| {
        (
            m.observations.len() as i64,
            m.entities.len() as i64,
            m.relations.len() as i64,
        )
    });
    let counters: (i64, i64, i64, i64) = match h.backend {
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query_as(COUNTERS).fetch_one(&mut c).await.unwrap()
        }
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query_as(COUNTERS).fetch_one(&mut c).await.unwrap()
        }
    };
    assert_eq!(counters, (obs, ents, rels, obs), "{rows:?}");
}

/// The caller's counters (zero when its row is gone) and the tenant's.
const COUNTERS: &str = "SELECT \
    COALESCE((SELECT observations FROM memory_callers WHERE tenant_id = 'acme' AND caller = '+1'), 0), \
    COALESCE((SELECT entities FROM memory_callers WHERE tenant_id = 'acme' AND caller = '+1'), 0), \
    COALESCE((SELECT relations FROM memory_callers WHERE tenant_id = 'acme' AND caller = '+1'), 0), \
    (SELECT observations FROM memory_tenants WHERE tenant_id = 'acme')";
