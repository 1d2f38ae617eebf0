-- no-transaction
-- GPT-Live: a call's `door` may be `live` (a new owner re-attaches the session's sideband), and
-- an agent keeps its GPT-Live settings (`live`, JSON: model, voice_instructions,
-- backend_model, voice; NULL when unset).
--
-- SQLite cannot change a CHECK constraint in place, so `calls` is rebuilt. Foreign keys are
-- off while it is (a pragma that only takes effect outside a transaction, hence the
-- migration's own transaction), so dropping the old table cascades nowhere; its children
-- name `calls`, which the new table is renamed to.
PRAGMA foreign_keys = OFF;
BEGIN;
ALTER TABLE agents ADD COLUMN live TEXT;
CREATE TABLE calls_v9 (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    agent       TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'ended')),
    call_info   TEXT NOT NULL,
    context     TEXT NOT NULL,
    pinned      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    handoffs    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    ended_at    TEXT,
    owner_node  TEXT,
    fence       INTEGER NOT NULL DEFAULT 0,
    door        TEXT NOT NULL DEFAULT 'http' CHECK (door IN ('http', 'realtime', 'live')),
    PRIMARY KEY (tenant_id, id)
) STRICT;
INSERT INTO calls_v9 (tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at, owner_node, fence, door)
    SELECT tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at, owner_node, fence, door FROM calls;
DROP TABLE calls;
ALTER TABLE calls_v9 RENAME TO calls;
CREATE INDEX calls_by_tenant_newest ON calls (tenant_id, created_at DESC, id DESC);
CREATE INDEX calls_active_by_owner ON calls (owner_node) WHERE status = 'active';
PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
