//! Remembering and forgetting. One observation, its entity and its relations are stored in one
//! transaction with the counters, so a limit is never passed and a failure leaves nothing.

use serde::{Deserialize, Serialize};

use super::{MemoryLimits, check_caller, clean_name, scope_word};
use crate::error::{is_fk_violation, is_unique_violation};
use crate::{Backend, Store, StoreError, WritePool, now, truncate, with_pool};

/// A relation given with a new observation: its entity `relation` `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRelation {
    /// e.g. `owns`.
    pub relation: String,
    /// The entity it leads to, e.g. `Max`.
    pub to: String,
}

/// What storing an observation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    /// The observation's id.
    pub id: i64,
    /// The entity it is about, as stored.
    pub entity: String,
    /// False when this effect had stored it before (same idempotency key).
    pub created: bool,
}

/// What forgetting a caller removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Forgotten {
    /// Observations removed.
    pub observations: i64,
    /// Entities removed.
    pub entities: i64,
    /// Relations removed.
    pub relations: i64,
}

/// One observation to store.
#[derive(Debug, Clone)]
pub struct NewObservation<'a> {
    /// What it is about.
    pub entity: &'a str,
    /// The text.
    pub content: &'a str,
    /// Links from `entity` to other entities.
    pub relations: &'a [NewRelation],
    /// The call it comes from.
    pub call_id: Option<&'a str>,
    /// The effect's key: the same key stores once.
    pub idempotency_key: &'a str,
}

/// A checked observation, ready for the database.
struct Checked {
    entity: String,
    content: String,
    relations: Vec<(String, String)>,
    /// `entity` and every relation target, each once.
    entities: Vec<String>,
}

fn check(new: &NewObservation<'_>, limits: &MemoryLimits) -> Result<Checked, StoreError> {
    let entity = clean_name("entity", new.entity, limits)?;
    let content = new.content.trim();
    if content.is_empty() {
        return Err(StoreError::Invalid(
            "the content is empty; say what to remember".to_owned(),
        ));
    }
    let chars = content.chars().count();
    if chars > limits.max_content_chars {
        return Err(StoreError::Invalid(format!(
            "the content has {chars} characters, more than {} (max_content_chars); remember one short fact at a time",
            limits.max_content_chars
        )));
    }
    if new.relations.len() > limits.max_relations_per_write {
        return Err(StoreError::Invalid(format!(
            "{} relations were given with one observation, more than {} (max_relations_per_write); give fewer",
            new.relations.len(),
            limits.max_relations_per_write
        )));
    }
    let mut relations = Vec::new();
    let mut entities = vec![entity.clone()];
    for r in new.relations {
        let relation = clean_name("relation", &r.relation, limits)?;
        let to = clean_name("relation target", &r.to, limits)?;
        if !entities.contains(&to) {
            entities.push(to.clone());
        }
        if !relations.contains(&(relation.clone(), to.clone())) {
            relations.push((relation, to));
        }
    }
    Ok(Checked {
        entity,
        content: content.to_owned(),
        relations,
        entities,
    })
}

/// The error when a counter would pass its limit: which limit, and how to make room.
fn full(what: &str, have: i64, max: i64, limit: &str, whose: &str) -> StoreError {
    let raise = match limit {
        "max_observations_per_caller" | "max_observations_per_tenant" => {
            format!(", or raise it (serve --memory-{})", limit.replace('_', "-"))
        }
        _ => String::new(),
    };
    StoreError::Conflict(format!(
        "memory is full: {whose} already holds {have} {what}, the most allowed ({limit} = {max}); \
         delete a caller's memory with DELETE /v1/memory/callers/{{caller}}{raise}"
    ))
}

/// Deleting a caller's rows, children first: SQLite's full-text index is kept by a trigger on
/// each observation deleted.
const FORGET: [&str; 4] = [
    "DELETE FROM memory_relations WHERE tenant_id = $1 AND caller = $2",
    "DELETE FROM memory_observations WHERE tenant_id = $1 AND caller = $2",
    "DELETE FROM memory_entities WHERE tenant_id = $1 AND caller = $2",
    "DELETE FROM memory_callers WHERE tenant_id = $1 AND caller = $2",
];

