-- A call's start within its tenant's limit (max_calls_per_tenant) costs the same whatever the
-- tenant's live calls. It counted them (through calls_active_by_tenant, 0013) while holding the
-- tenant's row, in a transaction of four round trips, so each start of a tenant waited for the
-- one before: at 10,000 live calls the count alone took 2-4 ms and a tenant's calls came up at
-- about 250 a second, fewer the more were live (docs/benchmarks.md).
--
-- Now each tenant keeps its live calls in `live_calls`, moved by triggers on every insert, end
-- and delete of a call, and `call_start` locks the row, reads the number and inserts, in one
-- statement. Keep it in step with ../sqlite/0015_tenant_live_calls.sql.
ALTER TABLE tenants ADD COLUMN live_calls BIGINT NOT NULL DEFAULT 0;
UPDATE tenants t
   SET live_calls = (SELECT COUNT(*) FROM calls c WHERE c.tenant_id = t.id AND c.status = 'active');

CREATE FUNCTION calls_count_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status = 'active' THEN
        UPDATE tenants SET live_calls = live_calls - 1 WHERE id = OLD.tenant_id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status = 'active' THEN
        UPDATE tenants SET live_calls = live_calls + 1 WHERE id = NEW.tenant_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER calls_count_live_insert AFTER INSERT ON calls
    FOR EACH ROW WHEN (NEW.status = 'active') EXECUTE FUNCTION calls_count_live();
CREATE TRIGGER calls_count_live_delete AFTER DELETE ON calls
    FOR EACH ROW WHEN (OLD.status = 'active') EXECUTE FUNCTION calls_count_live();
CREATE TRIGGER calls_count_live_update AFTER UPDATE OF status, tenant_id ON calls
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.tenant_id <> NEW.tenant_id)
    EXECUTE FUNCTION calls_count_live();

-- TRUE when the call was inserted, FALSE when the tenant has p_max live calls already. A call
-- id the tenant used already fails with the unique violation, a missing tenant with the foreign
-- key's, as the insert alone would. The row lock keeps two starts from both taking the last
-- place; it is let go at the statement's commit.
CREATE FUNCTION call_start(p_id TEXT, p_tenant TEXT, p_agent TEXT, p_call_info TEXT,
                           p_context TEXT, p_pinned TEXT, p_at TEXT, p_owner TEXT,
                           p_fence BIGINT, p_door TEXT, p_max BIGINT)
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
                       handoffs, created_at, owner_node, fence, door)
    VALUES (p_id, p_tenant, p_agent, 'active', p_call_info, p_context, p_pinned, 0, 0, p_at,
            p_owner, p_fence, p_door);
    RETURN TRUE;
END
$$;
