//! Console sessions: opened for a key, seen by every node, ended by a sign-out, an expiry, a
//! revoked key or a deleted tenant; at most a bounded number per key.

use super::*;

on_both_backends!(
    a_console_session_ends_for_every_node_at_sign_out,
    a_console_session_ends_with_its_key_its_tenant_or_its_time,
    a_key_keeps_at_most_its_newest_console_sessions,
);

const NOW: i64 = 1_000_000;
const LATER: i64 = NOW + 3_600_000;

async fn a_console_session_ends_for_every_node_at_sign_out(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let (key, _) = s.create_api_key(Some("acme"), "ops").await.unwrap();
    let token = s.open_console_session(&key.id, NOW, LATER).await.unwrap();
    assert!(!token.is_empty() && !token.contains(&key.id));
    let other_node = Store::connect(&h.url, h.key.clone()).await.unwrap();
    for store in [s, &other_node] {
        let p = store
            .console_session(&token, NOW + 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.key_id.as_str(), p.tenant_id.as_deref()),
            (key.id.as_str(), Some("acme"))
        );
    }
    // Only the hash is stored.
    assert_absent(&h, "console_sessions", &token).await;
    // Signed out on the other node: gone for both; a second sign-out finds nothing.
    assert!(other_node.end_console_session(&token).await.unwrap());
    assert!(!other_node.end_console_session(&token).await.unwrap());
    for store in [s, &other_node] {
        assert!(
            store
                .console_session(&token, NOW + 2)
                .await
                .unwrap()
                .is_none()
        );
    }
    // Nonsense tokens find nothing, without an error.
    for bad in ["", "x", &"y".repeat(10_000)] {
        assert!(s.console_session(bad, NOW).await.unwrap().is_none());
        assert!(!s.end_console_session(bad).await.unwrap());
    }
    other_node.close().await;
}

async fn a_console_session_ends_with_its_key_its_tenant_or_its_time(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let (key, _) = s.create_api_key(Some("acme"), "ops").await.unwrap();
    let (admin, _) = s.create_api_key(None, "admin").await.unwrap();
    let admin_session = s.open_console_session(&admin.id, NOW, LATER).await.unwrap();
    let p = s
        .console_session(&admin_session, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.tenant_id, None);

    // Its time.
    let short = s
        .open_console_session(&key.id, NOW, NOW + 10)
        .await
        .unwrap();
    assert!(s.console_session(&short, NOW + 9).await.unwrap().is_some());
    assert!(s.console_session(&short, NOW + 10).await.unwrap().is_none());
    // Expired sessions are removed when the next one opens.
    let revoked = s
        .open_console_session(&key.id, NOW + 20, LATER)
        .await
        .unwrap();
    assert_eq!(
        query_i64(&h, "SELECT COUNT(*) FROM console_sessions").await,
        2,
        "the admin's and the new one"
    );
    // Its key, revoked.
    assert!(s.revoke_api_key(Some("acme"), &key.id).await.unwrap());
    assert!(
        s.console_session(&revoked, NOW + 30)
            .await
            .unwrap()
            .is_none()
    );
    // A key that no longer exists opens no session.
    let e = s
        .open_console_session("key_nope", NOW, LATER)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    // Its tenant, deleted: the session goes with the tenant's keys.
    let (second, _) = s.create_api_key(Some("acme"), "ops 2").await.unwrap();
    let doomed = s
        .open_console_session(&second.id, NOW, LATER)
        .await
        .unwrap();
    assert!(s.console_session(&doomed, NOW).await.unwrap().is_some());
    assert!(s.delete_tenant("acme").await.unwrap());
    assert!(s.console_session(&doomed, NOW).await.unwrap().is_none());
    assert_eq!(
        query_i64(&h, "SELECT COUNT(*) FROM console_sessions").await,
        1,
        "only the admin's session is left"
    );
    assert!(
        s.console_session(&admin_session, NOW)
            .await
            .unwrap()
            .is_some()
    );
}

async fn a_key_keeps_at_most_its_newest_console_sessions(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let (key, _) = s.create_api_key(Some("acme"), "ops").await.unwrap();
    let (other, _) = s.create_api_key(Some("acme"), "other").await.unwrap();
    let others = s.open_console_session(&other.id, NOW, LATER).await.unwrap();
    let max = usize::try_from(switchboard_store::MAX_CONSOLE_SESSIONS_PER_KEY).unwrap();
    let mut tokens = Vec::new();
    for i in 0..max + 3 {
        let at = NOW + i64::try_from(i).unwrap();
        tokens.push(s.open_console_session(&key.id, at, LATER).await.unwrap());
    }
    let open: Vec<bool> = {
        let mut open = Vec::new();
        for t in &tokens {
            open.push(s.console_session(t, NOW + 100).await.unwrap().is_some());
        }
        open
    };
    assert_eq!(open.iter().filter(|o| **o).count(), max, "{open:?}");
    assert!(
        open[..3].iter().all(|o| !o) && open[3..].iter().all(|o| *o),
        "the oldest ended: {open:?}"
    );
    // Another key's session is not counted with them.
    assert!(
        s.console_session(&others, NOW + 100)
            .await
            .unwrap()
            .is_some()
    );
    // A session opened in the same millisecond as the others is kept too.
    let same_ms = s
        .open_console_session(&key.id, NOW + 1, LATER)
        .await
        .unwrap();
    assert!(
        s.console_session(&same_ms, NOW + 100)
            .await
            .unwrap()
            .is_some()
    );
}
