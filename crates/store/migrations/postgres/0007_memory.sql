-- Caller memory (the `memory` toolkit): entities, observations and relations, kept per tenant
-- and per caller (`call.from`, else `user.id`). Keep it in step with ../sqlite/0007_memory.sql.
-- Counters make the size limits one indexed row read each, whatever the tenant holds.

CREATE TABLE memory_tenants (
    tenant_id     TEXT NOT NULL PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    observations  BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE memory_callers (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    caller        TEXT NOT NULL,
    observations  BIGINT NOT NULL DEFAULT 0,
    entities      BIGINT NOT NULL DEFAULT 0,
    relations     BIGINT NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, caller)
);

CREATE TABLE memory_entities (
    tenant_id   TEXT NOT NULL,
    caller      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, caller, name),
    FOREIGN KEY (tenant_id, caller) REFERENCES memory_callers (tenant_id, caller) ON DELETE CASCADE
);

-- `scope` names the tenant and caller in one word (used by SQLite's full-text index; kept here
-- so both schemas hold the same columns). `tsv` is the ranked full-text form (English
-- stemming). A search reads one caller's rows through memory_observations_by_caller (a caller
-- holds at most max_observations_per_caller), so a GIN index over the whole table would not
-- be used.
CREATE TABLE memory_observations (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    caller           TEXT NOT NULL,
    scope            TEXT NOT NULL,
    entity           TEXT NOT NULL,
    content          TEXT NOT NULL,
    call_id          TEXT,
    idempotency_key  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    tsv              tsvector GENERATED ALWAYS AS
                         (to_tsvector('english'::regconfig, entity || ' ' || content)) STORED,
    FOREIGN KEY (tenant_id, caller, entity)
        REFERENCES memory_entities (tenant_id, caller, name) ON DELETE CASCADE
);
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
);
