//! Reading a caller's memory: ranked full-text search, the newest observations, a depth-bounded
//! walk along relations, the profile given to the model at call start, and the full listing.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{CallerMemory, MemoryLimits, Observation, Relation, query_words, scope_word};
use crate::{Db, Store, StoreError, WritePool, with_pool};

type ObsRow = (i64, String, String, Option<String>, String);

fn observation((id, entity, content, call_id, created_at): ObsRow) -> Observation {
    Observation {
        id,
        entity,
        content,
        call_id,
        created_at,
        rank: None,
    }
}

/// An entity a traversal reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reached {
    /// Its name.
    pub name: String,
    /// Hops from the start.
    pub depth: u32,
    /// The relation that led here, from the entity before.
    pub via: Relation,
    /// Its newest observations (at most five), newest first.
    pub observations: Vec<String>,
}

/// What a traversal found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Traversal {
    /// The entity it started from, as stored (`None` when the caller has no such entity).
    pub from: Option<String>,
    /// Every entity reached, nearest first.
    pub entities: Vec<Reached>,
    /// True when `max_traverse_entities` stopped the walk early.
    pub truncated: bool,
}

/// What the model is told about a returning caller when a call starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The caller.
    pub caller: String,
    /// The observations given, newest first.
    pub observations: Vec<Observation>,
    /// The same as lines of text for the model's instructions, bounded by `max_profile_chars`.
    pub text: String,
}

const OBS_COLUMNS: &str = "id, entity, content, call_id, created_at";

impl Store {
    /// The caller's observations that best match `query`, best first (at most `limit`, capped by
    /// `max_search_results`). A query without words gives the newest observations.
    pub async fn search_memory(
        &self,
        tenant_id: &str,
        caller: &str,
        query: &str,
        limit: u32,
        limits: &MemoryLimits,
    ) -> Result<Vec<Observation>, StoreError> {
        let limit = i64::from(limit.clamp(1, limits.max_search_results));
        let words = query_words(query);
        if words.is_empty() {
            return self.recent_memory(tenant_id, caller, limit).await;
        }
        let rows: Vec<(i64, String, String, Option<String>, String, f64)> = match &self.db {
            Db::Sqlite(pool) => {
                // The caller's scope word and any of the query's words (stemmed by the index's
                // tokenizer); each word is letters and digits only, quoted as an FTS5 string.
                // CROSS JOIN keeps the full-text match the outer loop: the other order runs the
                // match once per row of the caller (50 ms instead of well under 1 ms).
                let terms: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
                let expr = format!(
                    "scope : \"{}\" AND {{entity content}} : ({})",
                    scope_word(tenant_id, caller),
                    terms.join(" OR ")
                );
                sqlx::query_as(
                    "SELECT o.id, o.entity, o.content, o.call_id, o.created_at, \
                     -bm25(memory_observations_fts, 0.0, 2.0, 1.0) AS rank \
                     FROM memory_observations_fts CROSS JOIN memory_observations o ON o.id = memory_observations_fts.rowid \
                     WHERE memory_observations_fts MATCH $1 AND o.tenant_id = $2 AND o.caller = $3 \
                     ORDER BY rank DESC, o.id DESC LIMIT $4",
                )
                .bind(expr)
                .bind(tenant_id)
                .bind(caller)
                .bind(limit)
                .fetch_all(pool)
                .await?
            }
            Db::Postgres(pool) => {
                let tsquery = words.join(" | ");
                sqlx::query_as(
                    "SELECT id, entity, content, call_id, created_at, \
                     ts_rank(tsv, q)::float8 AS rank \
                     FROM memory_observations, to_tsquery('english'::regconfig, $1) AS q \
                     WHERE tenant_id = $2 AND caller = $3 AND tsv @@ q \
                     ORDER BY rank DESC, id DESC LIMIT $4",
                )
                .bind(tsquery)
                .bind(tenant_id)
                .bind(caller)
                .bind(limit)
                .fetch_all(pool)
                .await?
            }
        };
        Ok(rows
            .into_iter()
            .map(
                |(id, entity, content, call_id, created_at, rank)| Observation {
                    rank: Some(rank),
                    ..observation((id, entity, content, call_id, created_at))
                },
            )
            .collect())
    }

