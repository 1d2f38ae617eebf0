-- Call ids are scoped by tenant: two tenants may use one call id, each with its own call
-- (context, records, checkpoints). The children gain `tenant_id` and reference the call by
-- (tenant_id, id).
ALTER TABLE call_invocations ADD COLUMN tenant_id TEXT COLLATE "C";
UPDATE call_invocations i SET tenant_id = c.tenant_id FROM calls c WHERE c.id = i.call_id;
ALTER TABLE call_invocations ALTER COLUMN tenant_id SET NOT NULL;
ALTER TABLE call_checkpoints ADD COLUMN tenant_id TEXT COLLATE "C";
UPDATE call_checkpoints k SET tenant_id = c.tenant_id FROM calls c WHERE c.id = k.call_id;
ALTER TABLE call_checkpoints ALTER COLUMN tenant_id SET NOT NULL;

ALTER TABLE call_invocations DROP CONSTRAINT call_invocations_call_id_fkey;
ALTER TABLE call_invocations DROP CONSTRAINT call_invocations_call_id_function_call_id_key;
ALTER TABLE call_checkpoints DROP CONSTRAINT call_checkpoints_call_id_fkey;
ALTER TABLE call_checkpoints DROP CONSTRAINT call_checkpoints_pkey;
ALTER TABLE calls DROP CONSTRAINT calls_pkey;

ALTER TABLE calls ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE call_invocations ADD UNIQUE (tenant_id, call_id, function_call_id);
ALTER TABLE call_invocations ADD FOREIGN KEY (tenant_id, call_id)
    REFERENCES calls (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE call_checkpoints ADD PRIMARY KEY (tenant_id, call_id, function_call_id);
ALTER TABLE call_checkpoints ADD FOREIGN KEY (tenant_id, call_id)
    REFERENCES calls (tenant_id, id) ON DELETE CASCADE;
