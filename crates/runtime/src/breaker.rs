//! Circuit breakers per tenant and upstream: after `threshold` failures in a row a tenant's
//! calls to that upstream fail fast for a cool-down, then one trial request at a time decides
//! whether it is back. `api_call` keys them by `host:port`, the MCP client pool by server label.
//! An upstream that answers well has no entry: the map only holds upstreams in trouble.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The breaker state of one tenant and upstream, as reported for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests go through.
    Closed,
    /// Requests fail fast with `upstream_unavailable` until `until`.
    Open {
        /// When the cool-down ends and a trial request is let through.
        until: Instant,
    },
    /// The cool-down is over: the next request (only one at a time) is a trial.
    HalfOpen,
}

/// Which breakers these are, for their log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upstream {
    ApiCall,
    Mcp,
}

/// What a finished request says about its upstream's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Failure,
    /// Nothing was learnt (refused before any I/O, or cancelled).
    Neutral,
}

/// Whether the breaker lets a request out.
pub(crate) enum Admission<'a> {
    Go(Ticket<'a>),
    /// `until` is `None` while a half-open trial is in flight.
    Rejected {
        until: Option<Instant>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Breaker {
    failures: u32,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { trial_in_flight: bool },
}

type Key = (String, String);

/// Told of every breaker that opens (tenant id, upstream): the server notes it in the store so
/// alert rules see a breaker open on any node. Called outside the breakers' lock; it must not
/// block (hand the event to a task).
pub type BreakerWatch = std::sync::Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The breakers of one kind of upstream, for every tenant.
#[derive(Debug)]
pub(crate) struct Breakers {
    upstream: Upstream,
    threshold: u32,
    cooldown: Duration,
    map: Mutex<HashMap<Key, Breaker>>,
    watch: std::sync::OnceLock<Watch>,
}

struct Watch(BreakerWatch);

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BreakerWatch")
    }
}

impl Breakers {
    /// `threshold` is at least 1 (a zero is taken as 1).
    pub(crate) fn new(upstream: Upstream, threshold: u32, cooldown: Duration) -> Self {
        Breakers {
            upstream,
            threshold: threshold.max(1),
            cooldown,
            map: Mutex::new(HashMap::new()),
            watch: std::sync::OnceLock::new(),
        }
    }

    /// Sets who is told of breakers opening (once; a second watch is ignored).
    pub(crate) fn watch(&self, watch: BreakerWatch) {
        let _ = self.watch.set(Watch(watch));
    }

    /// The state of `tenant_id`'s breaker for `upstream`.
    pub(crate) fn state(&self, tenant_id: &str, upstream: &str) -> BreakerState {
        let key = (tenant_id.to_owned(), upstream.to_owned());
        match self.lock().get(&key).map(|b| b.phase) {
            None | Some(Phase::Closed) => BreakerState::Closed,
            Some(Phase::Open { until }) if Instant::now() < until => BreakerState::Open { until },
            Some(Phase::Open { .. } | Phase::HalfOpen { .. }) => BreakerState::HalfOpen,
        }
    }

    /// Decides whether a request may go out, moving an expired open breaker to half-open.
    pub(crate) fn admit(&self, tenant_id: &str, upstream: &str) -> Admission<'_> {
        let key = (tenant_id.to_owned(), upstream.to_owned());
        let now = Instant::now();
        let mut map = self.lock();
        let trial = match map.get_mut(&key) {
            None => false,
            Some(breaker) => match breaker.phase {
                Phase::Closed => false,
                Phase::Open { until } if now < until => {
                    return Admission::Rejected { until: Some(until) };
                }
                Phase::Open { .. }
                | Phase::HalfOpen {
                    trial_in_flight: false,
                } => {
                    breaker.phase = Phase::HalfOpen {
                        trial_in_flight: true,
                    };
                    true
                }
                Phase::HalfOpen {
                    trial_in_flight: true,
                } => return Admission::Rejected { until: None },
            },
        };
        drop(map);
        Admission::Go(Ticket {
            breakers: self,
            key,
            trial,
            settled: false,
        })
    }

    /// Records how a request ended in its breaker.
    fn record(&self, key: &Key, trial: bool, verdict: Verdict) {
        if self.record_locked(key, trial, verdict)
            && let Some(watch) = self.watch.get()
        {
            let upstream = match self.upstream {
                Upstream::ApiCall => key.1.clone(),
                Upstream::Mcp => format!("mcp:{}", key.1),
            };
            (watch.0)(&key.0, &upstream);
        }
    }

    /// Records a request's end under the lock; `true` when the breaker opened.
    fn record_locked(&self, key: &Key, trial: bool, verdict: Verdict) -> bool {
        let mut opened = false;
        let mut map = self.lock();
        match verdict {
            // An upstream that answered is healthy again: forget its failures.
            Verdict::Success => {
                map.remove(key);
            }
            Verdict::Failure => {
                let breaker = map.entry(key.clone()).or_insert(Breaker {
                    failures: 0,
                    phase: Phase::Closed,
                });
                breaker.failures = breaker.failures.saturating_add(1);
                // A request admitted before the breaker opened must not extend its cool-down.
                let opens =
                    trial || (breaker.phase == Phase::Closed && breaker.failures >= self.threshold);
                if opens {
                    opened = true;
                    let now = Instant::now();
                    let until = now
                        .checked_add(self.cooldown)
                        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
                        .unwrap_or(now);
                    breaker.phase = Phase::Open { until };
                    let failures = breaker.failures;
                    let cooldown_ms = u64::try_from(self.cooldown.as_millis()).unwrap_or(u64::MAX);
                    match self.upstream {
                        Upstream::ApiCall => {
                            tracing::warn!(name: "api_call_breaker_open", failures, cooldown_ms, reopened = trial, "api_call_breaker_open");
                        }
                        Upstream::Mcp => {
                            tracing::warn!(name: "mcp_breaker_open", server = %key.1, failures, cooldown_ms, reopened = trial, "mcp_breaker_open");
                        }
                    }
                }
            }
            // The trial ended without telling anything about the upstream: let the next one try.
            Verdict::Neutral => {
                if let Some(breaker) = map.get_mut(key)
                    && trial
                    && breaker.phase
                        == (Phase::HalfOpen {
                            trial_in_flight: true,
                        })
                {
                    breaker.phase = Phase::HalfOpen {
                        trial_in_flight: false,
                    };
                }
            }
        }
        opened
    }

    /// The map; a poisoned lock still holds consistent data (no code panics under it).
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Breaker>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An admitted request; if it is dropped unsettled (the call cancelled it), a half-open trial
/// slot is released so the breaker cannot stay stuck waiting for a result that never comes.
pub(crate) struct Ticket<'a> {
    breakers: &'a Breakers,
    key: Key,
    trial: bool,
    settled: bool,
}

impl Ticket<'_> {
    pub(crate) fn settle(mut self, verdict: Verdict) {
        self.settled = true;
        self.breakers.record(&self.key, self.trial, verdict);
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breakers
                .record(&self.key, self.trial, Verdict::Neutral);
        }
    }
}

/// The message of a request a breaker refused; names the upstream only.
pub(crate) fn paused(until: Option<Instant>) -> String {
    match until {
        Some(until) => {
            let secs = until
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
                .ceil();
            format!("calls to it are paused for {secs} s")
        }
        None => "a trial request is checking whether it is back".to_owned(),
    }
}