    /// The caller's newest observations, newest first.
    pub async fn recent_memory(
        &self,
        tenant_id: &str,
        caller: &str,
        limit: i64,
    ) -> Result<Vec<Observation>, StoreError> {
        let rows: Vec<ObsRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {OBS_COLUMNS} FROM memory_observations WHERE tenant_id = $1 AND caller = $2 \
                 ORDER BY id DESC LIMIT $3"
            )))
            .bind(tenant_id)
            .bind(caller)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(observation).collect())
    }

    /// The caller's profile for the start of a call: the newest `count` observations (capped by
    /// `max_profile_observations`), as many as fit in `max_profile_chars` of text. `None` for a
    /// caller nothing is remembered about.
    pub async fn caller_profile(
        &self,
        tenant_id: &str,
        caller: &str,
        count: u32,
        limits: &MemoryLimits,
    ) -> Result<Option<Profile>, StoreError> {
        let count = i64::from(count.clamp(1, limits.max_profile_observations));
        let recent = self.recent_memory(tenant_id, caller, count).await?;
        if recent.is_empty() {
            return Ok(None);
        }
        let mut text = String::new();
        let mut observations = Vec::new();
        for o in recent {
            let day = o.created_at.get(..10).unwrap_or(&o.created_at);
            let line = format!("- {}: {} ({day})\n", o.entity, o.content);
            if text.chars().count() + line.chars().count() > limits.max_profile_chars {
                break;
            }
            text.push_str(&line);
            observations.push(o);
        }
        Ok(Some(Profile {
            caller: caller.to_owned(),
            observations,
            text,
        }))
    }

    /// Walks the caller's relations from entity `from` (names compare without case), following
    /// `relation` (or any relation for `*`), up to `depth` hops (capped by
    /// `max_traverse_depth`) and `max_traverse_entities` entities.
    pub async fn traverse_memory(
        &self,
        tenant_id: &str,
        caller: &str,
        from: &str,
        relation: &str,
        depth: u32,
        limits: &MemoryLimits,
    ) -> Result<Traversal, StoreError> {
        let depth = depth.clamp(1, limits.max_traverse_depth);
        // A caller holds at most max_relations_per_caller relations: read them in one query.
        let edges: Vec<(String, String, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT from_entity, relation, to_entity FROM memory_relations \
                 WHERE tenant_id = $1 AND caller = $2 ORDER BY created_at, relation, to_entity",
            )
            .bind(tenant_id)
            .bind(caller)
            .fetch_all(pool)
            .await?
        });
        let entity_names: Vec<(String,)> = with_pool!(self, |pool| {
            sqlx::query_as("SELECT name FROM memory_entities WHERE tenant_id = $1 AND caller = $2")
                .bind(tenant_id)
                .bind(caller)
                .fetch_all(pool)
                .await?
        });
        let from = from.split_whitespace().collect::<Vec<_>>().join(" ");
        let names: Vec<String> = entity_names.into_iter().map(|(n,)| n).collect();
        let start = names
            .iter()
            .find(|n| **n == from)
            .or_else(|| {
                names
                    .iter()
                    .find(|n| n.to_lowercase() == from.to_lowercase())
            })
            .cloned();
        let Some(start) = start else {
            return Ok(Traversal {
                from: None,
                entities: Vec::new(),
                truncated: false,
            });
        };
        let any = relation.trim() == "*";
        let wanted = relation.trim().to_lowercase();
        let mut seen: Vec<String> = vec![start.clone()];
        let mut reached: Vec<Reached> = Vec::new();
        let mut queue = VecDeque::from([(start.clone(), 0u32)]);
        let mut truncated = false;
        'walk: while let Some((at, d)) = queue.pop_front() {
            if d == depth {
                continue;
            }
            for (f, r, t) in edges.iter().filter(|(f, _, _)| *f == at) {
                if !(any || r.to_lowercase() == wanted) || seen.contains(t) {
                    continue;
                }
                if reached.len() == limits.max_traverse_entities {
                    truncated = true;
                    break 'walk;
                }
                seen.push(t.clone());
                reached.push(Reached {
                    name: t.clone(),
                    depth: d + 1,
                    via: Relation {
                        from: f.clone(),
                        relation: r.clone(),
                        to: t.clone(),
                    },
                    observations: Vec::new(),
                });
                queue.push_back((t.clone(), d + 1));
            }
        }
        if !reached.is_empty() {
            let recent = self
                .recent_memory(tenant_id, caller, limits.max_observations_per_caller)
                .await?;
            let mut by_entity: HashMap<&str, Vec<String>> = HashMap::new();
            for o in &recent {
                let list = by_entity.entry(o.entity.as_str()).or_default();
                if list.len() < 5 {
                    list.push(o.content.clone());
                }
            }
            for r in &mut reached {
                r.observations = by_entity.remove(r.name.as_str()).unwrap_or_default();
            }
        }
        Ok(Traversal {
            from: Some(start),
            entities: reached,
            truncated,
        })
    }

    /// Everything remembered about `caller` in the tenant, in one snapshot; `None` when nothing
    /// is. Bounded by the per-caller limits.
    pub async fn caller_memory(
        &self,
        tenant_id: &str,
        caller: &str,
    ) -> Result<Option<CallerMemory>, StoreError> {
        with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let head: Option<(String, String)> = sqlx::query_as(
                "SELECT created_at, updated_at FROM memory_callers WHERE tenant_id = $1 AND caller = $2",
            )
            .bind(tenant_id)
            .bind(caller)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((created_at, updated_at)) = head else {
                return Ok(None);
            };
            let entities: Vec<(String,)> = sqlx::query_as(
                "SELECT name FROM memory_entities WHERE tenant_id = $1 AND caller = $2 ORDER BY created_at, name",
            )
            .bind(tenant_id)
            .bind(caller)
            .fetch_all(&mut *tx)
            .await?;
            let observations: Vec<ObsRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {OBS_COLUMNS} FROM memory_observations WHERE tenant_id = $1 AND caller = $2 ORDER BY id"
            )))
            .bind(tenant_id)
            .bind(caller)
            .fetch_all(&mut *tx)
            .await?;
            let relations: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT from_entity, relation, to_entity FROM memory_relations \
                 WHERE tenant_id = $1 AND caller = $2 ORDER BY created_at, from_entity, relation, to_entity",
            )
            .bind(tenant_id)
            .bind(caller)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(CallerMemory {
                caller: caller.to_owned(),
                entities: entities.into_iter().map(|(n,)| n).collect(),
                observations: observations.into_iter().map(observation).collect(),
                relations: relations
                    .into_iter()
                    .map(|(from, relation, to)| Relation { from, relation, to })
                    .collect(),
                created_at,
                updated_at,
            }))
        })
    }
}
