//! The open-files limit of a serving node. Each live phone call holds descriptors (its
//! WebSocket to OpenAI, a pooled REST connection), so the soft limit many systems start with,
//! 1,024, stops a node at a few hundred calls with `Too many open files`. `serve` raises the soft
//! limit to the hard one at start and says so when even that is short.

/// Descriptors per live phone call, and for everything else (listeners, the database, logs).
const PER_CALL: u64 = 2;
const RESERVED: u64 = 256;
/// Calls a node should be able to hold without a warning.
const CALLS_WANTED: u64 = 10_000;

/// Raises the soft limit as far as the hard limit allows; a warning for the log when the limit
/// leaves room for fewer than 10,000 calls.
pub fn raise() -> Option<String> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => short_of_calls(limit),
        Err(e) => Some(format!(
            "cannot read or raise the open-files limit ({e}); each phone call needs {PER_CALL} descriptors"
        )),
    }
}

/// The warning for an open-files limit of `limit`, if it holds fewer calls than wanted.
fn short_of_calls(limit: u64) -> Option<String> {
    let calls = limit.saturating_sub(RESERVED) / PER_CALL;
    (calls < CALLS_WANTED).then(|| {
        let wanted = CALLS_WANTED * PER_CALL + RESERVED;
        format!(
            "the open-files limit is {limit}: enough for about {calls} phone calls at once ({PER_CALL} descriptors each); \
             for {CALLS_WANTED} raise it to at least {wanted} before starting (`ulimit -n {wanted}`, or `LimitNOFILE={wanted}` under systemd)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_short_of_ten_thousand_calls_says_how_many_and_how_to_raise_it() {
        let warning = short_of_calls(1024).expect("1,024 is short");
        assert!(warning.contains("about 384 phone calls"), "{warning}");
        assert!(warning.contains("ulimit -n 20256"), "{warning}");
        assert_eq!(short_of_calls(20_256), None);
        assert!(short_of_calls(20_255).is_some());
        assert!(short_of_calls(0).unwrap().contains("about 0 phone calls"));
    }
}
