-- Caller memory (the `memory` toolkit): entities, observations and relations, kept per tenant
-- and per caller (`call.from`, else `user.id`). Keep it in step with ../postgres/0007_memory.sql.
-- Counters make the size limits one indexed row read each, whatever the tenant holds.

CREATE TABLE memory_tenants (
    tenant_id     TEXT NOT NULL PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    observations  INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE memory_callers (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    caller        TEXT NOT NULL,
    observations  INTEGER NOT NULL DEFAULT 0,
    entities      INTEGER NOT NULL DEFAULT 0,
    relations     INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, caller)
) STRICT;

CREATE TABLE memory_entities (
    tenant_id   TEXT NOT NULL,
    caller      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, caller, name),
    FOREIGN KEY (tenant_id, caller) REFERENCES memory_callers (tenant_id, caller) ON DELETE CASCADE
) STRICT;

-- `scope` is one word naming the tenant and caller (a hash), so the full-text index can narrow
-- a search to one caller's rows itself; the join on tenant_id and caller stays the guarantee.
-- `idempotency_key` makes a retried `memory.create` store its observation once.
CREATE TABLE memory_observations (
    id               INTEGER PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    caller           TEXT NOT NULL,
    scope            TEXT NOT NULL,
    entity           TEXT NOT NULL,
    content          TEXT NOT NULL,
    call_id          TEXT,
    idempotency_key  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    FOREIGN KEY (tenant_id, caller, entity)
        REFERENCES memory_entities (tenant_id, caller, name) ON DELETE CASCADE
) STRICT;
CREATE INDEX memory_observations_by_caller ON memory_observations (tenant_id, caller, id);
CREATE UNIQUE INDEX memory_observations_once ON memory_observations (tenant_id, idempotency_key);

CREATE TABLE memory_relations (
    tenant_id    TEXT NOT NULL,
    caller       TEXT NOT NULL,
    from_entity  TEXT NOT NULL,
    relation     TEXT NOT NULL,
    to_entity    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, caller, from_entity, relation, to_entity),
    FOREIGN KEY (tenant_id, caller, from_entity)
        REFERENCES memory_entities (tenant_id, caller, name) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, caller, to_entity)
        REFERENCES memory_entities (tenant_id, caller, name) ON DELETE CASCADE
) STRICT;

-- Ranked full-text search (bm25) over observations, English stemming; kept in step by triggers.
CREATE VIRTUAL TABLE memory_observations_fts USING fts5 (
    scope, entity, content,
    content = 'memory_observations', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_observations_fts_insert AFTER INSERT ON memory_observations BEGIN
    INSERT INTO memory_observations_fts (rowid, scope, entity, content)
    VALUES (new.id, new.scope, new.entity, new.content);
END;

CREATE TRIGGER memory_observations_fts_delete AFTER DELETE ON memory_observations BEGIN
    INSERT INTO memory_observations_fts (memory_observations_fts, rowid, scope, entity, content)
    VALUES ('delete', old.id, old.scope, old.entity, old.content);
END;
