//! The store's one error type.

use std::path::PathBuf;

/// Why a store operation failed. Messages name the thing and the fix, never a secret value.
///
/// Suggested HTTP statuses: `NotFound` 404, `Conflict` 409, `Invalid` 400 (422 for
/// `Rejected`), everything else 500 (503 when `Database` is a pool timeout).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named thing does not exist (for this tenant).
    #[error("{0} not found")]
    NotFound(String),
    /// The write conflicts with what is stored (a duplicate id, an ended call).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Another node owns the call now: the write of a node whose fencing token is stale is
    /// refused and nothing is stored.
    #[error("fenced off: {0}")]
    Fenced(String),
    /// The input is not acceptable; the message says what to change.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// A caller's update function refused to change a call's context.
    #[error("the update was refused: {0}")]
    Rejected(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A sealed value could not be opened.
    #[error(
        "cannot decrypt a sealed value: the master key differs from the one it was sealed with, \
         or the stored bytes were altered; set SWITCHBOARD_MASTER_KEY (or the key file) to the \
         original key"
    )]
    Crypto,
    /// A stored row cannot be read back (changed outside Switchboard, or a newer schema).
    #[error("stored data is unreadable ({0}); restore it from a backup or remove the row")]
    Corrupt(String),
    /// The master key file could not be read or written.
    #[error("master key file {}: {source}; check the path and its permissions, or set SWITCHBOARD_MASTER_KEY", path.display())]
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The database failed or could not be reached.
    #[error(
        "database error: {0}; check that the database is reachable and migrated (`switchboard migrate`)"
    )]
    Database(#[source] sqlx::Error),
    /// A migration failed or the database holds migrations this build does not know.
    #[error("database migration failed: {0}; the database may belong to a newer Switchboard")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e)
    }
}

impl StoreError {
    /// Whether this error is a missing row, for callers that treat that case apart.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound(_))
    }
}

/// Whether a database error is a unique (or primary key) violation.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// Whether a database error is a foreign key violation.
pub(crate) fn is_fk_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_foreign_key_violation())
}
