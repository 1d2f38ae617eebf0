-- Toolkits on agents: which of a toolkit's actions an agent enabled (a JSON array of names;
-- NULL: all of them, and for any other tool).
ALTER TABLE agent_tools ADD COLUMN actions TEXT;
