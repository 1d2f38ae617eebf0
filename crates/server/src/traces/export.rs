//! Spans exported in batches over OTLP/HTTP (protobuf) from a thread of their own.
//!
//! A call never waits for the collector: a finished span is handed to a bounded queue without
//! blocking, and one past the bound is dropped and counted. A collector that is down or slow
//! costs the spans of the batches it does not take (counted too), never a call's time.
//!
//! The SDK's batch processor drops silently when its queue is full; [`Bounded`] in front of it
//! keeps the bound itself (spans handed on and not yet exported, which the exporter
//! [`Counted`] gives back), so every dropped span is counted in
//! `switchboard_trace_spans_dropped_total{reason}`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};
use secrecy::ExposeSecret;
use switchboard_runtime::Traces;

use super::settings::TraceSettings;

/// Why the exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("could not set up trace export to {origin}: {reason}")]
pub struct TraceSetupError {
    origin: String,
    reason: String,
}

/// The running export: keep it for the process's life, then [`TraceExport::shutdown`] it so
/// the last spans are sent.
#[derive(Debug)]
pub struct TraceExport {
    provider: SdkTracerProvider,
}

impl TraceExport {
    /// Starts exporting to `settings.endpoint`; the [`Traces`] to give the executors.
    pub fn start(settings: &TraceSettings) -> Result<(TraceExport, Traces), TraceSetupError> {
        let failed = |reason: String| TraceSetupError {
            origin: settings.origin(),
            reason,
        };
        let headers: HashMap<String, String> = settings
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
            .collect();
        let otlp = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.as_str())
            .with_timeout(settings.timeout)
            .with_headers(headers)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let in_flight = Arc::new(AtomicUsize::new(0));
        let exporter = Counted {
            inner: otlp,
            in_flight: Arc::clone(&in_flight),
            failing: AtomicBool::new(false),
            origin: settings.origin(),
        };
        // The SDK's queue is as large as ours: ours fills first, so it never drops itself.
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(settings.max_queue)
                    .with_max_export_batch_size(settings.max_batch)
                    .with_scheduled_delay(settings.delay)
                    .build(),
            )
            .build();
        let processor = Bounded {
            inner: batch,
            in_flight,
            max: settings.max_queue,
        };
        let resource = Resource::builder_empty()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("switchboard");
        let traces = Traces::new(opentelemetry::global::BoxedTracer::new(Box::new(tracer)));
        Ok((TraceExport { provider }, traces))
    }

    /// Sends what is queued (within the exporter's timeout) and stops the export thread.
    /// Blocking: call it off the async runtime's threads (`spawn_blocking`).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(name: "trace_export_shutdown_failed", error = %e, "trace_export_shutdown_failed");
        }
    }
}

/// The batch processor behind a bound of its own, counting what it drops.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    /// Spans handed to `inner` and not yet through the exporter.
    in_flight: Arc<AtomicUsize>,
    max: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let admitted = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            self.inner.on_end(span);
        } else {
            metrics::counter!("switchboard_trace_spans_dropped_total", "reason" => "queue_full")
                .increment(1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting what it sends and what the collector did not take, and
/// giving the queue its room back.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    in_flight: Arc<AtomicUsize>,
    /// Whether the last export failed: a failure is logged once, then its recovery.
    failing: AtomicBool,
    origin: String,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
        let count = u64::try_from(n).unwrap_or(u64::MAX);
        match &result {
            Ok(()) => {
                metrics::counter!("switchboard_trace_spans_exported_total").increment(count);
                if self.failing.swap(false, Ordering::AcqRel) {
                    tracing::info!(name: "trace_export_recovered", collector = %self.origin, "trace_export_recovered");
                }
            }
            Err(_) => {
                metrics::counter!("switchboard_trace_spans_dropped_total", "reason" => "export_failed")
                    .increment(count);
                // The error's text may hold the collector's URL; the origin says enough.
                if !self.failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(name: "trace_export_failed", collector = %self.origin, spans = n, "trace_export_failed");
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
