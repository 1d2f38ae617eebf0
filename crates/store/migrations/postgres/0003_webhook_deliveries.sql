-- Webhook deliveries already taken, by their `webhook-id`: a sender that retries (OpenAI does,
-- for up to 72 hours) gets its repeat acknowledged without a second call being accepted.
CREATE TABLE webhook_deliveries (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    webhook_id  TEXT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, webhook_id)
);
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);
