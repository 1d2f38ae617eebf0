//! The simulator driven as its users drive it: REST with reqwest, the call's WebSocket with
//! tokio-tungstenite, webhooks verified with the `standardwebhooks` crate.
// Helpers outside `#[test]` functions may fail loudly too: they are test code.
#![allow(clippy::unwrap_used, clippy::panic)]

mod google;
mod live;
mod rest;
mod webhook;
mod ws;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use switchboard_sim::Simulator;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a test waits for something that should happen.
pub const WAIT: Duration = Duration::from_secs(5);

/// A valid accept body, as the reference shows it.
pub fn accept_body() -> Value {
    json!({
        "type": "realtime",
        "model": "gpt-realtime",
        "instructions": "You are Alex.",
        "audio": {"output": {"voice": "marin"}},
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
                   "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}],
        "tool_choice": "auto",
    })
}

/// A started simulator that knows `call_id` as an incoming call.
pub async fn with_call(call_id: &str) -> Simulator {
    let sim = Simulator::start().await.unwrap();
    sim.add_call(call_id);
    sim
}

/// A started simulator where `call_id` is accepted with [`accept_body`].
pub async fn accepted(call_id: &str) -> Simulator {
    let sim = with_call(call_id).await;
    let (status, _) = post(&sim, call_id, "accept", Some(&accept_body())).await;
    assert_eq!(status, 200);
    sim
}

/// POSTs a call control request with the default key; returns the status and the JSON body
/// (`Null` when empty).
pub async fn post(
    sim: &Simulator,
    call_id: &str,
    action: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    post_with_key(sim, "sk-test", call_id, action, body).await
}

pub async fn post_with_key(
    sim: &Simulator,
    key: &str,
    call_id: &str,
    action: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let url = format!("{}/realtime/calls/{call_id}/{action}", sim.base_url());
    let mut request = reqwest::Client::new().post(url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    };
    (status, body)
}

/// The client side of a call's WebSocket.
#[derive(Debug)]
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    /// Connects with the default key; panics if refused.
    pub async fn connect(sim: &Simulator, call_id: &str) -> Client {
        Self::try_connect(sim, "sk-test", call_id).await.unwrap()
    }

    /// Connects, or returns the HTTP status the upgrade was refused with.
    pub async fn try_connect(sim: &Simulator, key: &str, call_id: &str) -> Result<Client, u16> {
        let url = format!("{}/realtime?call_id={call_id}", sim.ws_base_url());
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "Authorization",
            HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
        );
        match tokio_tungstenite::connect_async_with_config(request, None, true).await {
            Ok((ws, _)) => Ok(Client { ws }),
            Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(other) => panic!("connect failed: {other}"),
        }
    }

    pub async fn send(&mut self, event: Value) {
        self.ws
            .send(Message::text(event.to_string()))
            .await
            .unwrap();
    }

    /// The next server event; panics on timeout or close. Checks every event has an event_id.
    pub async fn recv(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next()).await.unwrap();
            match message {
                Some(Ok(Message::Text(text))) => {
                    let event: Value = serde_json::from_str(&text).unwrap();
                    let id = event["event_id"].as_str().unwrap_or_default();
                    assert!(id.starts_with("event_"), "no event_id: {event}");
                    return event;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// The next server event of type `ty`, skipping others.
    pub async fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let event = self.recv().await;
            if event["type"] == ty {
                return event;
            }
        }
    }

    /// How the socket ends: `Some(true)` for a close frame, `Some(false)` for an abrupt end.
    pub async fn end(&mut self) -> Option<bool> {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next()).await.ok()? {
                Some(Ok(Message::Close(_))) => return Some(true),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Some(false),
            }
        }
    }
}
