-- The longest silence an agent's caller should hear while a tool runs (milliseconds; checked
-- when the agent is saved: 200 to 5,000); NULL keeps the default (700).
ALTER TABLE agents ADD COLUMN turn_budget_ms INTEGER;
