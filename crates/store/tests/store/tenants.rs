//! Tenants, their API keys, and what one tenant can see of another.

use super::*;

on_both_backends!(
    migrate_twice_is_fine,
    tenant_crud_and_conflict,
    deleting_a_tenant_cascades,
    api_keys_authenticate_until_revoked,
    tenants_are_isolated,
);

/// PostgreSQL only: SQLite writes one transaction at a time, so two writers never hold a lock
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tenant_while_its_call_ends_does_not_deadlock() {
    run(Backend::Postgres, deleting_a_tenant_while_its_call_ends).await;
}

/// A call's end holds its call's row, then (its live-call trigger) the tenant's row; a tenant
/// deleted meanwhile must wait for the end rather than take the tenant's row first and then
/// wait for the call, which deadlocked (one of the two was aborted after `deadlock_timeout`).
async fn deleting_a_tenant_while_its_call_ends(h: Harness) {
    let s = h.store.clone();
    tenant(&s, "acme").await;
    let info = call_info("acme", "call_1");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    // The end, as the journal writes it: the call's row first.
    let mut end = sqlx::PgConnection::connect(&h.url).await.unwrap();
    end.execute("BEGIN").await.unwrap();
    end.execute("SELECT id FROM calls WHERE tenant_id = 'acme' AND id = 'call_1' FOR UPDATE")
        .await
        .unwrap();
    let delete = tokio::spawn(async move { s.delete_tenant("acme").await });
    // Until the delete waits for a lock.
    let mut watch = sqlx::PgConnection::connect(&h.url).await.unwrap();
    let waiting = "SELECT COUNT(*) FROM pg_stat_activity \
                   WHERE wait_event_type = 'Lock' AND query LIKE '%FROM calls%FOR UPDATE%' \
                      OR wait_event_type = 'Lock' AND query LIKE 'DELETE FROM tenants%'";
    let mut waited = 0;
    while sqlx::query_scalar::<_, i64>(waiting)
        .fetch_one(&mut watch)
        .await
        .unwrap()
        == 0
    {
        waited += 1;
        assert!(waited < 500, "the delete never waited for the call");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let ended = end
        .execute("UPDATE calls SET status = 'ended' WHERE tenant_id = 'acme' AND id = 'call_1'")
        .await;
    assert!(ended.is_ok(), "the end was aborted: {ended:?}");
    end.execute("COMMIT").await.unwrap();
    assert!(delete.await.unwrap().unwrap(), "the tenant is deleted");
    assert_eq!(h.store.get_tenant("acme").await.unwrap(), None);
}

async fn migrate_twice_is_fine(h: Harness) {
    // `setup` migrated once already.
    h.store.migrate().await.unwrap();
    h.store.migrate().await.unwrap();
    h.store.ping().await.unwrap();
    assert_eq!(h.store.backend(), h.backend);
    // A second store on the same database migrates as a no-op too (another node starting).
    let other = Store::connect(&h.url, MasterKey::generate()).await.unwrap();
    other.migrate().await.unwrap();
    other.close().await;
}

async fn tenant_crud_and_conflict(h: Harness) {
    let s = &h.store;
    let t = s
        .create_tenant("acme", "Acme Inc.", &json!({"refer": {"enabled": true}}))
        .await
        .unwrap();
    assert_eq!(t.id, "acme");
    assert_eq!(s.get_tenant("acme").await.unwrap(), Some(t.clone()));
    assert_eq!(s.get_tenant("nope").await.unwrap(), None);

    let e = s
        .create_tenant("acme", "Again", &json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    assert!(e.to_string().contains("acme"), "{e}");

    for bad in ["", "Acme", "-acme", "a_b", "a b", &"a".repeat(64)] {
        let e = s.create_tenant(bad, "x", &json!({})).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{bad}: {e:?}");
    }
    assert!(
        s.create_tenant(&"a".repeat(63), "x", &json!({}))
            .await
            .is_ok()
    );
    let e = s.create_tenant("list", "x", &json!([1])).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");

    let t2 = s
        .set_features("acme", &json!({"refer": {"enabled": false}}))
        .await
        .unwrap();
    assert_eq!(t2.features, json!({"refer": {"enabled": false}}));
    assert_eq!(t2.created_at, t.created_at);
    assert_eq!(s.get_tenant("acme").await.unwrap(), Some(t2));
    let e = s.set_features("nope", &json!({})).await.unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    let page = s.list_tenants(Page::default()).await.unwrap();
    let ids: Vec<_> = page.items.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, vec!["a".repeat(63), "acme".to_owned()]);
    assert_eq!(page.next, None);

    assert!(s.delete_tenant("acme").await.unwrap());
    assert!(!s.delete_tenant("acme").await.unwrap());
    assert_eq!(s.get_tenant("acme").await.unwrap(), None);
}

async fn deleting_a_tenant_cascades(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "other").await;
    let (_, key) = s.create_api_key(Some("acme"), "ci").await.unwrap();
    s.put_tool("acme", &tool_def("save_meal", "v1"), &Default::default())
        .await
        .unwrap();
    s.put_secret("acme", "openai", &SecretString::from("sk-x"))
        .await
        .unwrap();
    let agent: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "save_meal", "sensitive_config": {"k": "v"}}], "default": true
    }))
    .unwrap();
    s.put_agent("acme", &agent).await.unwrap();
    let info = call_info("acme", "call_1");
    let ctx = Context::new(&info, json!({}));
    s.create_call("acme", &info, &json!({}), &ctx)
        .await
        .unwrap();
    s.journal_append(
        "acme",
        "call_1",
        JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("call_1", "fc_1")),
        },
    )
    .await
    .unwrap();
    s.journal_append(
        "acme",
        "call_1",
        JournalEntry::Finished {
            record: Box::new(record("fc_2", true)),
            context: None,
            handoffs: 0,
        },
    )
    .await
    .unwrap();
    // Another tenant's rows survive.
    s.put_tool(
        "other",
        &tool_def("save_meal", "other"),
        &Default::default(),
    )
    .await
    .unwrap();

    assert!(s.delete_tenant("acme").await.unwrap());
    assert_eq!(s.authenticate(key.expose_secret()).await.unwrap(), None);
    assert!(
        s.list_tool_versions("acme", "save_meal")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.secret_names("acme").await.unwrap().is_empty());
    assert_eq!(s.get_agent("acme", "booking").await.unwrap(), None);
    assert_eq!(s.get_call("acme", "call_1").await.unwrap(), None);
    assert_eq!(s.journal_load("acme", "call_1").await.unwrap(), None);
    for table in [
        "api_keys",
        "tool_versions",
        "agents",
        "agent_tools",
        "secrets",
        "calls",
        "call_invocations",
        "call_checkpoints",
    ] {
        let cells = raw_cells(&h, table).await;
        assert!(
            !cells.iter().any(|c| c.as_slice() == b"acme"),
            "{table} still has rows of the deleted tenant"
        );
    }
    assert!(s.get_tool("other", "save_meal").await.unwrap().is_some());
}

