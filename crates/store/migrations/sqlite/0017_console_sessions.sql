-- Console sessions, kept in the database so that every node sees a sign-out: the SHA-256 of
-- the random token in the session cookie, the key that signed in (its revocation, or its
-- tenant's deletion, ends the session), and when the session ends (epoch ms).
CREATE TABLE console_sessions (
    token_hash  TEXT NOT NULL PRIMARY KEY,
    key_id      TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX console_sessions_by_key ON console_sessions (key_id, created_at);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
