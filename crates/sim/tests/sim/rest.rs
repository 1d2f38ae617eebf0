//! Call control REST: validation, error shapes, failure injection, recording.

use serde_json::{Value, json};
use switchboard_sim::Simulator;

use crate::{WAIT, accept_body, accepted, post, post_with_key, with_call};

#[tokio::test]
async fn a_good_accept_is_200_with_an_empty_body_and_becomes_the_session() {
    let sim = with_call("rtc_1").await;
    let (status, body) = post(&sim, "rtc_1", "accept", Some(&accept_body())).await;
    assert_eq!((status, body), (200, Value::Null));
    assert_eq!(sim.session("rtc_1"), Some(accept_body()));
    assert_eq!(sim.count("accept", "rtc_1"), 1);
    let requests = sim.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(requests[0].status, 200);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[tokio::test]
async fn invalid_accept_bodies_are_400_with_the_openai_error_and_a_violation() {
    // One line per case: the body, the expected error code and param.
    let cases = [
        (
            json!({"type": "realtime", "voice": "marin"}),
            "unknown_parameter",
            "voice",
        ),
        (
            json!({"model": "gpt-realtime"}),
            "missing_required_parameter",
            "type",
        ),
        (
            json!({"type": "realtime", "tools": [{"type": "function", "name": "get weather"}]}),
            "invalid_value",
            "tools[0].name",
        ),
        (
            json!({"type": "realtime", "tools": [], "tool_choice": {"type": "function", "name": "x"}}),
            "invalid_value",
            "tool_choice.name",
        ),
    ];
    for (i, (body, code, param)) in cases.iter().enumerate() {
        let sim = with_call("rtc_1").await;
        let (status, error) = post(&sim, "rtc_1", "accept", Some(body)).await;
        assert_eq!(status, 400, "case {i}");
        assert_eq!(error["error"]["code"], *code, "case {i}: {error}");
        assert_eq!(error["error"]["param"], *param, "case {i}");
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(sim.violations().len(), 1, "case {i}");
        // The call is still waiting: a good accept goes through.
        assert_eq!(
            post(&sim, "rtc_1", "accept", Some(&accept_body())).await.0,
            200
        );
    }
}

#[tokio::test]
async fn a_second_accept_is_400_and_a_violation() {
    let sim = accepted("rtc_1").await;
    let (status, _) = post(&sim, "rtc_1", "accept", Some(&accept_body())).await;
    assert_eq!(status, 400);
    assert_eq!(sim.violations().len(), 1);
    assert_eq!(sim.count("accept", "rtc_1"), 2);
}

#[tokio::test]
async fn an_unknown_call_is_404_call_id_not_found() {
    let sim = Simulator::start().await.unwrap();
    let (status, error) = post(&sim, "rtc_nope", "hangup", None).await;
    assert_eq!(status, 404);
    assert_eq!(error["error"]["code"], "call_id_not_found");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["param"], Value::Null);
    assert!(error["error"]["message"].is_string());
}

#[tokio::test]
async fn a_wrong_key_is_401_and_the_key_can_be_changed() {
    let sim = with_call("rtc_1").await;
    sim.set_api_key("sk-live");
    let (status, error) = post(&sim, "rtc_1", "accept", Some(&accept_body())).await;
    assert_eq!(status, 401);
    assert_eq!(error["error"]["code"], "invalid_api_key");
    let (status, _) = post_with_key(&sim, "sk-live", "rtc_1", "accept", Some(&accept_body())).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn fail_next_fails_the_next_requests_then_serves_and_records_them_all() {
    let sim = with_call("rtc_1").await;
    sim.fail_next("accept", 503, 2);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let (status, body) = post(&sim, "rtc_1", "accept", Some(&accept_body())).await;
        if status != 200 {
            assert_eq!(body["error"]["code"], "simulated_failure");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [503, 503, 200]);
    assert_eq!(sim.count("accept", "rtc_1"), 3);
    let recorded: Vec<u16> = sim.requests().iter().map(|r| r.status).collect();
    assert_eq!(recorded, [503, 503, 200]);
    assert!(sim.violations().is_empty());
}

#[tokio::test]
async fn refer_checks_its_target_and_acting_after_hangup_is_404_and_a_violation() {
    let sim = accepted("rtc_1").await;
    let (status, error) = post(
        &sim,
        "rtc_1",
        "refer",
        Some(&json!({"target_uri": "+14155550123"})),
    )
    .await;
    assert_eq!(
        (status, &error["error"]["param"]),
        (400, &json!("target_uri"))
    );
    assert_eq!(sim.violations().len(), 1);
    for target in ["tel:+14155550123", "sip:agent@example.com"] {
        let (status, _) = post(&sim, "rtc_1", "refer", Some(&json!({"target_uri": target}))).await;
        assert_eq!(status, 200, "{target}");
    }
    assert_eq!(post(&sim, "rtc_1", "hangup", None).await.0, 200);
    assert!(sim.is_hung_up("rtc_1"));
    let (status, error) = post(
        &sim,
        "rtc_1",
        "refer",
        Some(&json!({"target_uri": "tel:+14155550123"})),
    )
    .await;
    assert_eq!(
        (status, &error["error"]["code"]),
        (404, &json!("call_id_not_found"))
    );
    assert_eq!(post(&sim, "rtc_1", "hangup", None).await.0, 404);
    assert_eq!(sim.violations().len(), 3);
    assert_eq!(sim.count("refer", "rtc_1"), 4);
}

#[tokio::test]
async fn reject_takes_an_optional_sip_status() {
    let sim = with_call("rtc_1").await;
    sim.add_call("rtc_2");
    assert_eq!(
        post(&sim, "rtc_1", "reject", Some(&json!({"status_code": 486})))
            .await
            .0,
        200
    );
    assert_eq!(post(&sim, "rtc_2", "reject", None).await.0, 200);
    assert!(sim.violations().is_empty());
    // A rejected call is gone.
    assert_eq!(
        post(&sim, "rtc_1", "accept", Some(&accept_body())).await.0,
        404
    );
}

#[tokio::test]
async fn wait_request_returns_a_request_once_it_arrives() {
    let sim = accepted("rtc_1").await;
    assert!(
        sim.wait_request("refer", "rtc_1", std::time::Duration::from_millis(20))
            .await
            .is_none()
    );
    let client = sim.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        post(
            &client,
            "rtc_1",
            "refer",
            Some(&json!({"target_uri": "tel:+14155550123"})),
        )
        .await;
    });
    let refer = sim.wait_request("refer", "rtc_1", WAIT).await.unwrap();
    assert_eq!(refer.body, json!({"target_uri": "tel:+14155550123"}));
    assert_eq!(refer.status, 200);
}

#[tokio::test]
async fn other_urls_get_an_openai_404() {
    let sim = Simulator::start().await.unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/realtime/sessions", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unknown_url");
}

#[tokio::test]
async fn the_server_stops_when_the_last_handle_is_dropped() {
    let sim = Simulator::start().await.unwrap();
    let url = format!("{}/realtime/calls/rtc_1/hangup", sim.base_url());
    let clone = sim.clone();
    drop(sim);
    // A clone keeps it serving.
    let client = reqwest::Client::new();
    assert_eq!(client.post(&url).send().await.unwrap().status(), 401);
    drop(clone);
    let deadline = tokio::time::Instant::now() + WAIT;
    while client.post(&url).send().await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "still serving");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
