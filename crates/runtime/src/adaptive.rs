//! The adaptive policy: what each tool has been seen to take, and what the runtime does with
//! it before a caller hears silence.
//!
//! - [`LatencyBook`]: per tenant and tool, the newest [`WINDOW`] latencies of its runs on this
//!   node and their p95, beside the cluster's figures (which the server stores and reads back
//!   at a low rate, so they survive restarts and reach every node).
//! - [`decide`]: for one function call, from the tool's expected latency and the agent's turn
//!   budget: when the filler is said (at once for a tool expected to outlast the budget), whether
//!   a `"async": "when_slow"` tool runs in the background, and the tool's deadline when its
//!   author set none. The [`Policy`] is kept on the invocation's record, so an operator sees why
//!   a caller heard a filler.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchboard_core::Tool;
use switchboard_core::tool::DEFAULT_TIMEOUT_S;

use crate::executor::CallConfig;

/// Latencies kept per tool on a node: its p95 follows the newest runs.
pub const WINDOW: usize = 64;
/// Runs seen before a p95 is trusted (here or across the cluster).
pub const MIN_SAMPLES: u32 = 5;
/// Tools (tenant and name) a node keeps figures for; past it, the one run least recently goes.
pub const MAX_TOOLS: usize = 10_000;
/// The shortest deadline the policy gives a tool without `timeout`.
pub const MIN_OBSERVED_TIMEOUT_MS: u64 = 3_000;
/// A tool without `timeout` gets this many times its p95, plus a second, up to the default.
pub const TIMEOUT_FACTOR: u64 = 4;

/// A tool's latency as observed: its p95 over its newest runs, and how many runs that covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub p95_ms: u32,
    pub samples: u32,
}

struct Samples {
    ring: Vec<u32>,
    next: usize,
    p95_ms: u32,
    /// Changed since the server last took this node's figures ([`LatencyBook::changed`]).
    dirty: bool,
    last: Instant,
}

impl Samples {
    fn push(&mut self, ms: u32) {
        if self.ring.len() < WINDOW {
            self.ring.push(ms);
        } else {
            self.ring[self.next] = ms;
        }
        self.next = (self.next + 1) % WINDOW;
        let mut sorted = self.ring.clone();
        sorted.sort_unstable();
        self.p95_ms = percentile(&sorted, 95);
        self.dirty = true;
        self.last = Instant::now();
    }

    fn observed(&self) -> Observed {
        Observed {
            p95_ms: self.p95_ms,
            samples: u32::try_from(self.ring.len()).unwrap_or(u32::MAX),
        }
    }
}

/// The nearest-rank percentile `p` of sorted values (0 when there are none).
fn percentile(sorted: &[u32], p: usize) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

type Key = (String, String);

/// Every tool's observed latency on this node and across the cluster. One per node, shared by
/// all its calls.
#[derive(Default)]
pub struct LatencyBook {
    local: Mutex<HashMap<Key, Samples>>,
    cluster: RwLock<HashMap<Key, Observed>>,
    /// Turned off ([`LatencyBook::off`]): it notes nothing and expects nothing, so every call
    /// follows its tools' static settings.
    off: bool,
}

impl std::fmt::Debug for LatencyBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyBook").finish_non_exhaustive()
    }
}

impl LatencyBook {
    /// A book that never learns: the adaptive policy turned off (`serve --no-adaptive`).
    pub fn off() -> LatencyBook {
        LatencyBook {
            off: true,
            ..LatencyBook::default()
        }
    }

