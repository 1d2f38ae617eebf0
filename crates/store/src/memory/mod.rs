//! Caller memory (the `memory` toolkit): what a tenant's agents remember about each caller, as
//! entities, observations (text, time, the call it came from) and relations between entities.
//!
//! # Layout
//! - this file: the types, the [`MemoryLimits`] and the checks of names and text;
//! - [`write`]: remembering (one transaction, idempotent per effect) and forgetting a caller;
//! - [`read`]: ranked full-text search (SQLite FTS5 bm25, PostgreSQL `tsvector` `ts_rank`),
//!   depth-bounded traversal, the caller's profile and the full listing;
//! - [`handler`]: the runtime's `Memory` effect handler over the store.
//!
//! Every row carries its tenant and caller, and every query names both: another tenant or
//! another caller finds nothing. Counters per tenant and per caller keep each limit check to one
//! indexed row.

mod handler;
mod read;
mod write;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{StoreError, truncate};

pub use handler::MemoryHandler;
pub use read::{Profile, Reached, Traversal};
pub use write::{Forgotten, NewObservation, NewRelation, Remembered};

/// Bounds on what is remembered; each has a clear error when reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Observations kept about one caller.
    pub max_observations_per_caller: i64,
    /// Entities (people, pets, orders, …) kept for one caller.
    pub max_entities_per_caller: i64,
    /// Relations kept for one caller.
    pub max_relations_per_caller: i64,
    /// Observations kept across all of a tenant's callers.
    pub max_observations_per_tenant: i64,
    /// Characters of one observation.
    pub max_content_chars: usize,
    /// Characters of an entity name, a relation name or a caller id.
    pub max_name_chars: usize,
    /// Relations given with one observation.
    pub max_relations_per_write: usize,
    /// Results of one search.
    pub max_search_results: u32,
    /// Hops of one traversal.
    pub max_traverse_depth: u32,
    /// Entities one traversal reaches.
    pub max_traverse_entities: usize,
    /// Observations in a caller's profile at call start.
    pub max_profile_observations: u32,
    /// Characters of a caller's profile text.
    pub max_profile_chars: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_observations_per_caller: 1_000,
            max_entities_per_caller: 200,
            max_relations_per_caller: 500,
            max_observations_per_tenant: 1_000_000,
            max_content_chars: 1_000,
            max_name_chars: 128,
            max_relations_per_write: 10,
            max_search_results: 20,
            max_traverse_depth: 3,
            max_traverse_entities: 50,
            max_profile_observations: 50,
            max_profile_chars: 4_000,
        }
    }
}

/// One thing remembered about an entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Grows with every observation stored.
    pub id: i64,
    /// What it is about (`caller`, `Max the dog`, …).
    pub entity: String,
    /// The text.
    pub content: String,
    /// The call it was remembered in.
    pub call_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// How well it matched a search (higher is better); absent outside searches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<f64>,
}

/// A named link between two of a caller's entities: `from` `relation` `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    /// The entity it starts from.
    pub from: String,
    /// Its name, e.g. `owns` or `married_to`.
    pub relation: String,
    /// The entity it leads to.
    pub to: String,
}

/// Everything remembered about one caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallerMemory {
    /// The caller (`call.from`, else `user.id`).
    pub caller: String,
    /// Entity names, in the order they were first seen.
    pub entities: Vec<String>,
    /// Oldest first.
    pub observations: Vec<Observation>,
    /// In the order they were made.
    pub relations: Vec<Relation>,
    /// RFC 3339: when the first thing was remembered.
    pub created_at: String,
    /// RFC 3339: when the last thing was remembered.
    pub updated_at: String,
}

/// An entity or relation name as stored: trimmed, inner whitespace collapsed, bounded.
pub(crate) fn clean_name(
    kind: &str,
    name: &str,
    limits: &MemoryLimits,
) -> Result<String, StoreError> {
    let cleaned = name.split_whitespace().collect::<Vec<_>>().join(" ");
    if cleaned.is_empty() {
        return Err(StoreError::Invalid(format!(
            "the {kind} is empty; name it (e.g. `caller`)"
        )));
    }
    let chars = cleaned.chars().count();
    if chars > limits.max_name_chars {
        return Err(StoreError::Invalid(format!(
            "the {kind} `{}` has {chars} characters, more than {} (max_name_chars); use a shorter name",
            truncate(&cleaned, 40),
            limits.max_name_chars
        )));
    }
    Ok(cleaned)
}

/// Checks who a memory belongs to: a caller's number or user id, bounded, no control characters.
pub fn check_caller(caller: &str, limits: &MemoryLimits) -> Result<(), StoreError> {
    let chars = caller.chars().count();
    if caller.trim().is_empty()
        || chars > limits.max_name_chars
        || caller.chars().any(char::is_control)
    {
        return Err(StoreError::Invalid(format!(
            "caller `{}` must be 1-{} characters without control characters (the caller's number from `call.from`, or `user.id`)",
            truncate(caller, 40),
            limits.max_name_chars
        )));
    }
    Ok(())
}

/// One word naming a tenant and a caller, so SQLite's full-text index narrows a search to that
/// caller's rows. A hash: the words of one caller say nothing about another's. Public for tools
/// that load rows in bulk (the benchmark).
pub fn scope_word(tenant_id: &str, caller: &str) -> String {
    let mut h = Sha256::new();
    h.update(tenant_id.as_bytes());
    h.update([0]);
    h.update(caller.as_bytes());
    let digest = h.finalize();
    let hex: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    format!("m{hex}")
}

/// The words of a search, lowercased, each once: letters and digits only, so they are safe in
/// both full-text query languages. At most 16 words of at most 64 characters.
pub(crate) fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in query.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let w: String = w.chars().take(64).flat_map(char::to_lowercase).collect();
        if !words.contains(&w) {
            words.push(w);
        }
        if words.len() == 16 {
            break;
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_keep_letters_and_digits_only() {
        assert_eq!(
            query_words("Peanut \"allergy\" OR NEAR(x) * 42nd-street ünïcode peanut"),
            [
                "peanut",
                "allergy",
                "or",
                "near",
                "x",
                "42nd",
                "street",
                "ünïcode"
            ]
        );
        assert!(query_words(" -- \" * ").is_empty());
        assert_eq!(query_words(&"w ".repeat(100)).len(), 1);
    }

    #[test]
    fn scope_words_differ_by_tenant_and_caller() {
        let a = scope_word("acme", "+1555");
        assert_ne!(a, scope_word("acme", "+1556"));
        assert_ne!(a, scope_word("acm", "e+1555"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        let l = MemoryLimits::default();
        assert_eq!(
            clean_name("entity", "  Max   the dog ", &l).unwrap(),
            "Max the dog"
        );
        assert!(clean_name("entity", "   ", &l).is_err());
        let long = "x".repeat(200);
        let e = clean_name("entity", &long, &l).unwrap_err().to_string();
        assert!(e.contains("max_name_chars"), "{e}");
        assert!(check_caller("+1 555\n", &l).is_err());
        assert!(check_caller("+15550100", &l).is_ok());
    }
}
