//! Webhook deliveries already taken, so a retried delivery is acknowledged but not acted on twice,
//! whichever node it reaches.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::is_fk_violation;
use crate::{Store, StoreError, WritePool, now, truncate, with_pool};

/// Deliveries are kept this long: past OpenAI's 72-hour retry window, with a margin.
const KEEP_HOURS: u64 = 96;

static CLAIMS: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Claims a delivery by its `webhook-id`: `true` the first time, `false` for a repeat.
    pub async fn claim_webhook(
        &self,
        tenant_id: &str,
        webhook_id: &str,
    ) -> Result<bool, StoreError> {
        if webhook_id.is_empty() || webhook_id.len() > 256 {
            return Err(StoreError::Invalid(format!(
                "webhook-id `{}` must be 1-256 characters",
                truncate(webhook_id, 80)
            )));
        }
        let at = now();
        // In turn with this process's other SQLite writers (`write_tx`): a burst of rings
        // otherwise meets the journal's writers in SQLite's busy handler, which sleeps.
        let inserted = with_pool!(self, |pool| {
            async {
                let _turn = self.write_turn(pool.kind()).await?;
                sqlx::query(
                    "INSERT INTO webhook_deliveries (tenant_id, webhook_id, received_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (tenant_id, webhook_id) DO NOTHING",
                )
                .bind(tenant_id)
                .bind(webhook_id)
                .bind(&at)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
            .await
        });
        let inserted = match inserted {
            Ok(n) => n,
            Err(e) if is_fk_violation(&e) => {
                return Err(StoreError::NotFound(format!("tenant `{tenant_id}`")));
            }
            Err(e) => return Err(e.into()),
        };
        // Every 256th new delivery, forget those older than any retry.
        if inserted == 1 && CLAIMS.fetch_add(1, Ordering::Relaxed).is_multiple_of(256) {
            let cutoff = std::time::SystemTime::now()
                .checked_sub(std::time::Duration::from_secs(KEEP_HOURS * 3600))
                .map(|t| humantime::format_rfc3339_millis(t).to_string())
                .unwrap_or_default();
            let _ = with_pool!(self, |pool| {
                sqlx::query("DELETE FROM webhook_deliveries WHERE received_at < $1")
                    .bind(&cutoff)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            });
        }
        Ok(inserted == 1)
    }
}
