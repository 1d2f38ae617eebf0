-- What an agent's caller hears while a slow tool without `messages.delayed` runs (checked when
-- the agent is saved: at most 200 characters); NULL: silence.
ALTER TABLE agents ADD COLUMN filler TEXT;
-- `turn_budget_ms` is read as a 64-bit integer, as on SQLite (0024 made it a 32-bit one).
ALTER TABLE agents ALTER COLUMN turn_budget_ms TYPE BIGINT;
