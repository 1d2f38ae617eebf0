//! Which request an MCP server's answer belongs to: the one whose POST carried it, whatever id
//! the answer names.
//!
//! rmcp hands every answer it reads to the request waiting under the answer's JSON-RPC id. The
//! POST of a request is answered with one JSON message or a stream of events ending in its
//! answer, so the POST itself says which request an answer is for: an answer there that names
//! another request's id (a server mixing up two concurrent calls of one session) would reach
//! that other request as its result. It is turned, where the POST's response is read, into a
//! protocol error for the request the POST carried (recognised by [`is_misaddressed`]), and so
//! never reaches another waiter. An error answer without an id (the server could not read
//! ours) is the POST's request's too. On a legacy session's GET stream a server may send
//! requests and notifications but no answer (this client never resumes a stream there), so an
//! answer there is dropped.

use futures_util::StreamExt;
use rmcp::model::{ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::StreamableHttpPostResponse;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use sse_stream::Sse;

/// The key of the error data that marks an answer made here for a misaddressed one.
const MARKER: &str = "switchboard/misaddressed_answer";

/// The error a request gets in place of an answer that named another request's id.
fn misaddressed(ours: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            "the server answered this request with another request's id",
            Some(json!({ MARKER: true })),
        ),
        Some(ours),
    )
}

/// Whether a request's error is the one [`misaddressed`] made.
pub(super) fn is_misaddressed(error: &ErrorData) -> bool {
    error
        .data
        .as_ref()
        .and_then(|d| d.get(MARKER))
        .is_some_and(|v| v == &Value::Bool(true))
}

/// Whether an answer's id names `ours`; a number sent back as its text counts, as rmcp routes
/// it so.
fn names(ours: &RequestId, id: &RequestId) -> bool {
    ours == id
        || matches!((ours, id), (RequestId::Number(n), RequestId::String(s)) if s.parse::<i64>().ok() == Some(*n))
}

/// What a message is, as far as addressing goes.
enum Addressed {
    /// Not an answer (a request or a notification of the server's), or an answer to `ours`.
    Fine,
    /// An error answer without an id.
    Unaddressed,
    /// An answer naming another request.
    Other,
}

fn addressed(ours: &RequestId, message: &ServerJsonRpcMessage) -> Addressed {
    match message {
        ServerJsonRpcMessage::Response(r) if !names(ours, &r.id) => Addressed::Other,
        ServerJsonRpcMessage::Error(e) => match &e.id {
            None => Addressed::Unaddressed,
            Some(id) if !names(ours, id) => Addressed::Other,
            Some(_) => Addressed::Fine,
        },
        _ => Addressed::Fine,
    }
}

/// `message`, read from the POST of request `ours`, as that request's answer.
fn for_request(ours: &RequestId, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    match addressed(ours, &message) {
        Addressed::Fine => message,
        Addressed::Other => misaddressed(ours.clone()),
        Addressed::Unaddressed => match message {
            ServerJsonRpcMessage::Error(mut e) => {
                e.id = Some(ours.clone());
                ServerJsonRpcMessage::Error(e)
            }
            other => other,
        },
    }
}

/// The JSON-RPC fields that tell an answer from a request or notification, read without
/// building the rest.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<IgnoredAny>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

impl Envelope {
    fn is_answer(&self) -> bool {
        self.method.is_none() && (self.result.is_some() || self.error.is_some())
    }
}

/// One event of the POST's stream of request `ours`: an answer in it naming another request
/// (or none) is rewritten as [`for_request`] says. Events that are no JSON-RPC message are left
/// to rmcp, which refuses them.
fn event_for_request(ours: &RequestId, mut event: Sse) -> Sse {
    let Some(data) = event.data.as_deref() else {
        return event;
    };
    let Ok(envelope) = serde_json::from_str::<Envelope>(data) else {
        return event;
    };
    let fine = !envelope.is_answer() || envelope.id.as_ref().is_some_and(|id| names(ours, id));
    if fine {
        return event;
    }
    let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(data) else {
        return event;
    };
    if let Ok(text) = serde_json::to_string(&for_request(ours, message)) {
        event.data = Some(text);
    }
    event
}

