-- A call's records in the order they were committed, so a page of a long call's timeline
-- (`Store::invocation_page`) reads only its own rows, at the start of the call as at its end.
CREATE INDEX call_invocations_by_call ON call_invocations (tenant_id, call_id, seq);
