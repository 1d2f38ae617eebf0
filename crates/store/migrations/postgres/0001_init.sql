-- Switchboard's schema on PostgreSQL. Keep it in step with ../sqlite/0001_init.sql: the same
-- tables, columns and constraints; only the types differ (BIGINT/BYTEA here, INTEGER/BLOB there).
-- Keys and names use the "C" collation so they sort bytewise, as on SQLite, whatever the
-- database's locale: both backends then page through lists in the same order.
-- Timestamps are RFC 3339 UTC text with milliseconds (fixed width, so they sort as text).
-- JSON is stored as text. Sealed values are `version || nonce || ciphertext+tag` bytes.

CREATE TABLE tenants (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL,
    features    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

-- Only the SHA-256 of a key is kept; `prefix` is for people to tell keys apart.
-- `tenant_id` NULL is an admin key.
CREATE TABLE api_keys (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tenant_id   TEXT COLLATE "C" REFERENCES tenants (id) ON DELETE CASCADE,
    label       TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    key_hash    TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);

-- One row per tool name; `current_version` NULL means deleted (its versions stay for calls
-- pinned to them). `latest_version` only grows, so a version number is never reused.
CREATE TABLE tools (
    tenant_id        TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT COLLATE "C" NOT NULL,
    current_version  BIGINT,
    latest_version   BIGINT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE tool_versions (
    tenant_id   TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    version     BIGINT NOT NULL,
    definition  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name, version),
    FOREIGN KEY (tenant_id, name) REFERENCES tools (tenant_id, name) ON DELETE CASCADE
);

CREATE TABLE agents (
    tenant_id     TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          TEXT COLLATE "C" NOT NULL,
    instructions  TEXT NOT NULL,
    model         TEXT,
    voice         TEXT,
    handoffs      TEXT NOT NULL,
    is_default    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
-- At most one default agent per tenant.
CREATE UNIQUE INDEX agents_one_default ON agents (tenant_id) WHERE is_default;

-- `sensitive_config` is sealed; NULL when unset.
CREATE TABLE agent_tools (
    tenant_id         TEXT COLLATE "C" NOT NULL,
    agent             TEXT COLLATE "C" NOT NULL,
    position          BIGINT NOT NULL,
    tool              TEXT COLLATE "C" NOT NULL,
    enabled           BOOLEAN NOT NULL,
    config            TEXT NOT NULL,
    sensitive_config  BYTEA,
    PRIMARY KEY (tenant_id, agent, tool),
    FOREIGN KEY (tenant_id, agent) REFERENCES agents (tenant_id, name) ON DELETE CASCADE
);

CREATE TABLE secrets (
    tenant_id   TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        TEXT COLLATE "C" NOT NULL,
    value       BYTEA NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- Call ids come from the voice platform and are global (the runtime's journal knows no
-- tenant); every read through the API still filters by tenant_id.
CREATE TABLE calls (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tenant_id   TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'ended')),
    call_info   TEXT NOT NULL,
    context     TEXT NOT NULL,
    pinned      TEXT NOT NULL,
    version     BIGINT NOT NULL,
    handoffs    BIGINT NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL,
    ended_at    TEXT
);
CREATE INDEX calls_by_tenant_newest ON calls (tenant_id, created_at DESC, id DESC);

CREATE TABLE call_invocations (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    call_id           TEXT COLLATE "C" NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    function_call_id  TEXT COLLATE "C" NOT NULL,
    record            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    UNIQUE (call_id, function_call_id)
);

-- A run waiting at an effect. Sealed: the rendered request may carry credentials.
CREATE TABLE call_checkpoints (
    call_id           TEXT COLLATE "C" NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
    function_call_id  TEXT COLLATE "C" NOT NULL,
    checkpoint        BYTEA NOT NULL,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (call_id, function_call_id)
);
