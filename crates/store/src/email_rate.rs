//! The per-tenant email send rate, counted in the database so that every node sharing it draws
//! on one budget: two nodes together allow a tenant `per_minute` sends a minute, not twice that.
//!
//! The rate is a GCRA (the cell rate algorithm the in-process governor uses too): a burst of
//! `per_minute` sends, then one every `60 s / per_minute`. Its state is one row per tenant, moved
//! by one atomic upsert per send, so concurrent sends on any nodes are counted exactly. Times
//! come from the database's clock, which all nodes share. A send's idempotency key is noted in
//! the same transaction: a retried send (same key) is let through without being counted again.

use crate::ownership::now_ms;
use crate::{Store, StoreError, WritePool, with_pool};

/// How long a counted send's key is remembered (retries come within minutes).
const KEY_RETENTION_MS: i64 = 60 * 60 * 1000;
const MINUTE_MS: i64 = 60 * 1000;

/// What the rate says of one send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailAdmission {
    /// Counted: send it.
    Admitted,
    /// This send's key was counted before (a retry): send it, it costs nothing more.
    Repeated,
    /// Over the rate: the tenant may send again in this many seconds (at least 1).
    Refused {
        /// Seconds until the next send would be admitted.
        retry_after_s: u64,
    },
}

impl Store {
    /// Counts one email of `tenant_id`, identified by `send_key` (its idempotency key), against
    /// a rate of `per_minute` sends a minute (at least 1) shared by every node on this database.
    pub async fn admit_email(
        &self,
        tenant_id: &str,
        send_key: &str,
        per_minute: u32,
    ) -> Result<EmailAdmission, StoreError> {
        let interval = MINUTE_MS / i64::from(per_minute.clamp(1, 60_000));
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            let (now,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {}",
                now_ms(pool.kind())
            )))
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM email_sends WHERE tenant_id = $1 AND sent_at < $2")
                .bind(tenant_id)
                .bind(now - KEY_RETENTION_MS)
                .execute(&mut *tx)
                .await?;
            let new_key = sqlx::query(
                "INSERT INTO email_sends (tenant_id, send_key, sent_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (tenant_id, send_key) DO NOTHING",
            )
            .bind(tenant_id)
            .bind(send_key)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !new_key {
                tx.commit().await?;
                return Ok(EmailAdmission::Repeated);
            }
            // The one statement that counts: it moves the tenant's arrival time on by one
            // interval unless that would run more than a minute ahead of now. Concurrent
            // senders queue on the row (PostgreSQL) or the write lock (SQLite).
            let counted: Option<(i64,)> = sqlx::query_as(
                "INSERT INTO email_rate (tenant_id, tat) VALUES ($1, $2 + $3) \
                 ON CONFLICT (tenant_id) DO UPDATE SET \
                 tat = (CASE WHEN email_rate.tat > $2 THEN email_rate.tat ELSE $2 END) + $3 \
                 WHERE (CASE WHEN email_rate.tat > $2 THEN email_rate.tat ELSE $2 END) + $3 - $2 <= $4 \
                 RETURNING tat",
            )
            .bind(tenant_id)
            .bind(now)
            .bind(interval)
            .bind(MINUTE_MS)
            .fetch_optional(&mut *tx)
            .await?;
            if counted.is_some() {
                tx.commit().await?;
                return Ok(EmailAdmission::Admitted);
            }
            let (tat,): (i64,) = sqlx::query_as("SELECT tat FROM email_rate WHERE tenant_id = $1")
                .bind(tenant_id)
                .fetch_one(&mut *tx)
                .await?;
            // Not counted: the key goes too, so a later retry of this send is counted then.
            tx.rollback().await?;
            let wait_ms = u64::try_from(tat + interval - now - MINUTE_MS).unwrap_or(1);
            let retry_after_s = wait_ms.div_ceil(1000).max(1);
            Ok(EmailAdmission::Refused { retry_after_s })
        })
    }
}
