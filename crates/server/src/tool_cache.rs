//! Compiled tools by (tenant, name, version), bounded by an estimate of the bytes they hold.
//!
//! A version never changes, so it is compiled once and kept while it is used; the least
//! recently used versions are evicted when the estimated total passes the bound, and a version
//! evicted (or never admitted: larger than the whole bound) is compiled again on its next use.

use std::sync::Arc;

use moka::policy::EvictionPolicy;
use switchboard_core::Tool;

/// Bytes a compiled tool is assumed to hold per byte of its definition's JSON text.
///
/// A compiled [`Tool`] keeps its source definition as a `serde_json::Value` (several times the
/// text: every string, map and array is its own allocation, maps keep their order), plus its
/// description, parameters, compiled templates, two function definitions (plain and strict JSON
/// Schema) and the compiled argument validator. The figure that called for this bound, 300
/// large versions growing the process by about 4.7 GB, is about 16 MB per version: about 15
/// bytes per definition byte if those definitions were near the 1 MiB body limit. 16 is that,
/// rounded up: an estimate, so the bound is approximate; it errs towards holding less.
pub const BYTES_PER_DEFINITION_BYTE: u64 = 16;

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

    /// The estimated bytes of a compiled tool whose definition's JSON text is `definition_bytes`
    /// long, with its key.
    pub fn estimate(tenant: &str, name: &str, definition_bytes: usize) -> u64 {
        let text = u64::try_from(definition_bytes).unwrap_or(u64::MAX);
        let key = u64::try_from(tenant.len() + name.len()).unwrap_or(u64::MAX);
        text.saturating_mul(BYTES_PER_DEFINITION_BYTE)
            .saturating_add(key)
            .saturating_add(ENTRY_OVERHEAD)
    }

    pub fn get(&self, tenant: &str, name: &str, version: i64) -> Option<Arc<Tool>> {
        self.tools
            .get(&(tenant.to_owned(), name.to_owned(), version))
            .map(|c| c.tool)
    }

    /// Keeps a compiled version; `definition_bytes` is the length of its definition's JSON text.
    /// A tool estimated larger than the whole bound is not kept (it is compiled on each use).
    pub fn put(
        &self,
        tenant: &str,
        name: &str,
        version: i64,
        definition_bytes: usize,
        tool: Arc<Tool>,
    ) {
        let estimate = Self::estimate(tenant, name, definition_bytes);
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
