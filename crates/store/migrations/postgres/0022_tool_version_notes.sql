-- Who published each tool version and why: an optional change note (at most 500 characters,
-- checked by the store) and the publisher (`key <api key id>` for the API, `console (key <id>)`
-- for the console). Versions stored before this migration hold NULL for both.
ALTER TABLE tool_versions ADD COLUMN note TEXT;
ALTER TABLE tool_versions ADD COLUMN published_by TEXT;
