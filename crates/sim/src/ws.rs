//! The call's WebSocket, `GET /v1/realtime?call_id=...`: the upgrade checks, and one task per
//! connection that relays between the socket, the simulated API and the test's `ModelHandle`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State as AxumState};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::client_events;
use crate::rest::{Answer, authorization, authorized};
use crate::state::{Attached, CallStatus, Outbound, Shared};

/// Refuses the upgrade unless the key is right and the call is accepted and not over.
pub(crate) async fn upgrade(
    AxumState(shared): AxumState<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let authorization = authorization(&headers);
    let Some(call_id) = query.get("call_id").cloned() else {
        return Answer::missing("call_id").into_response();
    };
    {
        let state = shared.lock();
        if !authorized(&state, authorization.as_deref()) {
            return Answer::unauthorized(authorization.as_deref()).into_response();
        }
        let why = match state.calls.get(&call_id).map(|call| call.status) {
            None => Some("not found"),
            Some(CallStatus::Incoming) => Some("has not been accepted"),
            Some(CallStatus::Rejected) => Some("was rejected"),
            Some(CallStatus::HungUp) => Some("has ended"),
            Some(CallStatus::Accepted) => None,
        };
        if let Some(why) = why {
            return Answer::no_socket(&call_id, why).into_response();
        }
    }
    match upgrade {
        Ok(upgrade) => upgrade
            .read_buffer_size(crate::SOCKET_READ_BUFFER)
            .on_upgrade(move |socket| connection(shared, call_id, socket))
            .into_response(),
        Err(rejection) => rejection.into_response(),
    }
}

/// Serves one attachment until the client leaves, the call ends, the test drops it, or the
/// simulator shuts down.
async fn connection(shared: Arc<Shared>, call_id: String, mut socket: WebSocket) {
    // Registered only now, so a handle exists only for a socket that really opened.
    let Some(Attached {
        id,
        mut outbound,
        inbound,
        session,
    }) = shared.attach(&call_id)
    else {
        // Hung up between the upgrade check and now.
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    let created = json!({
        "event_id": shared.ids().event(),
        "type": "session.created",
        "session": session,
    });
    let end = if send(&mut socket, &created).await {
        relay(&shared, &call_id, &mut socket, &mut outbound, &inbound).await
    } else {
        End::Gone
    };
    match end {
        End::Close => {
            let frame = CloseFrame {
                code: close_code::NORMAL,
                reason: "call ended".into(),
            };
            let _ = socket.send(Message::Close(Some(frame))).await;
            shared.detach(&call_id, id);
        }
        End::Drop(ack) => {
            // No close frame: to the client this looks like a network failure. Detached before
            // the ack so the attachment is gone once `drop_connection` returns.
            drop(socket);
            shared.detach(&call_id, id);
            let _ = ack.send(());
        }
        End::Gone => shared.detach(&call_id, id),
    }
}

/// What ended a relay loop.
enum End {
    /// Close normally (the call ended).
    Close,
    /// Drop without a close frame, then acknowledge.
    Drop(tokio::sync::oneshot::Sender<()>),
    /// The client left, the socket failed or the simulator stopped.
    Gone,
}

/// Relays until something ends the attachment.
async fn relay(
    shared: &Shared,
    call_id: &str,
    socket: &mut WebSocket,
    outbound: &mut mpsc::UnboundedReceiver<Outbound>,
    inbound: &mpsc::UnboundedSender<Value>,
) -> End {
    loop {
        tokio::select! {
            // The test's events go out before new client traffic is read, keeping its order.
            biased;
            () = shared.stopped() => return End::Gone,
            out = outbound.recv() => {
                // Events queued together leave in one write, as a server's back-to-back
                // events share a segment; what follows them is handled after the flush.
                let mut next = out;
                while let Some(Outbound::Text(text)) = next {
                    if socket.feed(Message::Text(text.into())).await.is_err() {
                        return End::Gone;
                    }
                    next = outbound.try_recv().ok();
                }
                if socket.flush().await.is_err() {
                    return End::Gone;
                }
                match next {
                    Some(Outbound::Close) => return End::Close,
                    Some(Outbound::Drop(ack)) => return End::Drop(ack),
                    Some(Outbound::Text(_)) | None => {}
                }
            }
            message = socket.recv() => match message {
                Some(Ok(Message::Text(text))) => {
                    for reply in on_text(shared, call_id, text.as_str(), inbound) {
                        if !send(socket, &reply).await {
                            return End::Gone;
                        }
                    }
                }
                Some(Ok(Message::Binary(bytes))) => {
                    let raw = Value::String(format!("<binary frame, {} bytes>", bytes.len()));
                    shared.lock().violation(
                        call_id,
                        "client sent a binary frame; events are JSON text frames".to_owned(),
                        &raw,
                    );
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return End::Gone,
            },
        }
    }
}

/// Handles one text frame: hands the event to the test and returns the API's replies.
fn on_text(
    shared: &Shared,
    call_id: &str,
    text: &str,
    inbound: &mpsc::UnboundedSender<Value>,
) -> Vec<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(event) => {
            let replies = client_events::handle(shared, call_id, &event);
            // The handle may be gone; the API still answers.
            let _ = inbound.send(event);
            replies
        }
        Err(err) => {
            let raw = Value::String(text.to_owned());
            let reply = client_events::unparseable(shared, call_id, &raw, &err.to_string());
            let _ = inbound.send(raw);
            vec![reply]
        }
    }
}

/// Writes one server event; `false` if the socket failed.
async fn send(socket: &mut WebSocket, event: &Value) -> bool {
    socket
        .send(Message::Text(event.to_string().into()))
        .await
        .is_ok()
}
