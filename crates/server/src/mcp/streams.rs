//! The MCP door's streams end on their own: an answer sent as a server-sent event stream (a
//! session's GET stream, or a POST answered as a stream) is ended after the longest a stream may
//! last, between two events. The protocol lets a server end a stream at any time; a client
//! opens a new GET stream (resuming from its last event), and a POST stream never lasts that
//! long, as a tool's deadline is shorter. A stream's idle bound is its session's: a session
//! without a message from its client for the session idle time is closed, and its streams with it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

/// `response` unchanged, unless it is an event stream: then its body ends after `max`.
pub fn bounded(response: Response, max: Duration) -> Response {
    let streaming = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        return response;
    }
    response.map(|body| {
        Body::new(Lifetime {
            inner: body,
            ends: Box::pin(tokio::time::sleep(max)),
        })
    })
}

/// A stream's body with its end: after it, the body ends between two frames.
struct Lifetime {
    inner: Body,
    ends: Pin<Box<Sleep>>,
}

impl http_body::Body for Lifetime {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.ends.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::response::IntoResponse;
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_event_stream_ends_at_its_bound_and_other_answers_are_left_alone() {
        let events =
            futures_util::stream::repeat_with(|| Ok::<_, std::io::Error>("data: ping\n\n")).then(
                |e| async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    e
                },
            );
        let response = (
            [(CONTENT_TYPE, "text/event-stream")],
            Body::from_stream(events),
        )
            .into_response();
        let started = tokio::time::Instant::now();
        let body = bounded(response, Duration::from_secs(10)).into_body();
        let read = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(read.len(), 9 * "data: ping\n\n".len());

        let plain = bounded("{}".into_response(), Duration::ZERO).into_body();
        assert_eq!(axum::body::to_bytes(plain, 16).await.unwrap(), "{}");
    }
}
