-- A connect flow completes only in the browser that started it: the SHA-256 of the random
-- value of the cookie set there. A flow started before this column (NULL) cannot complete.
ALTER TABLE oauth_states ADD COLUMN binding_hash TEXT;
