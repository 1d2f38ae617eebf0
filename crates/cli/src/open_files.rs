//! The open-files limit of a serving node. Each live phone call holds a descriptor (its
//! WebSocket to OpenAI), so the soft limit many systems start with, 1,024, stops a node at a
//! few hundred calls with `Too many open files`. `serve` raises the soft limit to the hard one
//! at start and says so when even that is short. The API listener's connections take at most a
//! quarter of the limit by default (`ConnectionLimits::for_open_files`), so clients holding
//! connections open cannot take the descriptors the calls need.

/// Descriptors per live phone call: its WebSocket (measured: 10,000 calls held 10,058 in the
/// server and 10,029 in the bench that played OpenAI).
const PER_CALL: u64 = 1;
/// Descriptors for everything else: listeners, the database, connection pools, and webhooks and
/// requests in flight while calls ring.
const RESERVED: u64 = 1024;
/// Calls a node should be able to hold without a warning.
const CALLS_WANTED: u64 = 10_000;

/// Raises the soft limit as far as the hard limit allows; a warning for the log when the limit
/// leaves room for fewer than 10,000 calls.
pub fn raise() -> Option<String> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => short_of_calls(limit),
        Err(e) => Some(format!(
            "cannot read or raise the open-files limit ({e}); each phone call needs a descriptor"
        )),
    }
}

/// The soft open-files limit now (after [`raise`]); `None` when it cannot be read.
pub fn current() -> Option<u64> {
    rlimit::getrlimit(rlimit::Resource::NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

/// For `bench calls`: raises this process's soft limit (a server the bench starts inherits
/// it) and refuses a run of `calls` calls the limit cannot hold, saying how to raise it, rather
/// than letting it fail half-way with `Too many open files`.
pub fn raise_for_bench(calls: usize) -> Result<(), String> {
    let limit = rlimit::increase_nofile_limit(u64::MAX)
        .map_err(|e| format!("cannot read or raise the open-files limit: {e}"))?;
    bench_short_of(limit, calls).map_or(Ok(()), Err)
}

/// The refusal for a bench of `calls` calls under an open-files limit of `limit`: the bench
/// holds a socket per call (its side of each call's WebSocket, or its HTTP connection), as the
/// server does.
fn bench_short_of(limit: u64, calls: usize) -> Option<String> {
    let calls = u64::try_from(calls).unwrap_or(u64::MAX);
    let wanted = wanted_for(calls);
    (limit < wanted).then(|| {
        format!(
            "{calls} calls need about {wanted} open files in the bench and in the server it drives ({PER_CALL} per call, \
             and {RESERVED} for pools and requests in flight), and the limit is {limit}: raise it (`ulimit -n {wanted}`) \
             or lower --concurrency"
        )
    })
}

/// The open-files limit that holds `calls` calls.
fn wanted_for(calls: u64) -> u64 {
    calls.saturating_mul(PER_CALL).saturating_add(RESERVED)
}

/// The warning for an open-files limit of `limit`, if it holds fewer calls than wanted.
fn short_of_calls(limit: u64) -> Option<String> {
    let calls = limit.saturating_sub(RESERVED) / PER_CALL;
    (calls < CALLS_WANTED).then(|| {
        let wanted = wanted_for(CALLS_WANTED);
        format!(
            "the open-files limit is {limit}: enough for about {calls} phone calls at once (a descriptor each, and {RESERVED} besides); \
             for {CALLS_WANTED} raise it to at least {wanted} before starting (`ulimit -n {wanted}`, or `LimitNOFILE={wanted}` under systemd)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_short_of_ten_thousand_calls_says_how_many_and_how_to_raise_it() {
        let warning = short_of_calls(4096).expect("4,096 is short");
        assert!(warning.contains("about 3072 phone calls"), "{warning}");
        assert!(warning.contains("ulimit -n 11024"), "{warning}");
        assert_eq!(short_of_calls(11_024), None);
        assert!(short_of_calls(11_023).is_some());
        assert!(
            short_of_calls(1024)
                .unwrap()
                .contains("about 0 phone calls")
        );
        assert!(short_of_calls(0).unwrap().contains("about 0 phone calls"));
    }

    #[test]
    fn a_bench_the_limit_cannot_hold_is_refused_with_the_limit_it_needs() {
        let refusal = bench_short_of(1024, 10_000).expect("1,024 cannot hold 10,000 calls");
        assert!(refusal.contains("ulimit -n 11024"), "{refusal}");
        assert!(refusal.contains("the limit is 1024"), "{refusal}");
        assert_eq!(bench_short_of(11_024, 10_000), None);
        assert!(bench_short_of(11_023, 10_000).is_some());
        assert_eq!(bench_short_of(2048, 100), None);
        assert!(bench_short_of(u64::MAX - 1, usize::MAX).is_some());
    }
}
