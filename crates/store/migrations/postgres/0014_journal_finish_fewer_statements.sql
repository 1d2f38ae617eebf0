-- journal_finish (0012) with fewer statements per finish, measured as the database's share of a
-- tool call's CPU (docs/benchmarks.md): the record is inserted first, and a record there
-- already is its conflict rather than a look-up of its own; the call's row is written only when
-- something of it changed (a read tool's finish used to rewrite it to set `handoffs` to what it
-- was). The call's row is still locked first, so a call's finishes are serialised, and a record
-- inserted meanwhile by the store's own transaction is now met as 'recorded' after that
-- transaction ends, instead of failing the batch.

-- 'written', 'recorded' (a record is there already: nothing changed) or 'refused'.
CREATE OR REPLACE FUNCTION journal_finish(p_tenant TEXT, p_call TEXT, p_fc TEXT, p_record TEXT,
                                          p_at TEXT, p_context TEXT, p_agent TEXT,
                                          p_handoffs BIGINT, p_fence BIGINT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    stored          BIGINT;
    stored_handoffs BIGINT;
BEGIN
    SELECT fence, handoffs INTO stored, stored_handoffs FROM calls
     WHERE tenant_id = p_tenant AND id = p_call FOR UPDATE;
    IF NOT FOUND OR (p_fence IS NOT NULL AND stored <> p_fence) THEN
        RETURN 'refused';
    END IF;
    -- Its claim and checkpoint go with it (the trigger of 0010).
    INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at)
    VALUES (p_tenant, p_call, p_fc, p_record, p_at)
    ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'recorded';
    END IF;
    IF p_context IS NOT NULL THEN
        UPDATE calls SET context = p_context, agent = p_agent, handoffs = p_handoffs,
                         version = version + 1
         WHERE tenant_id = p_tenant AND id = p_call;
    ELSIF stored_handoffs <> p_handoffs THEN
        UPDATE calls SET handoffs = p_handoffs WHERE tenant_id = p_tenant AND id = p_call;
    END IF;
    RETURN 'written';
END
$$;