/// The response of a POST, each answer in it addressed to the request the POST carried (`None`
/// for a notification or an answer of ours, which get no answer).
pub(super) fn of_post(
    ours: Option<RequestId>,
    response: StreamableHttpPostResponse,
) -> StreamableHttpPostResponse {
    let Some(ours) = ours else {
        return response;
    };
    match response {
        StreamableHttpPostResponse::Json(message, session) => {
            StreamableHttpPostResponse::Json(for_request(&ours, message), session)
        }
        StreamableHttpPostResponse::Sse(stream, session) => {
            let stream = stream
                .map(move |event| event.map(|e| event_for_request(&ours, e)))
                .boxed();
            StreamableHttpPostResponse::Sse(stream, session)
        }
        other => other,
    }
}

/// A legacy session's GET stream without its answers (see the module's doc).
pub(super) fn of_get_stream(stream: BoxedSseResponse) -> BoxedSseResponse {
    stream
        .filter(|event| {
            let answer = event.as_ref().ok().and_then(|e| e.data.as_deref()).is_some_and(|data| {
                serde_json::from_str::<Envelope>(data).is_ok_and(|e| e.is_answer())
            });
            if answer {
                tracing::warn!(name: "mcp_answer_on_get_stream_dropped", "mcp_answer_on_get_stream_dropped");
            }
            std::future::ready(!answer)
        })
        .boxed()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn message(v: Value) -> ServerJsonRpcMessage {
        serde_json::from_value(v).unwrap()
    }

    fn event(v: &Value) -> Sse {
        Sse {
            event: Some("message".into()),
            data: Some(v.to_string()),
            id: None,
            retry: None,
        }
    }

    fn id_and_marker(m: &ServerJsonRpcMessage) -> (Value, bool) {
        let v = serde_json::to_value(m).unwrap();
        let marked = v
            .pointer(&format!("/error/data/{}", MARKER.replace('/', "~1")))
            .is_some();
        (v["id"].clone(), marked)
    }

    /// Each answer the POST of request 7 may carry, and what request 7 gets of it.
    #[test]
    fn an_answer_read_from_a_post_is_its_requests() {
        let ours = RequestId::Number(7);
        let cases = [
            (
                json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
                (json!(7), false),
            ),
            (
                json!({"jsonrpc": "2.0", "id": "7", "result": {}}),
                (json!("7"), false),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 8, "result": {}}),
                (json!(7), true),
            ),
            (
                json!({"jsonrpc": "2.0", "id": "x", "result": {}}),
                (json!(7), true),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 8, "error": {"code": -32602, "message": "no"}}),
                (json!(7), true),
            ),
            (
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}),
                (json!(7), false),
            ),
            (
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}),
                (Value::Null, false),
            ),
        ];
        for (answer, expected) in cases {
            let json = of_post(
                Some(ours.clone()),
                StreamableHttpPostResponse::Json(message(answer.clone()), None),
            );
            let StreamableHttpPostResponse::Json(got, _) = json else {
                panic!("a JSON response stays one");
            };
            assert_eq!(id_and_marker(&got), expected, "JSON {answer}");
            let got = event_for_request(&ours, event(&answer));
            let got: ServerJsonRpcMessage =
                serde_json::from_str(got.data.as_deref().unwrap()).unwrap();
            assert_eq!(id_and_marker(&got), expected, "SSE {answer}");
        }
        let made = misaddressed(ours);
        let ServerJsonRpcMessage::Error(e) = made else {
            panic!("an error");
        };
        assert!(is_misaddressed(&e.error));
    }

    /// A notification's POST, which gets no answer, is left as it is.
    #[test]
    fn a_post_without_a_request_is_left_alone() {
        let answer = json!({"jsonrpc": "2.0", "id": 8, "result": {}});
        let StreamableHttpPostResponse::Json(got, _) = of_post(
            None,
            StreamableHttpPostResponse::Json(message(answer), None),
        ) else {
            panic!("a JSON response stays one");
        };
        assert_eq!(id_and_marker(&got), (json!(8), false));
    }
}
