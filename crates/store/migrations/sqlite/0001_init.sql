-- Switchboard's schema on SQLite. Keep it in step with ../postgres/0001_init.sql: the same
-- tables, columns and constraints; only the types differ (INTEGER/BLOB here, BIGINT/BYTEA there).
-- Timestamps are RFC 3339 UTC text with milliseconds (fixed width, so they sort as text).
-- JSON is stored as text. Sealed values are `version || nonce || ciphertext+tag` blobs.

CREATE TABLE tenants (
    id          TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL,
    features    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
) STRICT;

-- Only the SHA-256 of a key is kept; `prefix` is for people to tell keys apart.
-- `tenant_id` NULL is an admin key.
CREATE TABLE api_keys (
    id          TEXT NOT NULL PRIMARY KEY,
    tenant_id   TEXT REFERENCES tenants (id) ON DELETE CASCADE,
    label       TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
) STRICT;
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);

-- One row per tool name; `current_version` NULL means deleted (its versions stay for calls
-- pinned to them). `latest_version` only grows, so a version number is never reused.
CREATE TABLE tools (
    tenant_id        TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    current_version  INTEGER,
    latest_version   INTEGER NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT;

CREATE TABLE tool_versions (
    tenant_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    definition  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name, version),
    FOREIGN KEY (tenant_id, name) REFERENCES tools (tenant_id, name) ON DELETE CASCADE
) STRICT;

CREATE TABLE agents (
    tenant_id     TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    instructions  TEXT NOT NULL,
    model         TEXT,
    voice         TEXT,
    handoffs      TEXT NOT NULL,
    is_default    INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT;
-- At most one default agent per tenant.
CREATE UNIQUE INDEX agents_one_default ON agents (tenant_id) WHERE is_default;

-- `sensitive_config` is sealed; NULL when unset.
CREATE TABLE agent_tools (
    tenant_id         TEXT NOT NULL,
    agent             TEXT NOT NULL,
    position          INTEGER NOT NULL,
    tool              TEXT NOT NULL,
    enabled           INTEGER NOT NULL,
    config            TEXT NOT NULL,
    sensitive_config  BLOB,
    PRIMARY KEY (tenant_id, agent, tool),
    FOREIGN KEY (tenant_id, agent) REFERENCES agents (tenant_id, name) ON DELETE CASCADE
) STRICT;

CREATE TABLE secrets (
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    value       BLOB NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
) STRICT;

-- Call ids come from the voice platform and are global (the runtime's journal knows no
-- tenant); every read through the API still filters by tenant_id.
CREATE TABLE calls (
    id          TEXT NOT NULL PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'ended')),
    call_info   TEXT NOT NULL,
    context     TEXT NOT NULL,
    pinned      TEXT NOT NULL,
    version     INTEGER NOT NULL,
    handoffs    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    ended_at    TEXT
) STRICT;
CREATE INDEX calls_by_tenant_newest ON calls (tenant_id, created_at DESC, id DESC);

CREATE TABLE call_invocations (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id           TEXT NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    function_call_id  TEXT NOT NULL,
    record            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    UNIQUE (call_id, function_call_id)
) STRICT;

-- A run waiting at an effect. Sealed: the rendered request may carry credentials.
CREATE TABLE call_checkpoints (
    call_id           TEXT NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    function_call_id  TEXT NOT NULL,
    checkpoint        BLOB NOT NULL,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (call_id, function_call_id)
) STRICT;
