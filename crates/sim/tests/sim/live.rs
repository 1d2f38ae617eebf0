//! The simulator's GPT-Live side as a client meets it: the accept body checked against the
//! schema (unknown fields refused), the sideband's backend turn, and `response.create` refused
//! with `function_call_outputs_required` until every call of the turn has its output.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_sim::Simulator;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::WAIT;

async fn post(sim: &Simulator, id: &str, action: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}/live/sessions/{id}/{action}", sim.base_url());
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth("sk-test")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn session() -> Value {
    json!({"session": {"type": "live", "model": "gpt-live-1",
        "delegation": {"type": "responses", "responses": {"model": "gpt-5.2",
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]}}}})
}

#[tokio::test]
async fn unknown_fields_are_refused_and_an_early_continuation_too() {
    let sim = Simulator::start().await.unwrap();
    let live = sim.live();
    live.add_session("live_1");
    // Realtime's flat body, and a Realtime-only field, are refused naming the parameter.
    let (status, body) = post(
        &sim,
        "live_1",
        "accept",
        &json!({"type": "live", "model": "m"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unknown_parameter");
    let mut extra = session();
    extra["session"]["tool_choice"] = json!("auto");
    let (status, body) = post(&sim, "live_1", "accept", &extra).await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("session.tool_choice"))
    );
    let (status, _) = post(&sim, "live_1", "reject", &json!({})).await;
    assert_eq!(status, 400, "reject needs its SIP status");
    assert_eq!(live.violations().len(), 3);
    let (status, body) = post(&sim, "live_1", "accept", &session()).await;
    assert_eq!(status, 200, "{body}");

    let url = format!("{}/live/sessions/live_1/attach", sim.ws_base_url());
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Authorization", HeaderValue::from_static("Bearer sk-test"));
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let backend = live.backend("live_1", WAIT).await.unwrap();
    let calls = backend.call_tools(&[("lookup", json!({"q": 1})), ("lookup", json!({"q": 2}))]);
    // The calls arrive nested; the completed snapshot's output is empty.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let Some(Ok(Message::Text(text))) = tokio::time::timeout(WAIT, ws.next()).await.unwrap()
        else {
            panic!("the sideband closed");
        };
        let ev: Value = serde_json::from_str(text.as_str()).unwrap();
        if ev["type"] == "response.event" && ev["event"]["type"] == "response.output_item.done" {
            seen.push(ev["event"]["item"]["call_id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(seen, calls);
    let output = |call: &str, id: &str| {
        json!({"type": "response.item.create", "event_id": id,
               "item": {"type": "function_call_output", "call_id": call, "output": "ok"}})
    };
    let send = |v: Value| Message::text(v.to_string());
    ws.send(send(output(&calls[0], "e1"))).await.unwrap();
    ws.send(send(json!({"type": "response.create", "event_id": "e2"})))
        .await
        .unwrap();
    let error = loop {
        let Some(Ok(Message::Text(text))) = tokio::time::timeout(WAIT, ws.next()).await.unwrap()
        else {
            panic!("the sideband closed");
        };
        let ev: Value = serde_json::from_str(text.as_str()).unwrap();
        if ev["type"] == "error" {
            break ev;
        }
    };
    assert_eq!(error["error"]["code"], "function_call_outputs_required");
    assert_eq!(error["error"]["client_event_id"], "e2");
    assert_eq!(
        live.violations().len(),
        4,
        "the early continuation is the client's fault"
    );
    ws.send(send(output(&calls[1], "e3"))).await.unwrap();
    ws.send(send(json!({"type": "response.create"})))
        .await
        .unwrap();
    assert!(backend.wait_continued(&calls[1], WAIT).await);
    assert_eq!(live.response_creates("live_1"), 2);
    // An output for a call answered already is refused too.
    ws.send(send(output(&calls[1], "e4"))).await.unwrap();
    assert!(
        live.wait_until("live_1", WAIT, |l| l.violations().len() == 5)
            .await
    );
}
