-- Searching a tenant's calls at any number of them (`GET /v1/calls`, the console's calls page):
-- each search key has an index in the list's order (newest first), so a search reads its own
-- calls a page at a time, never the tenant's whole list. Keep it in step with
-- ../sqlite/0019_call_search.sql.
--
-- The numbers come from `call_info` (generated columns: nothing to write at a start); one
-- longer than 256 characters (no phone number is) is not indexed, nor a user id that long, so
-- an index entry stays within the size PostgreSQL allows one. The user
-- id lives in the sealed context, so the store writes it at the start (`call_start` takes it);
-- calls stored before this migration hold NULL until `Store::migrate` reads their contexts
-- (`calls_user_unread` finds them), then the id or '' for none.
ALTER TABLE calls ADD COLUMN from_number TEXT COLLATE "C" GENERATED ALWAYS AS
    (CASE WHEN length(call_info::jsonb ->> 'from') <= 256 THEN call_info::jsonb ->> 'from' END) STORED;
ALTER TABLE calls ADD COLUMN to_number TEXT COLLATE "C" GENERATED ALWAYS AS
    (CASE WHEN length(call_info::jsonb ->> 'to') <= 256 THEN call_info::jsonb ->> 'to' END) STORED;
ALTER TABLE calls ADD COLUMN user_id TEXT COLLATE "C";
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
CREATE INDEX call_invocations_by_tool ON call_invocations (tenant_id, left(record::jsonb ->> 'tool', 64), call_id);
CREATE INDEX call_invocations_failed ON call_invocations (tenant_id, call_id, (record::jsonb ->> 'error'))
    WHERE (record::jsonb ->> 'ok') = 'false';

-- `call_start` (0015) with the caller's user id. Keep the insert in step with the store's own.
DROP FUNCTION call_start(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT);
CREATE FUNCTION call_start(p_id TEXT, p_tenant TEXT, p_agent TEXT, p_call_info TEXT,
                           p_context TEXT, p_pinned TEXT, p_at TEXT, p_owner TEXT,
                           p_fence BIGINT, p_door TEXT, p_user TEXT, p_max BIGINT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
    live BIGINT;
BEGIN
    SELECT live_calls INTO live FROM tenants WHERE id = p_tenant FOR UPDATE;
    -- A missing tenant locks nothing; the insert's foreign key says so.
    IF FOUND AND live >= p_max THEN
        RETURN FALSE;
    END IF;
    INSERT INTO calls (id, tenant_id, agent, status, call_info, context, pinned, version,
                       handoffs, created_at, owner_node, fence, door, user_id)
    VALUES (p_id, p_tenant, p_agent, 'active', p_call_info, p_context, p_pinned, 0, 0, p_at,
            p_owner, p_fence, p_door, p_user);
    RETURN TRUE;
END
$$;
