//! OpenTelemetry spans of a call, its invocations and their effects.
//!
//! The runtime makes spans through the OpenTelemetry API only; whoever starts it decides
//! whether they go anywhere ([`Traces::new`] with a tracer that exports, or [`Traces::off`]).
//! Off, nothing is made: no span, no context, no header.
//!
//! One span per call (its session's start to its end), one per invocation (its function
//! call's arrival to its answer; a child of the caller's span when the door received a
//! `traceparent`, else of the call's span), and one per effect, a child of its invocation's,
//! which is the parent an upstream sees in the `traceparent` of an `api_call` or MCP request.
//! A span carries identifiers, the outcome and timings, never arguments, outputs or secrets:
//! an `api_call`'s `url.full` has every query value replaced and its path passed through the
//! call's redactor.
//!
//! The invocation's span reaches its effects as the task's OpenTelemetry [`Context`], with the
//! call's redactor beside it ([`InvocationSpan::context_for_run`]).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{Link, SpanBuilder, SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use reqwest::Url;
use switchboard_core::effect::{EffectOutcome, EffectRequest, HttpRequest};

use crate::invocation::{Invocation, InvocationRecord};
use crate::redact::Redactor;

mod parent;

pub use parent::{MAX_TRACESTATE_BYTES, TraceParent, headers_of};

/// What `url.full` shows of a query value.
pub const REDACTED_QUERY_VALUE: &str = "REDACTED";

/// Where spans go: a tracer, or nowhere. Cheap to clone.
#[derive(Clone, Default)]
pub struct Traces {
    tracer: Option<Arc<BoxedTracer>>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("on", &self.tracer.is_some())
            .finish()
    }
}

/// The call's redactor, carried in an invocation's context for its effects' spans.
#[derive(Clone)]
struct SpanRedactor(Redactor);

impl Traces {
    /// No spans at all.
    pub fn off() -> Self {
        Traces::default()
    }

    /// Spans made with `tracer` (which decides where they go and which are sampled).
    pub fn new(tracer: BoxedTracer) -> Self {
        Traces {
            tracer: Some(Arc::new(tracer)),
        }
    }

    /// Whether spans are made.
    pub fn is_on(&self) -> bool {
        self.tracer.is_some()
    }

    /// The span of a call, from its session's start; a child of `parent` when the request
    /// that started the call carried one.
    pub(crate) fn call(
        &self,
        tenant: &str,
        call_id: &str,
        parent: Option<&TraceParent>,
    ) -> CallSpan {
        let Some(tracer) = &self.tracer else {
            return CallSpan(None);
        };
        let parent_cx = remote_parent(parent);
        let span = SpanBuilder::from_name("call")
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("switchboard.tenant.id", tenant.to_owned()),
                KeyValue::new("switchboard.call.id", call_id.to_owned()),
            ])
            .start_with_context(tracer.as_ref(), &parent_cx);
        CallSpan(Some(parent_cx.with_span(span)))
    }

    /// The span of one invocation, from its function call's arrival (`arrived`): a child of the
    /// caller's span when the door received one (then linked to the call's span), else of the
    /// call's span.
    pub(crate) fn invocation(
        &self,
        call: &CallSpan,
        tenant: &str,
        inv: &Invocation,
        tool: &str,
        parent: Option<&TraceParent>,
        arrived: Instant,
    ) -> InvocationSpan {
        let Some(tracer) = &self.tracer else {
            return InvocationSpan(None);
        };
        let call_cx = call.0.as_ref();
        let (parent_cx, kind, links) = match (parent, call_cx) {
            (Some(p), call_cx) => {
                let links = call_cx
                    .map(|c| vec![Link::with_context(c.span().span_context().clone())])
                    .unwrap_or_default();
                (remote_parent(Some(p)), SpanKind::Server, links)
            }
            (None, Some(c)) => (c.clone(), SpanKind::Internal, Vec::new()),
            (None, None) => (Context::new(), SpanKind::Internal, Vec::new()),
        };
        let start = SystemTime::now()
            .checked_sub(arrived.elapsed())
            .unwrap_or_else(SystemTime::now);
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_owned()),
            KeyValue::new("gen_ai.tool.call.id", inv.function_call_id.clone()),
            KeyValue::new("switchboard.tenant.id", tenant.to_owned()),
            KeyValue::new("switchboard.call.id", inv.call_id.clone()),
        ];
        if let Some(r) = &inv.response_id {
            attributes.push(KeyValue::new("switchboard.response.id", r.clone()));
        }
        let span = SpanBuilder::from_name(format!("execute_tool {tool}"))
            .with_kind(kind)
            .with_start_time(start)
            .with_links(links)
            .with_attributes(attributes)
            .start_with_context(tracer.as_ref(), &parent_cx);
        InvocationSpan(Some(parent_cx.with_span(span)))
    }

    /// The span of one effect, a child of the current context's span (the invocation's, see
    /// [`InvocationSpan::context_for_run`]); `None` when off or outside an invocation.
    pub(crate) fn effect(&self, request: &EffectRequest) -> Option<Context> {
        let tracer = self.tracer.as_ref()?;
        let parent_cx = Context::current();
        if !parent_cx.has_active_span() {
            return None;
        }
        let redactor = parent_cx.get::<SpanRedactor>().map(|r| &r.0);
        let (name, kind, attributes) = effect_span_fields(request, redactor);
        let span = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer.as_ref(), &parent_cx);
        Some(parent_cx.with_span(span))
    }
}