impl Store {
    /// Stores one observation about `caller` (with its entity and relations). The same
    /// `idempotency_key` stores it once: a retried effect gets the first answer back.
    pub async fn remember(
        &self,
        tenant_id: &str,
        caller: &str,
        new: &NewObservation<'_>,
        limits: &MemoryLimits,
    ) -> Result<Remembered, StoreError> {
        check_caller(caller, limits)?;
        let c = check(new, limits)?;
        match self.remember_once(tenant_id, caller, new, &c, limits).await {
            // Another run with the same key committed first: its observation is the answer.
            Err(StoreError::Database(e)) if is_unique_violation(&e) => self
                .remembered_before(tenant_id, new.idempotency_key)
                .await?
                .ok_or(StoreError::Database(e)),
            Err(StoreError::Database(e)) if is_fk_violation(&e) => Err(StoreError::NotFound(
                format!("tenant `{}`", truncate(tenant_id, 64)),
            )),
            other => other,
        }
    }

    async fn remembered_before(
        &self,
        tenant_id: &str,
        key: &str,
    ) -> Result<Option<Remembered>, StoreError> {
        let row: Option<(i64, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, entity FROM memory_observations WHERE tenant_id = $1 AND idempotency_key = $2",
            )
            .bind(tenant_id)
            .bind(key)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(id, entity)| Remembered {
            id,
            entity,
            created: false,
        }))
    }

    async fn remember_once(
        &self,
        tenant_id: &str,
        caller: &str,
        new: &NewObservation<'_>,
        c: &Checked,
        limits: &MemoryLimits,
    ) -> Result<Remembered, StoreError> {
        let at = now();
        let scope = scope_word(tenant_id, caller);
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            let before: Option<(i64, String)> = sqlx::query_as(
                "SELECT id, entity FROM memory_observations WHERE tenant_id = $1 AND idempotency_key = $2",
            )
            .bind(tenant_id)
            .bind(new.idempotency_key)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((id, entity)) = before {
                return Ok(Remembered {
                    id,
                    entity,
                    created: false,
                });
            }
            sqlx::query(
                "INSERT INTO memory_tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING",
            )
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?;
            // The caller's row is locked first, as forgetting locks it first: one caller's
            // writes and its deletion take turns (no deadlock, exact counters). A row deleted
            // while this waited for its lock is made again.
            let lock = match pool.kind() {
                Backend::Sqlite => {
                    "SELECT caller FROM memory_callers WHERE tenant_id = $1 AND caller = $2"
                }
                Backend::Postgres => {
                    "SELECT caller FROM memory_callers WHERE tenant_id = $1 AND caller = $2 FOR UPDATE"
                }
            };
            let mut locked = false;
            for _ in 0..3 {
                sqlx::query(
                    "INSERT INTO memory_callers (tenant_id, caller, created_at, updated_at) VALUES ($1, $2, $3, $3) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(tenant_id)
                .bind(caller)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                let row: Option<String> = sqlx::query_scalar(lock)
                    .bind(tenant_id)
                    .bind(caller)
                    .fetch_optional(&mut *tx)
                    .await?;
                if row.is_some() {
                    locked = true;
                    break;
                }
            }
            if !locked {
                return Err(StoreError::Conflict(format!(
                    "the memory of caller `{}` is being deleted; try again",
                    truncate(caller, 40)
                )));
            }
            let mut new_entities: i64 = 0;
            for name in &c.entities {
                let n = sqlx::query(
                    "INSERT INTO memory_entities (tenant_id, caller, name, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(tenant_id)
                .bind(caller)
                .bind(name)
                .bind(&at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                new_entities += i64::try_from(n).unwrap_or(0);
            }
            let (id,): (i64,) = sqlx::query_as(
                "INSERT INTO memory_observations \
                 (tenant_id, caller, scope, entity, content, call_id, idempotency_key, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            )
            .bind(tenant_id)
            .bind(caller)
            .bind(&scope)
            .bind(&c.entity)
            .bind(&c.content)
            .bind(new.call_id)
            .bind(new.idempotency_key)
            .bind(&at)
            .fetch_one(&mut *tx)
            .await?;
            let mut new_relations: i64 = 0;
            for (relation, to) in &c.relations {
                let n = sqlx::query(
                    "INSERT INTO memory_relations (tenant_id, caller, from_entity, relation, to_entity, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                )
                .bind(tenant_id)
                .bind(caller)
                .bind(&c.entity)
                .bind(relation)
                .bind(to)
                .bind(&at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                new_relations += i64::try_from(n).unwrap_or(0);
            }
            let (observations, entities, relations): (i64, i64, i64) = sqlx::query_as(
                "UPDATE memory_callers SET observations = observations + 1, entities = entities + $3, \
                 relations = relations + $4, updated_at = $5 WHERE tenant_id = $1 AND caller = $2 \
                 RETURNING observations, entities, relations",
            )
            .bind(tenant_id)
            .bind(caller)
            .bind(new_entities)
            .bind(new_relations)
            .bind(&at)
            .fetch_one(&mut *tx)
            .await?;
            let whose = format!("caller `{}`", truncate(caller, 40));
            // Dropping the transaction rolls everything back.
            if observations > limits.max_observations_per_caller {
                return Err(full(
                    "observations",
                    observations - 1,
                    limits.max_observations_per_caller,
                    "max_observations_per_caller",
                    &whose,
                ));
            }
            if entities > limits.max_entities_per_caller {
                return Err(full(
                    "entities",
                    entities - new_entities,
                    limits.max_entities_per_caller,
                    "max_entities_per_caller",
                    &whose,
                ));
            }
            if relations > limits.max_relations_per_caller {
                return Err(full(
                    "relations",
                    relations - new_relations,
                    limits.max_relations_per_caller,
                    "max_relations_per_caller",
                    &whose,
                ));
            }
            let (in_tenant,): (i64,) = sqlx::query_as(
                "UPDATE memory_tenants SET observations = observations + 1 WHERE tenant_id = $1 RETURNING observations",
            )
            .bind(tenant_id)
            .fetch_one(&mut *tx)
            .await?;
            if in_tenant > limits.max_observations_per_tenant {
                return Err(full(
                    "observations",
                    in_tenant - 1,
                    limits.max_observations_per_tenant,
                    "max_observations_per_tenant",
                    "this tenant",
                ));
            }
            tx.commit().await?;
            Ok(Remembered {
                id,
                entity: c.entity.clone(),
                created: true,
            })
        })
    }

    /// Deletes everything remembered about `caller` in the tenant; nothing to delete is fine.
    pub async fn forget_caller(
        &self,
        tenant_id: &str,
        caller: &str,
    ) -> Result<Forgotten, StoreError> {
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            let lock = match pool.kind() {
                Backend::Sqlite => {
                    "SELECT observations, entities, relations FROM memory_callers WHERE tenant_id = $1 AND caller = $2"
                }
                Backend::Postgres => {
                    "SELECT observations, entities, relations FROM memory_callers WHERE tenant_id = $1 AND caller = $2 FOR UPDATE"
                }
            };
            let counts: Option<(i64, i64, i64)> = sqlx::query_as(lock)
                .bind(tenant_id)
                .bind(caller)
                .fetch_optional(&mut *tx)
                .await?;
            let Some((observations, entities, relations)) = counts else {
                return Ok(Forgotten::default());
            };
            for delete in FORGET {
                sqlx::query(delete)
                    .bind(tenant_id)
                    .bind(caller)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(
                "UPDATE memory_tenants SET observations = observations - $2 WHERE tenant_id = $1",
            )
            .bind(tenant_id)
            .bind(observations)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Forgotten {
                observations,
                entities,
                relations,
            })
        })
    }
}
