//! The metrics recorder keeps no more than a few seconds of samples when nobody scrapes
//! `/metrics`. A binary of its own: it installs the process's one recorder and reads the
//! process's resident memory, which other tests running beside it would move.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

/// Resident memory of this process, in bytes (Linux).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm's second field");
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_do_not_pile_up_between_scrapes() {
    let handle = switchboard_server::prometheus::install(Duration::from_millis(10))
        .expect("the only recorder of this binary");
    let tool = metrics::histogram!("switchboard_realtime_tool_seconds");
    // Warm up: the histogram, its first blocks and the allocator's arenas exist.
    for _ in 0..100_000 {
        tool.record(0.001);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = resident_bytes();
    // Four million tool calls' worth, a minute at 70,000 per second: kept as they came,
    // eight bytes each and more, that is over 30 MB.
    for _ in 0..40 {
        for i in 0..100_000u32 {
            tool.record(f64::from(i % 50) / 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 8 * 1024 * 1024,
        "the recorder grew the process by {} KiB for samples nobody scraped",
        grown / 1024
    );
    let text = handle.render();
    let count: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("switchboard_realtime_tool_seconds_count "))
        .and_then(|n| n.parse().ok())
        .expect("the histogram's count");
    // A drain that meets a write in flight can drop that one sample (the recorder's buckets
    // are lock-free); a few in four million is what a scrape meets too.
    assert!(
        (4_099_000..=4_100_000).contains(&count),
        "every sample is counted once drained, got {count}"
    );
}
