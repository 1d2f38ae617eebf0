//! The per-tenant email rate across nodes: two servers on one database share one budget, a
//! retried send is not counted twice, and concurrent sends on both nodes are counted exactly.

use serde_json::json;
use switchboard_server::ServerConfig;
use switchboard_store::EmailAdmission;

use crate::support::{Backend, TestApp, invoke, spawn_app_with, start_with};

const PER_MINUTE: u32 = 4;

fn config() -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        emails_per_tenant_per_minute: PER_MINUTE,
        ..ServerConfig::default()
    }
}

async fn send(app: &TestApp, key: &str, call: &str, fc: &str) -> serde_json::Value {
    let r = invoke(
        app,
        key,
        call,
        fc,
        "send_email",
        // Each send its own text: the same arguments again would be answered as a duplicate.
        json!({"to": "pat@example.com", "subject": "Your appointment", "body": format!("See you ({call} {fc}).")}),
    )
    .await;
    r["result"].clone()
}

#[tokio::test]
async fn two_nodes_share_a_tenants_email_rate() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let smtp = crate::peers::SmtpPeer::start().await;
        let a = spawn_app_with(backend, config()).await;
        let (base, b_state, stop, server) = start_with(&a.url, a.key.clone(), config()).await;
        let b = TestApp::view(&a, base);
        let key = a.tenant("acme").await;
        let agent = json!({"default": true, "tools": [{"tool": "toolkit:email", "config": {
            "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "security": "plain",
            "from_email": "desk@example.com"}}]});
        let (s, body) = a.put("/v1/agents/mailer", &key, agent).await;
        assert_eq!(s, reqwest::StatusCode::OK, "{body}");
        a.post("/v1/calls", &key, json!({"call_id": "on-a"})).await;
        b.post("/v1/calls", &key, json!({"call_id": "on-b"})).await;

        // Half the budget on each node, then a send on either is refused: one budget, not two.
        for (node, call) in [(&a, "on-a"), (&b, "on-b")] {
            for fc in ["fc1", "fc2"] {
                let r = send(node, &key, call, fc).await;
                assert_eq!(r["ok"], true, "{backend:?} {call} {fc}: {r}");
            }
        }
        for (node, call) in [(&a, "on-a"), (&b, "on-b")] {
            let r = send(node, &key, call, "fc3").await;
            assert_eq!(r["ok"], false, "{backend:?} {call}: {r}");
            let msg = r["message"].as_str().unwrap_or_default();
            assert!(
                msg.contains("too many emails") && msg.contains("Try again in"),
                "{msg}"
            );
        }
        assert_eq!(
            smtp.received().matches("Message-ID").count(),
            PER_MINUTE as usize,
            "{backend:?}"
        );

        // Straight at the store: a retried key is free, even over the rate; concurrent sends
        // through both nodes' pools admit exactly the budget.
        let (sa, sb) = (&a.state.store, &b_state.store);
        assert_eq!(
            sa.admit_email("t-retry", "k1", 1).await.unwrap(),
            EmailAdmission::Admitted
        );
        assert_eq!(
            sb.admit_email("t-retry", "k1", 1).await.unwrap(),
            EmailAdmission::Repeated
        );
        match sb.admit_email("t-retry", "k2", 1).await.unwrap() {
            EmailAdmission::Refused { retry_after_s } => {
                assert!((1..=60).contains(&retry_after_s), "{retry_after_s}");
            }
            other => panic!("{backend:?}: {other:?}"),
        }
        let sends = (0..24).map(|i| {
            let store = if i % 2 == 0 { sa.clone() } else { sb.clone() };
            async move { store.admit_email("t-race", &format!("k{i}"), 10).await }
        });
        let results = futures_util::future::join_all(sends).await;
        let admitted = results
            .iter()
            .filter(|r| matches!(r, Ok(EmailAdmission::Admitted)))
            .count();
        assert!(
            results.iter().all(Result::is_ok),
            "{backend:?}: {results:?}"
        );
        assert_eq!(admitted, 10, "{backend:?}: {results:?}");

        let _ = stop.send(());
        let _ = server.await;
        b_state.store.close().await;
        a.stop().await;
    }
}
