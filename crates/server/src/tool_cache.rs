//! Compiled tools by (tenant, name, version), bounded by an estimate of the bytes they hold.
//!
//! A version never changes, so it is compiled once and kept while it is used; the least
//! recently used versions are evicted when the estimated total passes the bound, and a version
//! evicted (or never admitted: larger than the whole bound) is compiled again on its next use.

use std::sync::Arc;

use moka::policy::EvictionPolicy;
use serde_json::Value;
use switchboard_core::Tool;

/// What a compiled tool is assumed to hold, from its definition: `TEXT_FACTOR` bytes per byte
/// of text (strings and keys) plus `NODE_BYTES` per JSON value.
///
/// A compiled [`Tool`] keeps its source definition as a `serde_json::Value`, plus its
/// description, parameters, compiled templates, two function definitions (plain and strict JSON
/// Schema) and the compiled argument validator: each string is held several times over, and
/// each small value (an `enum` entry, a parameter field) costs several allocations in each copy.
/// Measured as the growth of the process's resident memory while compiling 40 definitions:
/// text-heavy ones (a 200 KB description) about 5 bytes per definition byte; structure-heavy
/// ones (60 parameters of 30 `enum` values, 60 actions: ~2,500 values in 33 KB) 25 to 50 bytes
/// per definition byte, i.e. some 300 to 700 bytes per value. The constants cover both, rounded
/// up: the bound is an estimate, and it errs towards holding less than configured.
pub const TEXT_FACTOR: u64 = 8;
/// See [`TEXT_FACTOR`].
pub const NODE_BYTES: u64 = 400;

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

    /// The estimated bytes of the compiled tool of `definition`, with its key (see
    /// [`TEXT_FACTOR`]).
    pub fn estimate(tenant: &str, name: &str, definition: &Value) -> u64 {
        let (mut text, mut nodes) = (0u64, 0u64);
        let mut stack = vec![definition];
        while let Some(v) = stack.pop() {
            nodes += 1;
            match v {
                Value::String(s) => text += s.len() as u64,
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    for (k, item) in map {
                        text += k.len() as u64;
                        stack.push(item);
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        let key = (tenant.len() + name.len()) as u64;
        text.saturating_mul(TEXT_FACTOR)
            .saturating_add(nodes.saturating_mul(NODE_BYTES))
            .saturating_add(key)
            .saturating_add(ENTRY_OVERHEAD)
    }

    pub fn get(&self, tenant: &str, name: &str, version: i64) -> Option<Arc<Tool>> {
        self.tools
            .get(&(tenant.to_owned(), name.to_owned(), version))
            .map(|c| c.tool)
    }

    /// Keeps a compiled version, weighed by its definition. A tool estimated larger than the
    /// whole bound is not kept (it is compiled on each use).
    pub fn put(&self, tenant: &str, name: &str, version: i64, definition: &Value, tool: Arc<Tool>) {
        let estimate = Self::estimate(tenant, name, definition);
        if estimate > self.max_bytes {
            return;
        }
        let weight = u32::try_from(estimate).unwrap_or(u32::MAX);
        self.tools.insert(
            (tenant.to_owned(), name.to_owned(), version),
            Cached { tool, weight },
        );
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
