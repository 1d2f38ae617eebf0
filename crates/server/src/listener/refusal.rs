//! The answer of a listener whose every connection has a request in flight: a short `503` with
//! `Retry-After` and the API's error envelope, then the connection is closed.
//!
//! The answer is written without reading the request. The connection then lingers for a moment
//! while what the client sent is read and dropped, as closing a socket with unread bytes resets
//! it and may destroy the answer on its way; a few refusals linger at once, and past them a
//! connection is closed at once.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::error::{ErrorBody, ErrorDetail};

/// Refusals lingering at once (each holds a descriptor for at most [`LINGER`]).
const LINGERING: usize = 64;
/// The longest a refused connection is kept to read what its client sent.
const LINGER: Duration = Duration::from_millis(500);
/// Bytes read from a refused client before it is closed anyway.
const DRAIN: usize = 64 * 1024;

/// One listener's refusals.
#[derive(Debug)]
pub(crate) struct Refusals {
    answer: Arc<[u8]>,
    lingering: Arc<Semaphore>,
    name: &'static str,
}

impl Refusals {
    pub(crate) fn new(max_connections: usize, name: &'static str) -> Self {
        Refusals {
            answer: answer(max_connections).into(),
            lingering: Arc::new(Semaphore::new(LINGERING)),
            name,
        }
    }

    /// Answers `stream` with the `503` and closes it.
    pub(crate) fn refuse(&self, stream: TcpStream) {
        metrics::counter!("switchboard_connections_refused_total", "listener" => self.name)
            .increment(1);
        let Ok(permit) = Arc::clone(&self.lingering).try_acquire_owned() else {
            // A fresh socket's send buffer is empty: the answer goes out whole, or not at all.
            let _ = stream.try_write(&self.answer);
            return;
        };
        let answer = Arc::clone(&self.answer);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(LINGER, linger(stream, &answer)).await;
            drop(permit);
        });
    }
}

async fn linger(mut stream: TcpStream, answer: &[u8]) {
    if stream.write_all(answer).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// The whole HTTP/1.1 answer, made once per listener.
fn answer(max_connections: usize) -> Vec<u8> {
    let body = ErrorBody {
        error: ErrorDetail {
            code: "unavailable".to_owned(),
            message: format!(
                "this node is serving as many connections as it may ({max_connections}, serve --max-connections), each with a request in flight; retry in a moment"
            ),
            details: Some(serde_json::json!({"retry_after_s": 1, "limit": max_connections})),
        },
    };
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default(),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_refusal_is_a_503_in_the_envelope_with_retry_after() {
        let text = String::from_utf8(answer(256)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "unavailable");
        assert_eq!(body["error"]["details"]["limit"], 256);
    }
}