/// A remote parent as a context (the empty context without one).
fn remote_parent(parent: Option<&TraceParent>) -> Context {
    match parent {
        Some(p) => Context::new().with_remote_span_context(p.span_context().clone()),
        None => Context::new(),
    }
}

/// A call's span; holds nothing when traces are off.
#[derive(Debug, Default)]
pub struct CallSpan(Option<Context>);

impl CallSpan {
    /// Ends the span: `ended` says how (`ended`, `released`, `dropped`).
    pub(crate) fn end(&mut self, ended: &'static str) {
        if let Some(cx) = self.0.take() {
            let span = cx.span();
            span.set_attribute(KeyValue::new("switchboard.call.end", ended));
            span.end();
        }
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        self.end("dropped");
    }
}

/// An invocation's span; holds nothing when traces are off.
#[derive(Debug, Clone, Default)]
pub struct InvocationSpan(Option<Context>);

impl InvocationSpan {
    /// The context a run's task carries: this span, and the call's redactor for its
    /// effects' URLs. `None` when off.
    pub(crate) fn context_for_run(&self, redactor: &Redactor) -> Option<Context> {
        self.0
            .as_ref()
            .map(|cx| cx.with_value(SpanRedactor(redactor.clone())))
    }

    /// Ends the span with what the record says of the answer; `tool` is what the call knows of
    /// the tool that ran (its version and side effect), when it knows it.
    pub(crate) fn end(&self, record: &InvocationRecord, tool: Option<(Option<i64>, &str)>) {
        let Some(cx) = &self.0 else {
            return;
        };
        let span = cx.span();
        let outcome = record.error.map_or("ok", |e| e.as_str());
        let mut attributes = vec![
            KeyValue::new("switchboard.outcome", outcome),
            KeyValue::new("switchboard.latency_ms", record.latency_ms),
            KeyValue::new("switchboard.interrupted", record.interrupted),
            KeyValue::new("switchboard.duplicate", record.duplicate_of.is_some()),
        ];
        if let Some(first) = &record.duplicate_of {
            attributes.push(KeyValue::new("switchboard.duplicate_of", first.clone()));
        }
        if let Some((version, side_effect)) = tool {
            if let Some(v) = version {
                attributes.push(KeyValue::new("switchboard.tool.version", v));
            }
            attributes.push(KeyValue::new(
                "switchboard.tool.side_effect",
                side_effect.to_owned(),
            ));
        }
        if let Some(code) = record.error {
            attributes.push(KeyValue::new("error.type", code.as_str()));
            span.set_status(Status::error(code.as_str()));
        }
        span.set_attributes(attributes);
        span.end();
    }
}

/// Ends an effect's span with its outcome.
pub(crate) fn end_effect(cx: &Context, outcome: &EffectOutcome) {
    let span = cx.span();
    match outcome {
        EffectOutcome::Http(resp) => {
            span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(resp.status),
            ));
            if resp.status >= 400 {
                span.set_attribute(KeyValue::new("error.type", resp.status.to_string()));
                span.set_status(Status::error(""));
            }
        }
        EffectOutcome::Failed(e) => {
            span.set_attribute(KeyValue::new("error.type", e.code.as_str()));
            span.set_status(Status::error(e.code.as_str()));
        }
        _ => {}
    }
    span.end();
}

