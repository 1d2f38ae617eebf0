-- Call ids are scoped by tenant: two tenants may use one call id, each with its own call
-- (context, records, checkpoints). SQLite cannot change a primary key in place, so the three
-- tables are rebuilt; the children are copied and dropped before `calls`, so dropping it
-- cascades nowhere. Renaming `calls_v4` to `calls` rewrites the children's foreign keys.
CREATE TABLE calls_v4 (
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
    PRIMARY KEY (tenant_id, id)
) STRICT;
INSERT INTO calls_v4 (tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at)
    SELECT tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at FROM calls;

CREATE TABLE call_invocations_v4 (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id         TEXT NOT NULL,
    call_id           TEXT NOT NULL,
    function_call_id  TEXT NOT NULL,
    record            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    UNIQUE (tenant_id, call_id, function_call_id),
    FOREIGN KEY (tenant_id, call_id) REFERENCES calls_v4 (tenant_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO call_invocations_v4 (seq, tenant_id, call_id, function_call_id, record, created_at)
    SELECT i.seq, c.tenant_id, i.call_id, i.function_call_id, i.record, i.created_at
    FROM call_invocations i JOIN calls c ON c.id = i.call_id;

CREATE TABLE call_checkpoints_v4 (
    tenant_id         TEXT NOT NULL,
    call_id           TEXT NOT NULL,
    function_call_id  TEXT NOT NULL,
    checkpoint        BLOB NOT NULL,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, call_id, function_call_id),
    FOREIGN KEY (tenant_id, call_id) REFERENCES calls_v4 (tenant_id, id) ON DELETE CASCADE
) STRICT;
INSERT INTO call_checkpoints_v4 (tenant_id, call_id, function_call_id, checkpoint, updated_at)
    SELECT c.tenant_id, k.call_id, k.function_call_id, k.checkpoint, k.updated_at
    FROM call_checkpoints k JOIN calls c ON c.id = k.call_id;

DROP TABLE call_checkpoints;
DROP TABLE call_invocations;
DROP TABLE calls;
ALTER TABLE calls_v4 RENAME TO calls;
ALTER TABLE call_invocations_v4 RENAME TO call_invocations;
ALTER TABLE call_checkpoints_v4 RENAME TO call_checkpoints;
CREATE INDEX calls_by_tenant_newest ON calls (tenant_id, created_at DESC, id DESC);
