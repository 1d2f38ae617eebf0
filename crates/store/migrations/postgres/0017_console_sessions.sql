-- Console sessions, kept in the database so that every node sees a sign-out: the SHA-256 of
-- the random token in the session cookie, the key that signed in (its revocation, or its
-- tenant's deletion, ends the session), and when the session ends (epoch ms).
CREATE TABLE console_sessions (
    token_hash  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    key_id      TEXT COLLATE "C" NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX console_sessions_by_key ON console_sessions (key_id, created_at);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
