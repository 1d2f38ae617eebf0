//! Compiled tools by (tenant, name, version), bounded by an estimate of the bytes they hold.
//!
//! A version never changes, so it is compiled once and kept while it is used; the least
//! recently used versions are evicted when the estimated total passes the bound, and a version
//! evicted (or never admitted: larger than the whole bound) is compiled again on its next use.
//! Each is weighed by [`Tool::heap_bytes`], core's estimate of what a compiled tool holds,
//! which a heap profiler checks against each shape of tool (a template the engine compiles
//! weighs about 10 KB however short: a tool of a thousand of them, ten megabytes).

use std::sync::Arc;

use moka::policy::EvictionPolicy;
use switchboard_core::Tool;

/// A fixed cost per entry (the key, the `Arc`, the cache's own bookkeeping).
const ENTRY_OVERHEAD: u64 = 256;

type Key = (String, String, i64);

#[derive(Clone)]
struct Cached {
    tool: Arc<Tool>,
    weight: u32,
}

/// The compiled-tool cache (see the module docs).
pub struct ToolCache {
    tools: moka::sync::Cache<Key, Cached>,
    max_bytes: u64,
}

impl std::fmt::Debug for ToolCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCache")
            .field("max_bytes", &self.max_bytes)
            .field("entries", &self.tools.entry_count())
            .field("weighted_bytes", &self.tools.weighted_size())
            .finish()
    }
}

impl ToolCache {
    /// The default bound: 64 MiB of estimated compiled tools.
    pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

    /// A cache holding at most `max_bytes` of estimated compiled tools, least recently used
    /// evicted first.
    pub fn new(max_bytes: u64) -> Self {
        let tools = moka::sync::Cache::builder()
            .max_capacity(max_bytes)
            .eviction_policy(EvictionPolicy::lru())
            .weigher(|_: &Key, v: &Cached| v.weight)
            .build();
        ToolCache { tools, max_bytes }
    }

    /// What keeping `tool` under this tenant and name weighs: the tool's heap estimate and
    /// the entry's own.
    pub fn weight(tenant: &str, name: &str, tool: &Tool) -> u64 {
        let key = (tenant.len() + name.len()) as u64;
        tool.heap_bytes()
            .saturating_add(key)
            .saturating_add(ENTRY_OVERHEAD)
    }

    pub fn get(&self, tenant: &str, name: &str, version: i64) -> Option<Arc<Tool>> {
        self.tools
            .get(&(tenant.to_owned(), name.to_owned(), version))
            .map(|c| c.tool)
    }

    /// Keeps a compiled version, weighed by what it holds. A tool estimated larger than the
    /// whole bound is not kept (it is compiled on each use).
    pub fn put(&self, tenant: &str, name: &str, version: i64, tool: Arc<Tool>) {
        let estimate = Self::weight(tenant, name, &tool);
        if estimate > self.max_bytes {
            return;
        }
        let weight = u32::try_from(estimate).unwrap_or(u32::MAX);
        self.tools.insert(
            (tenant.to_owned(), name.to_owned(), version),
            Cached { tool, weight },
        );
        // moka evicts in its maintenance, which otherwise runs only now and then: versions
        // compiled in a row stayed held past the bound (seven of ~11 MB under a 32 MiB bound,
        // and 4× the bound in RSS for a server compiling versions one after another). A put
        // follows a compile, so the cost is nothing beside it.
        self.tools.run_pending_tasks();
    }

    /// The configured bound, in estimated bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The estimated bytes held now, after pending evictions are applied.
    pub fn weighted_bytes(&self) -> u64 {
        self.tools.run_pending_tasks();
        self.tools.weighted_size()
    }

    /// Versions held now, after pending evictions are applied.
    pub fn entries(&self) -> u64 {
        self.tools.run_pending_tasks();
        self.tools.entry_count()
    }
}

impl Default for ToolCache {
    fn default() -> Self {
        ToolCache::new(Self::DEFAULT_MAX_BYTES)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Map, Value, json};
    use switchboard_core::Limits;

    use super::*;

    /// A version of a tool whose body has `holes` templates the engine compiles.
    fn engine_heavy(version: usize, holes: usize) -> Arc<Tool> {
        let body: Map<String, Value> = (0..holes)
            .map(|i| {
                (
                    format!("f{i}"),
                    json!(format!(
                        "{{{{ params.text | replace('a', 'v{version}-{i}') }}}}"
                    )),
                )
            })
            .collect();
        let def = json!({"name": "big", "description": "d",
            "parameters": [{"name": "text", "type": "string"}],
            "actions": [{"type": "api_call", "url": "https://example.com/x", "body": body}]});
        Arc::new(Tool::parse(&def, &Limits::default()).unwrap())
    }

    /// Versions whose definitions are small but whose compiled templates are not are weighed
    /// by what they hold: the cache keeps as many as fit in its bound, not one per definition
    /// kilobyte, and never more than fit, even for a moment.
    #[test]
    fn tools_are_weighed_by_what_they_hold_compiled() {
        let bound = 32 * 1024 * 1024;
        let cache = ToolCache::new(bound);
        let mut weights = Vec::new();
        for v in 1..=12 {
            let tool = engine_heavy(v, 900);
            weights.push(ToolCache::weight("acme", "big", &tool));
            cache.put("acme", "big", v as i64, tool);
            // Counted entry by entry, as held this moment (not after pending evictions).
            let held: u64 = cache.tools.iter().map(|(_, c)| u64::from(c.weight)).sum();
            assert!(held <= bound, "{held} bytes held: {cache:?}");
            assert!(cache.weighted_bytes() <= bound, "{cache:?}");
        }
        let (least, most) = (
            *weights.iter().min().unwrap(),
            *weights.iter().max().unwrap(),
        );
        assert!(cache.entries() <= bound / least, "{cache:?}, each {least}");
        assert!(cache.entries() >= 1, "{cache:?}");
        // What the kept versions hold at the least (their compiled expressions alone, as
        // measured in core's `compiled_size` test) is within the bound.
        let floor = 900 * switchboard_core::compiled_size::ENGINE_EXPR_BYTES;
        assert!(cache.entries() * floor <= bound, "{cache:?}");
        let held = cache.weighted_bytes();
        assert!(
            (cache.entries() * least..=cache.entries() * most).contains(&held),
            "{cache:?}"
        );
    }
}