    /// Notes one run of `tool` that took `elapsed`.
    pub fn observe(&self, tenant: &str, tool: &str, elapsed: Duration) {
        if self.off {
            return;
        }
        let ms = u32::try_from(elapsed.as_millis()).unwrap_or(u32::MAX);
        let Ok(mut local) = self.local.lock() else {
            return;
        };
        let key = (tenant.to_owned(), tool.to_owned());
        if !local.contains_key(&key) && local.len() >= MAX_TOOLS {
            let oldest = local
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                local.remove(&k);
            }
        }
        local
            .entry(key)
            .or_insert_with(|| Samples {
                ring: Vec::with_capacity(WINDOW),
                next: 0,
                p95_ms: 0,
                dirty: false,
                last: Instant::now(),
            })
            .push(ms);
    }

    /// What `tool` is expected to take: this node's p95 once it has seen [`MIN_SAMPLES`] runs,
    /// else the cluster's, else nothing.
    pub fn expected(&self, tenant: &str, tool: &str) -> Option<Observed> {
        if self.off {
            return None;
        }
        let key = (tenant.to_owned(), tool.to_owned());
        let here = self
            .local
            .lock()
            .ok()
            .and_then(|l| l.get(&key).map(Samples::observed))
            .filter(|o| o.samples >= MIN_SAMPLES);
        here.or_else(|| {
            self.cluster
                .read()
                .ok()
                .and_then(|c| c.get(&key).copied())
                .filter(|o| o.samples >= MIN_SAMPLES)
        })
    }

    /// This node's figures that changed since the last time they were taken, to be stored.
    pub fn changed(&self) -> Vec<(String, String, Observed)> {
        let Ok(mut local) = self.local.lock() else {
            return Vec::new();
        };
        local
            .iter_mut()
            .filter(|(_, s)| s.dirty)
            .map(|((tenant, tool), s)| {
                s.dirty = false;
                (tenant.clone(), tool.clone(), s.observed())
            })
            .collect()
    }

    /// Marks figures taken by [`LatencyBook::changed`] as changed again (their store failed),
    /// so the next round stores them — unless the tool has left the book meanwhile.
    pub fn unsaved(&self, figures: &[(String, String)]) {
        let Ok(mut local) = self.local.lock() else {
            return;
        };
        for key in figures {
            if let Some(s) = local.get_mut(key) {
                s.dirty = true;
            }
        }
    }

    /// Replaces the cluster's figures with `rows` (as stored by every node), keeping at most
    /// [`MAX_TOOLS`].
    pub fn set_cluster(&self, rows: impl IntoIterator<Item = (String, String, Observed)>) {
        let fresh: HashMap<Key, Observed> = rows
            .into_iter()
            .take(MAX_TOOLS)
            .map(|(tenant, tool, o)| ((tenant, tool), o))
            .collect();
        if let Ok(mut cluster) = self.cluster.write() {
            *cluster = fresh;
        }
    }
}

/// Which filler the policy chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FillerSource {
    /// The tool's own `messages.delayed`.
    Tool,
    /// The agent's `filler`, for a tool without `messages.delayed`.
    Agent,
}

/// Where the run's deadline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutSource {
    /// The tool's own `timeout`.
    Tool,
    /// The tool's observed p95 (its author set no `timeout`).
    Observed,
    /// The default (no `timeout`, not enough runs seen).
    Default,
}

/// What the policy decided for one function call, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The tool's observed p95 when the call came, if enough runs had been seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_ms: Option<u32>,
    /// The agent's turn budget.
    pub budget_ms: u32,
    /// The tool was expected to outlast the budget.
    pub slow: bool,
    /// The filler chosen, if any, and when it was due (milliseconds after the function call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filler: Option<FillerSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filler_after_ms: Option<u64>,
    /// Answered "started" at once and run in the background (`"async": "when_slow"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// The run's deadline and where it came from.
    pub timeout_ms: u64,
    pub timeout_from: TimeoutSource,
}

