//! The HTTP client of the MCP transport, whose errors never carry the server's URL and whose
//! answers reach only the request whose POST they came on ([`super::answers`]).
//!
//! rmcp formats transport errors into its own log lines (`worker quit with fatal: …`) before we
//! see them, and reqwest's errors embed the request URL, so the URL is taken out where the
//! errors are made: each reqwest error loses its URL, and a server's answer quoted in an error
//! (an HTTP error page, which may echo the URL) is scrubbed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::answers;
use super::scrub::Scrubber;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The guarded reqwest client, its errors made URL-free for one server.
#[derive(Clone, Debug)]
pub(super) struct UrlFreeClient {
    pub(super) http: reqwest::Client,
    pub(super) scrubber: Arc<Scrubber>,
}

impl UrlFreeClient {
    fn clean(&self, error: HttpError) -> HttpError {
        match error {
            StreamableHttpError::Client(e) => StreamableHttpError::Client(e.without_url()),
            StreamableHttpError::UnexpectedServerResponse(text) => {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    self.scrubber.brief(&text),
                ))
            }
            StreamableHttpError::UnexpectedContentType(Some(text)) => {
                StreamableHttpError::UnexpectedContentType(Some(self.scrubber.brief(&text)))
            }
            other => other,
        }
    }
}

/// A `tools/call` whose `_meta` carries a trace context (the effect's span, see `mcp.rs`) is
/// sent with the same `traceparent` and `tracestate` headers, for servers that read them there.
fn trace_headers(message: &ClientJsonRpcMessage, headers: &mut HashMap<HeaderName, HeaderValue>) {
    let ClientJsonRpcMessage::Request(r) = message else {
        return;
    };
    let rmcp::model::ClientRequest::CallToolRequest(call) = &r.request else {
        return;
    };
    let Some(meta) = &call.params.meta else {
        return;
    };
    let pairs = [
        ("traceparent", meta.0.get_traceparent()),
        ("tracestate", meta.0.get_tracestate()),
    ];
    for (name, value) in pairs {
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
}

impl StreamableHttpClient for UrlFreeClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    // The one rmcp's worker calls: the others come here too, so every POST's answers are
    // checked, and the transport's body limits hold.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let request = match &message {
            ClientJsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let mut custom_headers = custom_headers;
        trace_headers(&message, &mut custom_headers);
        let response = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
            .map_err(|e| self.clean(e))?;
        Ok(answers::of_post(request, response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
            .map_err(|e| self.clean(e))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
            .map(answers::of_get_stream)
            .map_err(|e| self.clean(e))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(answers::of_get_stream)
            .map_err(|e| self.clean(e))
    }
}
