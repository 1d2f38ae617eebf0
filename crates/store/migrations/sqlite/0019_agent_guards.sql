-- An agent's runaway guards where it overrides the defaults (JSON: identical_calls {max,
-- window_s}, calls_per_minute; checked when the agent is saved); NULL keeps the defaults.
ALTER TABLE agents ADD COLUMN guards TEXT;
