-- A function call's claim and its finish as functions, so the journal's group writer
-- (src/group_commit/postgres.rs) can write a whole batch of them in one statement each, over
-- arrays, instead of a transaction of four or five statements per job. Each statement in these
-- functions reads with a snapshot of its own (they are volatile, and the database runs at READ
-- COMMITTED), so the look-up of the record that follows the call's row lock sees a finish that
-- committed while the lock was awaited, as the store's own transaction does. Only the usual
-- case is decided here: a call that is missing, ended or fenced off answers 'refused', and the
-- store's transaction then says which.

-- 'claimed', 'taken' (claimed or recorded already) or 'refused'.
CREATE FUNCTION journal_claim(p_tenant TEXT, p_call TEXT, p_fc TEXT, p_invocation BYTEA,
                              p_fence BIGINT, p_at TEXT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    stored BIGINT;
    state  TEXT;
BEGIN
    SELECT fence, status INTO stored, state FROM calls
     WHERE tenant_id = p_tenant AND id = p_call FOR SHARE;
    IF NOT FOUND OR state = 'ended' OR (p_fence IS NOT NULL AND stored <> p_fence) THEN
        RETURN 'refused';
    END IF;
    PERFORM 1 FROM call_invocations
     WHERE tenant_id = p_tenant AND call_id = p_call AND function_call_id = p_fc;
    IF FOUND THEN
        RETURN 'taken';
    END IF;
    INSERT INTO call_claims (tenant_id, call_id, function_call_id, invocation, fence, claimed_at)
    VALUES (p_tenant, p_call, p_fc, p_invocation, stored, p_at)
    ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING;
    IF FOUND THEN
        RETURN 'claimed';
    END IF;
    RETURN 'taken';
END
$$;

-- 'written', 'recorded' (a record is there already: nothing changed) or 'refused'. The call's
-- row is locked first, so a call's finishes are serialised. A record inserted meanwhile by a
-- writer that did not lock the call fails the insert (a unique violation), and with it the
-- whole batch: nothing of it is kept, and its jobs take the store's transaction.
CREATE FUNCTION journal_finish(p_tenant TEXT, p_call TEXT, p_fc TEXT, p_record TEXT, p_at TEXT,
                               p_context TEXT, p_agent TEXT, p_handoffs BIGINT, p_fence BIGINT)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
    stored BIGINT;
BEGIN
    SELECT fence INTO stored FROM calls
     WHERE tenant_id = p_tenant AND id = p_call FOR UPDATE;
    IF NOT FOUND OR (p_fence IS NOT NULL AND stored <> p_fence) THEN
        RETURN 'refused';
    END IF;
    PERFORM 1 FROM call_invocations
     WHERE tenant_id = p_tenant AND call_id = p_call AND function_call_id = p_fc;
    IF FOUND THEN
        RETURN 'recorded';
    END IF;
    IF p_context IS NULL THEN
        UPDATE calls SET handoffs = p_handoffs WHERE tenant_id = p_tenant AND id = p_call;
    ELSE
        UPDATE calls SET context = p_context, agent = p_agent, handoffs = p_handoffs,
                         version = version + 1
         WHERE tenant_id = p_tenant AND id = p_call;
    END IF;
    -- Its claim and checkpoint go with it (the trigger of 0010).
    INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at)
    VALUES (p_tenant, p_call, p_fc, p_record, p_at);
    RETURN 'written';
END
$$;
