-- OAuth2 connections of toolkits (Google Calendar): one per tenant, agent and toolkit.
-- `tokens` is sealed (AES-256-GCM, bound to tenant, agent and toolkit). `version` grows on each
-- change of the tokens; `refresh_until` (epoch ms) and `refresh_holder` are the lease of the one
-- node refreshing them, so nodes refresh once between them.
CREATE TABLE oauth_connections (
    tenant_id      TEXT NOT NULL,
    agent          TEXT NOT NULL,
    toolkit        TEXT NOT NULL,
    status         TEXT NOT NULL,
    error          TEXT,
    tokens         BLOB NOT NULL,
    version        INTEGER NOT NULL,
    refresh_until  INTEGER,
    refresh_holder TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, agent, toolkit),
    FOREIGN KEY (tenant_id, agent) REFERENCES agents (tenant_id, name) ON DELETE CASCADE
);

-- Connect flows under way: the SHA-256 of the `state` sent to the provider, what it is bound
-- to, and the PKCE verifier (sealed). Single use: taking one deletes it.
CREATE TABLE oauth_states (
    state_hash  TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent       TEXT NOT NULL,
    toolkit     TEXT NOT NULL,
    verifier    BLOB NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX oauth_states_by_tenant ON oauth_states (tenant_id, expires_at);
