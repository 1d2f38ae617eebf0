-- A recorded invocation settles its claim and checkpoint in the same statement that records it:
-- the journal's finish is then one INSERT instead of an INSERT and two DELETEs, whichever path
-- records it. Keep it in step with ../postgres/0010_invocation_settles_claim.sql.
CREATE TRIGGER call_invocations_settle AFTER INSERT ON call_invocations
BEGIN
    DELETE FROM call_checkpoints
     WHERE tenant_id = NEW.tenant_id AND call_id = NEW.call_id AND function_call_id = NEW.function_call_id;
    DELETE FROM call_claims
     WHERE tenant_id = NEW.tenant_id AND call_id = NEW.call_id AND function_call_id = NEW.function_call_id;
END;
