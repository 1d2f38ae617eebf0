-- A record's `created_at` is the database's clock when it was stored, no longer the writing
-- node's: a node that takes a call over asks how old the call's newest answer is, and only the
-- database's clock is one both nodes share (journal_finish of 0014, p_at now unused).
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
    VALUES (p_tenant, p_call, p_fc, p_record,
            to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
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
