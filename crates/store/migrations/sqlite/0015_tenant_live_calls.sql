-- Each tenant keeps its live calls in `live_calls`, moved by triggers on every insert, end and
-- delete of a call, so a call's start reads one number under the write lock instead of counting
-- the tenant's live calls there, a cost that grew with them while every writer of the process
-- waited.
-- Keep it in step with ../postgres/0015_tenant_live_calls.sql.
ALTER TABLE tenants ADD COLUMN live_calls INTEGER NOT NULL DEFAULT 0;
UPDATE tenants
   SET live_calls = (SELECT COUNT(*) FROM calls
                      WHERE calls.tenant_id = tenants.id AND calls.status = 'active');

CREATE TRIGGER calls_count_live_insert AFTER INSERT ON calls WHEN NEW.status = 'active'
BEGIN
    UPDATE tenants SET live_calls = live_calls + 1 WHERE id = NEW.tenant_id;
END;

CREATE TRIGGER calls_count_live_delete AFTER DELETE ON calls WHEN OLD.status = 'active'
BEGIN
    UPDATE tenants SET live_calls = live_calls - 1 WHERE id = OLD.tenant_id;
END;

CREATE TRIGGER calls_count_live_update AFTER UPDATE OF status, tenant_id ON calls
    WHEN OLD.status IS NOT NEW.status OR OLD.tenant_id IS NOT NEW.tenant_id
BEGIN
    UPDATE tenants SET live_calls = live_calls - 1
     WHERE id = OLD.tenant_id AND OLD.status = 'active';
    UPDATE tenants SET live_calls = live_calls + 1
     WHERE id = NEW.tenant_id AND NEW.status = 'active';
END;
