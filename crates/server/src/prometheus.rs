//! The process's Prometheus recorder. Latencies are histograms with fixed buckets, which add up
//! across nodes and over any window a query picks (a summary's quantiles do neither), and the
//! recorder is drained on a timer: samples recorded between two scrapes wait in the recorder
//! until something drains them, so a node nobody scrapes would otherwise keep every sample of
//! every tool call it ever ran.

use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

/// Upper bounds of the latency buckets, in seconds: fine around the few milliseconds a voice
/// turn can spare a tool, coarse up to the half minute a slow upstream may take. Every
/// histogram the project records is a duration in seconds (`*_seconds`).
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002, 0.003, 0.005, 0.007_5, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
];

/// How often samples are drained into their buckets between scrapes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder's settings: latencies rendered as histograms with [`LATENCY_BUCKETS`].
pub fn builder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new().set_buckets(LATENCY_BUCKETS)
}

/// Installs the process's one recorder and drains it every `every` on the current tokio
/// runtime, for as long as the runtime runs.
pub fn install(every: Duration) -> Result<PrometheusHandle, BuildError> {
    let handle = builder()?.install_recorder()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::builder;

    #[test]
    fn latencies_render_as_histograms_with_the_voice_buckets() {
        let recorder = builder().expect("buckets are set").build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            metrics::histogram!("switchboard_realtime_tool_seconds").record(0.004);
            metrics::histogram!("switchboard_realtime_tool_seconds").record(0.2);
        });
        let text = handle.render();
        assert!(
            text.contains("# TYPE switchboard_realtime_tool_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_realtime_tool_seconds_bucket{le=\"0.003\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_realtime_tool_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("switchboard_realtime_tool_seconds_count 2"),
            "{text}"
        );
    }
}
