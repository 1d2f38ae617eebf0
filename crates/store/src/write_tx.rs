//! Write transactions, taken one at a time per SQLite store in this process.
//!
//! SQLite has one writer per file. With a pool of connections, concurrent `BEGIN IMMEDIATE`s
//! meet `SQLITE_BUSY`, and SQLite's busy handler waits by sleeping in growing steps (up to
//! 100 ms each), so a busy node's writes queued in those sleeps: with 1,000 calls each claiming
//! and journaling its function calls, the tool answers' p99 reached 80–140 ms. The store's write
//! gate queues its writers in this process instead, in arrival order, each woken as soon as the
//! previous transaction ends; the busy timeout still covers other processes sharing the file.
//! A function call's claim and finish, the two writes of every tool call, are written in
//! groups by one thread holding the gate (`group_commit`).
//!
//! PostgreSQL takes no gate: its writers lock rows, not the database. Its claims and finishes
//! are written in groups too, by a thread with connections of its own (`PG_LANES`).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Database, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::group_commit::{GroupWriter, PgBatches, SqliteBatches};
use crate::{Backend, Store, WritePool};

/// Batches of PostgreSQL's journal written at once, each on a connection of its own. SQLite has
/// one writer per file, so one lane.
const PG_LANES: usize = 2;

/// One in-process queue of SQLite writers, shared by every clone of a [`Store`].
#[derive(Debug)]
pub(crate) struct WriteGate {
    turn: Arc<Mutex<()>>,
    /// How long a writer waits for its turn (the store's acquire timeout).
    timeout: Duration,
    /// The journal's group writer (SQLite on a file, PostgreSQL).
    pub(crate) group: Option<GroupWriter>,
}

impl WriteGate {
    /// The gate of a store whose journal is written in groups by `writer`: a SQLite file or
    /// PostgreSQL. An in-memory SQLite database (one database per connection) has none.
    pub(crate) fn new(timeout: Duration, writer: Writer) -> std::io::Result<WriteGate> {
        let turn = Arc::new(Mutex::new(()));
        let group = match writer {
            Writer::None => None,
            Writer::SqliteFile(options) => Some(GroupWriter::start(
                "sqlite-journal",
                SqliteBatches {
                    options,
                    turn: Arc::clone(&turn),
                    busy_timeout: timeout,
                },
                1,
            )?),
            Writer::Postgres(options) => Some(GroupWriter::start(
                "postgres-journal",
                PgBatches { options },
                PG_LANES,
            )?),
        };
        Ok(WriteGate {
            turn,
            timeout,
            group,
        })
    }
}

/// Which group writer a store's journal has (see [`WriteGate::new`]).
pub(crate) enum Writer {
    None,
    SqliteFile(SqliteConnectOptions),
    Postgres(PgConnectOptions),
}

/// A write transaction that holds the store's write gate (on SQLite) until it commits, rolls
/// back or is dropped. Statements run on it as on a transaction: `.execute(&mut *tx)`.
pub(crate) struct WriteTx<DB: Database> {
    tx: Transaction<'static, DB>,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl<DB: Database> WriteTx<DB> {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl<DB: Database> Deref for WriteTx<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        &self.tx
    }
}

impl<DB: Database> DerefMut for WriteTx<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        &mut self.tx
    }
}

impl Store {
    /// This process's turn to write outside a transaction (one statement, on SQLite), held
    /// until dropped; `None` on PostgreSQL.
    pub(crate) async fn write_turn(
        &self,
        kind: Backend,
    ) -> Result<Option<OwnedMutexGuard<()>>, sqlx::Error> {
        match kind {
            Backend::Sqlite => Ok(Some(
                tokio::time::timeout(self.gate.timeout, self.gate.turn.clone().lock_owned())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)?,
            )),
            Backend::Postgres => Ok(None),
        }
    }

    /// Begins a write transaction on `pool` (this store's), after this process's earlier SQLite
    /// writers. Waiting longer than the acquire timeout is `PoolTimedOut`, like a pool that has
    /// no free connection.
    pub(crate) async fn begin_write<P: WritePool>(
        &self,
        pool: &P,
    ) -> Result<WriteTx<P::Db>, sqlx::Error> {
        let turn = self.write_turn(pool.kind()).await?;
        let tx = pool.begin_write_raw().await?;
        Ok(WriteTx { tx, _turn: turn })
    }
}
