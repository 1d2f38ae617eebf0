//! [`ModelHandle`]: the test plays the model on one WebSocket attachment through it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::state::{Attachment, Outbound, Shared};

/// How long `drop_connection` waits for the connection task to let go of the socket.
const DROP_TIMEOUT: Duration = Duration::from_secs(5);

/// The server side of one WebSocket attachment: receives the client's events and plays the
/// model (responses, function calls, barge-ins). Dropping it leaves the connection open.
pub struct ModelHandle {
    shared: Arc<Shared>,
    call_id: String,
    to_socket: mpsc::UnboundedSender<Outbound>,
    from_socket: mpsc::UnboundedReceiver<Value>,
    /// Every client event received so far, so `recv_type` can skip without losing any.
    seen: Vec<Value>,
}

impl fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelHandle")
            .field("call_id", &self.call_id)
            .field("seen", &self.seen.len())
            .field("connected", &!self.to_socket.is_closed())
            .finish()
    }
}

impl ModelHandle {
    pub(crate) fn new(shared: Arc<Shared>, call_id: String, attachment: Attachment) -> Self {
        ModelHandle {
            shared,
            call_id,
            to_socket: attachment.to_socket,
            from_socket: attachment.from_socket,
            seen: Vec::new(),
        }
    }

    /// The call this attachment belongs to.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The next client event, waiting up to `timeout`; `None` on timeout or once the socket
    /// closed and every event was read.
    pub async fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let event = tokio::time::timeout(timeout, self.from_socket.recv())
            .await
            .ok()??;
        self.seen.push(event.clone());
        Some(event)
    }

    /// The next client event of type `ty`, skipping others (they stay in [`Self::seen`]);
    /// `None` on timeout or close.
    pub async fn recv_type(&mut self, ty: &str, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let event = tokio::time::timeout_at(deadline, self.from_socket.recv())
                .await
                .ok()??;
            self.seen.push(event.clone());
            if event.get("type").and_then(Value::as_str) == Some(ty) {
                return Some(event);
            }
        }
    }

    /// Every client event received through this handle so far, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.seen.clone()
    }

    /// Starts a model response (`response.created`, in progress), makes it the active one and
    /// returns its id.
    pub async fn start_response(&mut self) -> String {
        let (id, created) = {
            let mut state = self.shared.lock();
            state
                .call_mut(&self.call_id)
                .begin_response(self.shared.ids())
        };
        self.emit(&created);
        id
    }

    /// Issues a function call inside `response_id`: the item added, the arguments in 2-3 deltas,
    /// `response.function_call_arguments.done`, then the item done. Records `call_id` as issued.
    pub async fn function_call(
        &mut self,
        response_id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) {
        let ids = self.shared.ids();
        let item_id = ids.item("fc");
        let item = |status: &str, arguments: &str| {
            json!({
                "id": item_id,
                "object": "realtime.item",
                "type": "function_call",
                "status": status,
                "name": name,
                "call_id": call_id,
                "arguments": arguments,
            })
        };
        let completed = item("completed", arguments);
        // Recorded before anything is sent, so the client's answer always finds it issued.
        let output_index = {
            let mut state = self.shared.lock();
            state
                .call_mut(&self.call_id)
                .add_function_call(response_id, call_id, completed.clone())
        };
        self.emit(&json!({
            "event_id": ids.event(),
            "type": "response.output_item.added",
            "response_id": response_id,
            "output_index": output_index,
            "item": item("in_progress", ""),
        }));
        for delta in chunks(arguments) {
            self.emit(&json!({
                "event_id": ids.event(),
                "type": "response.function_call_arguments.delta",
                "response_id": response_id,
                "item_id": item_id,
                "output_index": output_index,
                "call_id": call_id,
                "delta": delta,
            }));
        }
        self.emit(&json!({
            "event_id": ids.event(),
            "type": "response.function_call_arguments.done",
            "response_id": response_id,
            "item_id": item_id,
            "output_index": output_index,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }));
        self.emit(&json!({
            "event_id": ids.event(),
            "type": "response.output_item.done",
            "response_id": response_id,
            "output_index": output_index,
            "item": completed,
        }));
    }

    /// Ends `response_id` with `response.done` (`completed`, `cancelled`, `failed` or
    /// `incomplete`) listing its function calls; sends nothing if it already ended (for
    /// instance cancelled by the client), as the API sends one `response.done` per response.
    pub async fn finish_response(&mut self, response_id: &str, status: &str) {
        let details = match status {
            "cancelled" => json!({"type": "cancelled", "reason": "turn_detected"}),
            "failed" => json!({"type": "failed", "error": {
                "type": "server_error",
                "code": "simulated_failure",
                "message": "The simulated model failed.",
            }}),
            "incomplete" => json!({"type": "incomplete", "reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let done = {
            let mut state = self.shared.lock();
            state.call_mut(&self.call_id).end_response(
                self.shared.ids(),
                response_id,
                status,
                details,
            )
        };
        if let Some(done) = done {
            self.emit(&done);
        }
    }

    /// The caller starts speaking: `input_audio_buffer.speech_started`, then the active
    /// response (if any) ends cancelled with reason `turn_detected`.
    pub async fn barge_in(&mut self) {
        let ids = self.shared.ids();
        self.emit(&json!({
            "event_id": ids.event(),
            "type": "input_audio_buffer.speech_started",
            "audio_start_ms": self.shared.elapsed_ms(),
            "item_id": ids.item("msg"),
        }));
        let done = {
            let mut state = self.shared.lock();
            let call = state.call_mut(&self.call_id);
            call.active_response.clone().and_then(|active| {
                call.end_response(
                    ids,
                    &active,
                    "cancelled",
                    json!({"type": "cancelled", "reason": "turn_detected"}),
                )
            })
        };
        if let Some(done) = done {
            self.emit(&done);
        }
    }

    /// The response the simulated API considers active on this call, if any.
    pub fn active_response(&self) -> Option<String> {
        let state = self.shared.lock();
        state
            .calls
            .get(&self.call_id)
            .and_then(|call| call.active_response.clone())
    }

    /// Sends any server event as is, adding an `event_id` to an object that has none.
    pub async fn send(&mut self, mut event: Value) {
        if let Some(object) = event.as_object_mut()
            && !object.contains_key("event_id")
        {
            object.insert("event_id".to_owned(), json!(self.shared.ids().event()));
        }
        self.emit(&event);
    }

    /// Drops the WebSocket without a close frame, as a network failure would; the call stays
    /// up and the client may attach again.
    pub async fn drop_connection(self) {
        let (ack, acked) = oneshot::channel();
        if self.to_socket.send(Outbound::Drop(ack)).is_ok() {
            // An error means the connection task already ended: the socket is gone either way.
            let _ = tokio::time::timeout(DROP_TIMEOUT, acked).await;
        }
    }

    /// Closes the WebSocket normally (close code 1000), as the API does when the call is over;
    /// the call itself stays as it is, so a client that attached again would be let in.
    pub async fn close(self) {
        let _ = self.to_socket.send(Outbound::Close);
    }

    /// Queues an event for the connection task; a closed connection swallows it, as a dead
    /// socket would.
    fn emit(&self, event: &Value) {
        let _ = self.to_socket.send(Outbound::Text(event.to_string()));
    }
}

/// Splits `text` into 2-3 pieces on character boundaries (fewer when it is that short).
fn chunks(text: &str) -> Vec<&str> {
    let chars = text.chars().count();
    let pieces = match chars {
        0 => return Vec::new(),
        1 => 1,
        2..=5 => 2,
        _ => 3,
    };
    let size = chars.div_ceil(pieces);
    let mut out = Vec::with_capacity(pieces);
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(size)
            .map_or(rest.len(), |(index, _)| index);
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_concatenate_to_the_text() {
        for text in [
            "",
            "a",
            "ab",
            "{\"a\":1}",
            "{\"location\": \"Zürich\"}",
            "ééééééé",
        ] {
            let pieces = chunks(text);
            assert_eq!(pieces.concat(), text);
            let expected = match text.chars().count() {
                0 => 0,
                1 => 1,
                2..=5 => 2,
                _ => 3,
            };
            assert_eq!(pieces.len(), expected, "{text:?}");
        }
    }
}