async fn api_keys_authenticate_until_revoked(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let (key, plain) = s.create_api_key(Some("acme"), "ci deploys").await.unwrap();
    let plain = plain.expose_secret().to_owned();
    let random = plain.strip_prefix("sb_acme_").expect("tenant key format");
    assert_eq!(random.len(), 32);
    assert!(
        random
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
    assert_eq!(key.prefix.len(), 8);
    assert!(random.starts_with(&key.prefix));
    assert_eq!(key.tenant_id.as_deref(), Some("acme"));
    assert_eq!(key.revoked_at, None);

    let (admin, admin_plain) = s.create_api_key(None, "bootstrap").await.unwrap();
    let admin_plain = admin_plain.expose_secret().to_owned();
    assert!(admin_plain.starts_with("sb_admin_"));
    assert_eq!(admin.tenant_id, None);

    let p = s.authenticate(&plain).await.unwrap().unwrap();
    assert_eq!(p.key_id, key.id);
    assert_eq!(p.tenant_id.as_deref(), Some("acme"));
    let p = s.authenticate(&admin_plain).await.unwrap().unwrap();
    assert_eq!((p.key_id.as_str(), p.tenant_id), (admin.id.as_str(), None));

    // Near misses and garbage do not authenticate.
    let mut wrong = plain.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'x' { 'y' } else { 'x' });
    for bad in [wrong.as_str(), "", "sb_", "Bearer x", &"sb_".repeat(100)] {
        assert_eq!(s.authenticate(bad).await.unwrap(), None, "{bad}");
    }

    assert_eq!(
        s.list_api_keys(Some("acme")).await.unwrap(),
        vec![key.clone()]
    );
    assert_eq!(s.list_api_keys(None).await.unwrap(), vec![admin.clone()]);

    // The plaintext is never stored: only its hash and prefix.
    assert_absent(&h, "api_keys", &plain).await;
    assert_absent(&h, "api_keys", random).await;
    assert_absent(&h, "api_keys", &admin_plain).await;

    // Revoking needs the right owner; a revoked key never authenticates.
    assert!(!s.revoke_api_key(None, &key.id).await.unwrap());
    assert!(!s.revoke_api_key(Some("acme"), &admin.id).await.unwrap());
    assert!(!s.revoke_api_key(Some("acme"), "key_nope").await.unwrap());
    assert!(s.revoke_api_key(Some("acme"), &key.id).await.unwrap());
    assert_eq!(s.authenticate(&plain).await.unwrap(), None);
    let listed = s.list_api_keys(Some("acme")).await.unwrap();
    let revoked_at = listed[0].revoked_at.clone().expect("revoked");
    assert!(s.revoke_api_key(Some("acme"), &key.id).await.unwrap());
    let listed = s.list_api_keys(Some("acme")).await.unwrap();
    assert_eq!(listed[0].revoked_at.as_ref(), Some(&revoked_at));
    assert!(s.authenticate(&admin_plain).await.unwrap().is_some());

    let e = s.create_api_key(Some("nope"), "x").await.unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
}