impl Policy {
    /// The filler to say for this call (the text), following the decision.
    pub fn filler_text<'a>(
        &self,
        config: &'a CallConfig,
        agent: &str,
        tool: &'a Tool,
    ) -> Option<&'a str> {
        match self.filler? {
            FillerSource::Tool => tool.messages().delayed.as_deref(),
            FillerSource::Agent => config.fillers.get(agent).map(String::as_str),
        }
    }

    /// What was decided, in words for an operator: e.g. "expected 2.6 s, over the 0.7 s turn
    /// budget: the tool's filler at once · deadline 11.4 s from its latency".
    pub fn describe(&self) -> String {
        let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
        let mut parts = Vec::new();
        let budget = secs(u64::from(self.budget_ms));
        parts.push(match self.expected_ms {
            Some(e) if self.slow => format!(
                "expected {}, over the {budget} turn budget",
                secs(u64::from(e))
            ),
            Some(e) => format!(
                "expected {}, within the {budget} turn budget",
                secs(u64::from(e))
            ),
            None => "latency not known yet".to_owned(),
        });
        if self.background {
            parts.push("answered \"started\" and run in the background".to_owned());
        }
        if let (Some(source), Some(after)) = (self.filler, self.filler_after_ms) {
            let whose = match source {
                FillerSource::Tool => "the tool's filler",
                FillerSource::Agent => "the agent's filler",
            };
            parts.push(if after == 0 {
                format!("{whose} at once")
            } else {
                format!("{whose} after {}", secs(after))
            });
        }
        parts.push(match self.timeout_from {
            TimeoutSource::Tool => format!("deadline {} (the tool's)", secs(self.timeout_ms)),
            TimeoutSource::Observed => {
                format!("deadline {} from its latency", secs(self.timeout_ms))
            }
            TimeoutSource::Default => format!("deadline {} (default)", secs(self.timeout_ms)),
        });
        parts.join(" · ")
    }

    /// When the filler is due, if one was chosen.
    pub fn filler_after(&self) -> Option<Duration> {
        self.filler?;
        self.filler_after_ms.map(Duration::from_millis)
    }
}

/// The policy for a call of `tool` on `agent` now.
pub fn decide(config: &CallConfig, agent: &str, tool: &Tool) -> Policy {
    let expected = config.latency.expected(&config.tenant_id, tool.name());
    let budget = config.turn_budget(agent);
    let budget_ms = u32::try_from(budget.as_millis()).unwrap_or(u32::MAX);
    let slow = expected.is_some_and(|o| o.p95_ms > budget_ms);
    let background = slow && tool.is_async_when_slow();
    let (filler, filler_after_ms) = if background || tool.is_async() {
        // Answered "started" at once: there is no silence to fill.
        (None, None)
    } else if tool.messages().delayed.is_some() {
        let after = if slow {
            0
        } else {
            tool.messages().delayed_after_ms
        };
        (Some(FillerSource::Tool), Some(after))
    } else if config.fillers.contains_key(agent) {
        let after = if slow { 0 } else { u64::from(budget_ms) };
        (Some(FillerSource::Agent), Some(after))
    } else {
        (None, None)
    };
    let (timeout_ms, timeout_from) = timeout(tool, expected);
    Policy {
        expected_ms: expected.map(|o| o.p95_ms),
        budget_ms,
        slow,
        filler,
        filler_after_ms,
        background,
        timeout_ms,
        timeout_from,
    }
}

/// The deadline of a run of `tool`: its own `timeout`; without one, [`TIMEOUT_FACTOR`] times its
/// observed p95 plus a second, between [`MIN_OBSERVED_TIMEOUT_MS`] and the default; else the
/// default.
pub fn timeout(tool: &Tool, expected: Option<Observed>) -> (u64, TimeoutSource) {
    if tool.timeout_declared() {
        return (tool.timeout_ms(), TimeoutSource::Tool);
    }
    let default_ms = (DEFAULT_TIMEOUT_S * 1000.0) as u64;
    match expected {
        Some(o) => {
            let ms = u64::from(o.p95_ms)
                .saturating_mul(TIMEOUT_FACTOR)
                .saturating_add(1000)
                .clamp(MIN_OBSERVED_TIMEOUT_MS, default_ms.min(tool.timeout_ms()));
            (ms, TimeoutSource::Observed)
        }
        None => (tool.timeout_ms(), TimeoutSource::Default),
    }
}

