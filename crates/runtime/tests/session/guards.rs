//! The HTTP effect client's guards, seen through a session.

use super::*;

/// With the guard on (the default), a tool cannot reach the cloud metadata address.
async fn meta_refused_by_guard() {
    let meta = tool(
        json!({"name": "meta", "description": "d", "actions": [{"type": "api_call", "method": "GET", "url": "http://169.254.169.254/latest/meta-data", "retry_count": 0}]}),
    );
    let (session, mut rx) = http_only_session("rtc_m", meta).await;
    session.submit(Invocation {
        call_id: "rtc_m".into(),
        ..inv("m1", "meta", json!({}), None)
    });
    let d = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output(&d)["error"], "api_call_failed");
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("private or metadata address"),
        "{}",
        d.result.output
    );
}

#[tokio::test]
async fn metadata_address_is_refused() {
    meta_refused_by_guard().await;
}