/// The `traceparent` and `tracestate` of the current context's span, for a request to an
/// upstream; `None` outside a span (always, when traces are off).
pub fn current_headers() -> Option<(String, Option<String>)> {
    Context::map_current(|cx| {
        if !cx.has_active_span() {
            return None;
        }
        headers_of(cx.span().span_context())
    })
}

/// Sets an attribute on the current context's span (the effect's), if any.
pub(crate) fn set_current(attribute: KeyValue) {
    Context::map_current(|cx| {
        if cx.has_active_span() {
            cx.span().set_attribute(attribute);
        }
    });
}

/// An effect span's name, kind and attributes.
fn effect_span_fields(
    request: &EffectRequest,
    redactor: Option<&Redactor>,
) -> (String, SpanKind, Vec<KeyValue>) {
    match request {
        EffectRequest::Http(h) => http_fields(h, redactor),
        EffectRequest::Mcp(m) => (
            format!("tools/call {}", m.tool),
            SpanKind::Client,
            vec![
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("gen_ai.tool.name", m.tool.clone()),
                KeyValue::new("switchboard.mcp.server", m.server.clone()),
            ],
        ),
        EffectRequest::Toolkit(t) => (
            t.action.clone(),
            SpanKind::Client,
            vec![KeyValue::new(
                "switchboard.toolkit.action",
                t.action.clone(),
            )],
        ),
        EffectRequest::Transfer(t) => {
            let mut attributes = vec![KeyValue::new("switchboard.effect", "transfer")];
            if let Some(d) = &t.destination_id {
                attributes.push(KeyValue::new(
                    "switchboard.transfer.destination_id",
                    d.clone(),
                ));
            }
            ("transfer".to_owned(), SpanKind::Client, attributes)
        }
        EffectRequest::EndCall(_) => (
            "end_call".to_owned(),
            SpanKind::Client,
            vec![KeyValue::new("switchboard.effect", "end_call")],
        ),
    }
}

/// An `api_call`'s span: named by its method, with the HTTP client semantic conventions.
fn http_fields(h: &HttpRequest, redactor: Option<&Redactor>) -> (String, SpanKind, Vec<KeyValue>) {
    let method = h.method.to_ascii_uppercase();
    let mut attributes = vec![KeyValue::new("http.request.method", method.clone())];
    if let Ok(url) = Url::parse(&h.url) {
        if let Some(host) = url.host_str() {
            attributes.push(KeyValue::new("server.address", host.to_owned()));
        }
        if let Some(port) = url.port_or_known_default() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        attributes.push(KeyValue::new("url.full", url_full(url, &h.query, redactor)));
    }
    (method, SpanKind::Client, attributes)
}

/// The URL as a span shows it: no user or password, no fragment, each query value (the URL's
/// own and the tool's `query`) replaced by [`REDACTED_QUERY_VALUE`], the path without the
/// call's secrets. Query values often carry the model's arguments or keys; paths name the
/// resource.
fn url_full(mut url: Url, query: &[(String, String)], redactor: Option<&Redactor>) -> String {
    let keys: Vec<String> = url
        .query_pairs()
        .map(|(k, _)| k.into_owned())
        .chain(query.iter().map(|(k, _)| k.clone()))
        .collect();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_fragment(None);
    if let Some(r) = redactor
        && !r.is_empty()
    {
        let path = r.redact(url.path());
        url.set_path(&path);
    }
    if keys.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut()
            .clear()
            .extend_pairs(keys.iter().map(|k| (k.as_str(), REDACTED_QUERY_VALUE)));
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn url_full_hides_query_values_credentials_and_secrets_in_the_path() {
        let redactor = Redactor::new([&json!({"key": "sk-live-123456"})], &json!({}));
        let url = Url::parse(
            "https://user:pw@api.example.com/v1/sk-live-123456/orders?token=abc&x=1#frag",
        )
        .unwrap();
        let query = vec![("city".to_owned(), "Lisbon".to_owned())];
        let shown = url_full(url, &query, Some(&redactor));
        assert_eq!(
            shown,
            "https://api.example.com/v1/[redacted]/orders?token=REDACTED&x=REDACTED&city=REDACTED"
        );
        let plain = url_full(Url::parse("http://127.0.0.1:8080/a").unwrap(), &[], None);
        assert_eq!(plain, "http://127.0.0.1:8080/a");
    }
}