/// The deadline of a run of `tool` on `config`'s call now (see [`timeout`]).
pub fn run_timeout(config: &CallConfig, tool: &Tool) -> Duration {
    let expected = config.latency.expected(&config.tenant_id, tool.name());
    Duration::from_millis(timeout(tool, expected).0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;
    use switchboard_core::Limits;

    use super::*;

    fn tool(def: serde_json::Value) -> Tool {
        Tool::parse(&def, &Limits::default()).unwrap()
    }

    fn lookup(extra: serde_json::Value) -> Tool {
        let mut def = json!({
            "name": "lookup",
            "description": "Looks an order up.",
            "parameters": [],
            "actions": [{"type": "api_call", "method": "GET", "url": "https://api.example.com/orders"}],
        });
        for (k, v) in extra.as_object().unwrap() {
            def[k] = v.clone();
        }
        tool(def)
    }

    fn config() -> CallConfig {
        CallConfig {
            tenant_id: "acme".into(),
            latency: Arc::new(LatencyBook::default()),
            ..Default::default()
        }
    }

    fn seen(config: &CallConfig, ms: u64, runs: usize) {
        for _ in 0..runs {
            config
                .latency
                .observe("acme", "lookup", Duration::from_millis(ms));
        }
    }

    #[test]
    fn p95_is_the_nearest_rank_over_the_newest_runs() {
        let book = LatencyBook::default();
        for ms in 1..=100u64 {
            book.observe("t", "x", Duration::from_millis(ms));
        }
        // The newest 64 runs are 37..=100 ms: their 95th percentile by rank is the 61st.
        assert_eq!(
            book.expected("t", "x"),
            Some(Observed {
                p95_ms: 97,
                samples: 64
            })
        );
        assert_eq!(book.expected("t", "y"), None);
        assert_eq!(book.expected("other", "x"), None);
    }

    #[test]
    fn too_few_runs_are_not_trusted_and_the_cluster_fills_in() {
        let book = LatencyBook::default();
        for _ in 0..(MIN_SAMPLES - 1) {
            book.observe("t", "x", Duration::from_millis(900));
        }
        assert_eq!(book.expected("t", "x"), None);
        let from_cluster = Observed {
            p95_ms: 1200,
            samples: 40,
        };
        book.set_cluster([("t".to_owned(), "x".to_owned(), from_cluster)]);
        assert_eq!(book.expected("t", "x"), Some(from_cluster));
        book.observe("t", "x", Duration::from_millis(900));
        assert_eq!(book.expected("t", "x").unwrap().p95_ms, 900);
    }

    #[test]
    fn a_book_turned_off_learns_nothing() {
        let book = LatencyBook::off();
        for _ in 0..10 {
            book.observe("t", "x", Duration::from_millis(900));
        }
        book.set_cluster([(
            "t".to_owned(),
            "x".to_owned(),
            Observed {
                p95_ms: 900,
                samples: 40,
            },
        )]);
        assert_eq!(book.expected("t", "x"), None);
        assert!(book.changed().is_empty());
    }

    #[test]
    fn changed_figures_are_taken_once() {
        let book = LatencyBook::default();
        book.observe("t", "x", Duration::from_millis(10));
        assert_eq!(book.changed().len(), 1);
        assert!(book.changed().is_empty());
        book.observe("t", "x", Duration::from_millis(10));
        assert_eq!(book.changed().len(), 1);
    }

    #[test]
    fn the_book_is_bounded() {
        let book = LatencyBook::default();
        for i in 0..(MAX_TOOLS + 10) {
            book.observe("t", &format!("tool{i}"), Duration::from_millis(1));
        }
        assert_eq!(book.local.lock().unwrap().len(), MAX_TOOLS);
    }

    #[test]
    fn a_slow_tool_gets_its_filler_at_once() {
        let config = config();
        let t = lookup(json!({"messages": {"delayed": "Still looking."}}));
        let unknown = decide(&config, "main", &t);
        assert!(!unknown.slow);
        assert_eq!(unknown.filler, Some(FillerSource::Tool));
        assert_eq!(unknown.filler_after_ms, Some(1500));
        seen(&config, 1200, 10);
        let p = decide(&config, "main", &t);
        assert!(p.slow);
        assert_eq!(p.expected_ms, Some(1200));
        assert_eq!(p.budget_ms, 700);
        assert_eq!(p.filler_after_ms, Some(0));
        assert_eq!(p.filler_text(&config, "main", &t), Some("Still looking."));
        assert_eq!(
            p.describe(),
            "expected 1.2 s, over the 0.7 s turn budget · the tool's filler at once · deadline 5.8 s from its latency"
        );
    }

    #[test]
    fn a_tool_without_messages_gets_the_agents_filler_within_the_budget() {
        let mut config = config();
        let t = lookup(json!({}));
        assert_eq!(decide(&config, "main", &t).filler, None);
        config
            .fillers
            .insert("main".into(), "One moment, please.".into());
        let p = decide(&config, "main", &t);
        assert_eq!(p.filler, Some(FillerSource::Agent));
        assert_eq!(p.filler_after_ms, Some(700));
        assert_eq!(
            p.filler_text(&config, "main", &t),
            Some("One moment, please.")
        );
        seen(&config, 3000, 10);
        assert_eq!(decide(&config, "main", &t).filler_after_ms, Some(0));
    }

    #[test]
    fn when_slow_tools_run_in_the_background_only_when_slow() {
        let config = config();
        let t = lookup(json!({"async": "when_slow", "messages": {"delayed": "Still looking."}}));
        seen(&config, 200, 10);
        assert!(!decide(&config, "main", &t).background);
        seen(&config, 2000, 64);
        let p = decide(&config, "main", &t);
        assert!(p.background);
        assert_eq!(p.filler, None, "an answer at once needs no filler");
    }

    #[test]
    fn the_deadline_follows_the_observed_latency_within_bounds() {
        let config = config();
        let t = lookup(json!({}));
        assert_eq!(
            decide(&config, "main", &t).timeout_from,
            TimeoutSource::Default
        );
        seen(&config, 100, 10);
        let p = decide(&config, "main", &t);
        assert_eq!(
            (p.timeout_ms, p.timeout_from),
            (MIN_OBSERVED_TIMEOUT_MS, TimeoutSource::Observed)
        );
        seen(&config, 2000, 64);
        assert_eq!(decide(&config, "main", &t).timeout_ms, 9000);
        seen(&config, 9000, 64);
        assert_eq!(decide(&config, "main", &t).timeout_ms, 20_000);
        let declared = lookup(json!({"timeout": 2}));
        let p = decide(&config, "main", &declared);
        assert_eq!((p.timeout_ms, p.timeout_from), (2000, TimeoutSource::Tool));
    }

    #[test]
    fn when_slow_is_refused_on_terminal_tools_and_bad_values_are_named() {
        let bad = Tool::parse(
            &json!({"name": "x", "description": "d", "parameters": [],
                    "actions": [{"type": "end_call"}], "async": "sometimes"}),
            &Limits::default(),
        )
        .unwrap_err();
        let text = format!("{bad:?}");
        assert!(text.contains("/async"), "{text}");
        assert!(text.contains("when_slow"), "{text}");
        let terminal = Tool::parse(
            &json!({"name": "x", "description": "d", "parameters": [],
                    "actions": [{"type": "end_call"}], "async": "when_slow"}),
            &Limits::default(),
        )
        .unwrap_err();
        assert!(format!("{terminal:?}").contains("cannot be async"));
    }
}
