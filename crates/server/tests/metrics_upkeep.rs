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
    // Four million tool calls' worth, a minute at 70,000 per second, recorded on two threads
    // while a third drains every 0.2 ms (besides the 10 ms timer): kept as they came, eight
    // bytes each and more, that is over 30 MB.
    let recording = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(2));
    let drainer = {
        let handle = handle.clone();
        let recording = std::sync::Arc::clone(&recording);
        std::thread::spawn(move || {
            while recording.load(std::sync::atomic::Ordering::Acquire) > 0 {
                handle.run_upkeep();
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let tool = tool.clone();
            let recording = std::sync::Arc::clone(&recording);
            std::thread::spawn(move || {
                for _ in 0..20 {
                    for i in 0..100_000u32 {
                        tool.record(f64::from(i % 50) / 1000.0);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                recording.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer");
    }
    drainer.join().expect("the drainer");
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
    // Drains met writes in flight thousands of times: none of them may lose one.
    assert_eq!(count, 4_100_000, "every sample is counted once drained");
}