async fn tenants_are_isolated(h: Harness) {
    let s = &h.store;
    tenant(s, "a").await;
    tenant(s, "b").await;
    let (key, _) = s.create_api_key(Some("a"), "k").await.unwrap();
    s.put_tool("a", &tool_def("save_meal", "a's"), &Default::default())
        .await
        .unwrap();
    s.put_secret("a", "openai", &SecretString::from("sk-a"))
        .await
        .unwrap();
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking", "default": true, "tools": [{"tool": "save_meal", "sensitive_config": {"k": 1}}]
    }))
    .unwrap();
    s.put_agent("a", &def).await.unwrap();
    let info = call_info("a", "call_a");
    let ctx = Context::new(&info, json!({}));
    s.create_call("a", &info, &json!({"save_meal": 1}), &ctx)
        .await
        .unwrap();
    s.journal_append(
        "a",
        "call_a",
        JournalEntry::Finished {
            record: Box::new(record("fc_1", true)),
            context: None,
            handoffs: 0,
        },
    )
    .await
    .unwrap();

    // Every getter with the other tenant's id finds nothing.
    let b = "b";
    assert_eq!(s.get_tool(b, "save_meal").await.unwrap(), None);
    assert_eq!(s.get_tool_version(b, "save_meal", 1).await.unwrap(), None);
    assert!(
        s.list_tools(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.current_tools(b).await.unwrap().is_empty());
    assert!(
        s.list_tool_versions(b, "save_meal")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!s.delete_tool(b, "save_meal").await.unwrap());
    assert_eq!(s.get_agent(b, "booking").await.unwrap(), None);
    assert_eq!(
        s.agent_tools_with_secrets(b, "booking").await.unwrap(),
        None
    );
    assert!(
        s.list_agents(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(s.default_agent(b).await.unwrap(), None);
    assert!(!s.delete_agent(b, "booking").await.unwrap());
    assert!(s.get_secret(b, "openai").await.unwrap().is_none());
    assert!(s.secret_names(b).await.unwrap().is_empty());
    assert!(!s.delete_secret(b, "openai").await.unwrap());
    assert!(s.list_api_keys(Some(b)).await.unwrap().is_empty());
    assert!(!s.revoke_api_key(Some(b), &key.id).await.unwrap());
    assert_eq!(s.get_call(b, "call_a").await.unwrap(), None);
    assert!(
        s.list_calls(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.invocations(b, "call_a").await.unwrap().is_empty());
    let e = s
        .update_call_context(b, "call_a", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    // Nor are another tenant's calls: `b`'s journal does not see `a`'s call.
    assert_eq!(s.journal_load(b, "call_a").await.unwrap(), None);
    assert_eq!(s.call_context(b, "call_a").await.unwrap(), None);
    assert_eq!(s.invocation(b, "call_a", "fc_1").await.unwrap(), None);
    // `b` may use the same call id: it gets a call of its own, and `a`'s is untouched.
    let own = call_info("b", "call_a");
    let own_ctx = Context::new(&own, json!({"id": "b-user"}));
    s.create_call("b", &own, &json!({}), &own_ctx)
        .await
        .unwrap();
    s.journal_append(
        b,
        "call_a",
        JournalEntry::Started {
            call: own.clone(),
            context: own_ctx.clone(),
        },
    )
    .await
    .unwrap();
    s.journal_append(b, "call_a", JournalEntry::Ended)
        .await
        .unwrap();
    assert_eq!(
        s.get_call(b, "call_a").await.unwrap().unwrap().context,
        own_ctx
    );
    assert!(s.invocations(b, "call_a").await.unwrap().is_empty());
    // A journal entry naming another tenant than its journal's is refused.
    let e = s
        .journal_append(
            "a",
            "call_a",
            JournalEntry::Started {
                call: own.clone(),
                context: own_ctx.clone(),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .create_call("b", &info, &json!({}), &ctx)
        .await
        .unwrap_err();
    assert!(
        matches!(e, StoreError::Invalid(_)),
        "a call naming tenant a, created for b: {e:?}"
    );

    // And `a` still has everything.
    assert!(s.get_tool("a", "save_meal").await.unwrap().is_some());
    assert!(s.get_agent("a", "booking").await.unwrap().is_some());
    assert!(s.get_secret("a", "openai").await.unwrap().is_some());
    assert_eq!(
        s.list_api_keys(Some("a")).await.unwrap()[0].revoked_at,
        None
    );
    let call = s.get_call("a", "call_a").await.unwrap().unwrap();
    assert_eq!(call.tenant_id, "a");
    assert_eq!(call.status, CallStatus::Active);
    assert_eq!(call.context, ctx);
    assert_eq!(call.pinned, json!({"save_meal": 1}));
    assert_eq!(s.invocations("a", "call_a").await.unwrap().len(), 1);
}
