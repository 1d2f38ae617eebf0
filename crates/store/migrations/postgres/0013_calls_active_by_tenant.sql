-- A tenant's live calls, counted against its limit (max_calls_per_tenant) each time a call
-- starts, inside the write that records the call. Through the tenant's index of all its calls
-- the count read every call the tenant ever had, ended ones included, and grew with them: at
-- 6,400 calls it took 5 ms on SQLite, under the write lock every call start queues for. This
-- index holds only live calls and answers the count by itself (tenant and status are both in
-- it). Keep it in step with the other backend's 0013.
CREATE INDEX calls_active_by_tenant ON calls (tenant_id, status) WHERE status = 'active';
