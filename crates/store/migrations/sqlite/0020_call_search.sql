-- Searching a tenant's calls at any number of them (`GET /v1/calls`, the console's calls page):
-- each search key has an index in the list's order (newest first), so a search reads its own
-- calls a page at a time, never the tenant's whole list. Keep it in step with
-- ../postgres/0019_call_search.sql.
--
-- The numbers come from `call_info` (virtual columns: nothing to write at a start); one longer
-- than 256 characters (no phone number is) is not indexed, nor a user id that long, so an index
-- entry stays within PostgreSQL's size for one on both backends. The user id
-- lives in the sealed context, so the store writes it at the start; calls stored before this
-- migration hold NULL until `Store::migrate` reads their contexts (`calls_user_unread` finds
-- them), then the id or '' for none.
ALTER TABLE calls ADD COLUMN from_number TEXT GENERATED ALWAYS AS
    (CASE WHEN length(json_extract(call_info, '$.from')) <= 256 THEN json_extract(call_info, '$.from') END) VIRTUAL;
ALTER TABLE calls ADD COLUMN to_number TEXT GENERATED ALWAYS AS
    (CASE WHEN length(json_extract(call_info, '$.to')) <= 256 THEN json_extract(call_info, '$.to') END) VIRTUAL;
ALTER TABLE calls ADD COLUMN user_id TEXT;
CREATE INDEX calls_by_from ON calls (tenant_id, from_number, created_at DESC, id DESC);
CREATE INDEX calls_by_to ON calls (tenant_id, to_number, created_at DESC, id DESC);
CREATE INDEX calls_by_user ON calls (tenant_id, user_id, created_at DESC, id DESC);
-- The live calls, newest first: a page of them reads only live calls (they are few; the ended
-- ones are most, and the list's own index finds them).
CREATE INDEX calls_active_newest ON calls (tenant_id, created_at DESC, id DESC) WHERE status = 'active';
CREATE INDEX calls_user_unread ON calls (tenant_id, id) WHERE user_id IS NULL;

-- The calls that invoked a tool (its name's first 64 characters: a tool's name is at most that,
-- and a name a model made up may be longer), and the failed invocations (a record whose `ok` is false) with
-- their error codes: the failed ones are few, so their index is small, and it also answers
-- whether one call failed.
CREATE INDEX call_invocations_by_tool ON call_invocations (tenant_id, substr(json_extract(record, '$.tool'), 1, 64), call_id);
CREATE INDEX call_invocations_failed ON call_invocations (tenant_id, call_id, json_extract(record, '$.error'))
    WHERE json_extract(record, '$.ok') = 0;
