-- What an agent's caller hears while a slow tool without `messages.delayed` runs (checked when
-- the agent is saved: at most 200 characters); NULL: silence.
ALTER TABLE agents ADD COLUMN filler TEXT;
