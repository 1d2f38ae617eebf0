//! Request and response bodies as a connection serves them: a request body has until the body
//! timeout to arrive whole, and a response body keeps its request in flight until it is sent.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::activity::InFlight;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body did not arrive whole within the body timeout: the handler reading it fails
/// with this, and the API answers `408`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the request body did not arrive within {} s of the request's headers (the server's --body-read-timeout-ms); send it at once, not a little at a time",
    .0.as_secs_f64()
)]
pub struct BodyReadTimedOut(pub Duration);

impl BodyReadTimedOut {
    /// The timeout in `error`'s chain of sources, if that is why it failed.
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<BodyReadTimedOut> {
        let mut current = Some(error);
        while let Some(e) = current {
            if let Some(found) = e.downcast_ref::<BodyReadTimedOut>() {
                return Some(*found);
            }
            current = e.source();
        }
        None
    }
}

/// A request body with a deadline for its last byte. The timer starts only when the body is
/// not all there when first read, so most requests never set one.
#[derive(Debug)]
pub(crate) struct ReadDeadline {
    inner: Incoming,
    timeout: Duration,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl ReadDeadline {
    pub(crate) fn new(inner: Incoming, timeout: Duration) -> Self {
        ReadDeadline {
            inner,
            timeout,
            deadline: Instant::now() + timeout,
            timer: None,
        }
    }
}

impl http_body::Body for ReadDeadline {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyReadTimedOut(this.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds its request in flight until hyper has taken its last frame (or
/// dropped it: the client went away).
#[derive(Debug)]
pub(crate) struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl Tracked {
    pub(crate) fn new(inner: Body, in_flight: InFlight) -> Self {
        Tracked {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
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
    use super::*;

    #[test]
    fn the_timeout_is_found_under_the_layers_that_wrap_it() {
        let wrapped = axum::Error::new(axum::Error::new(BodyReadTimedOut(Duration::from_secs(30))));
        assert_eq!(
            BodyReadTimedOut::find(&wrapped),
            Some(BodyReadTimedOut(Duration::from_secs(30)))
        );
        assert_eq!(BodyReadTimedOut::find(&axum::Error::new("other")), None);
    }
}
