-- Alerts by email beside webhooks: each transition's notifications, one per channel of its rule
-- (`webhook`, `email`), each with its own delivery, lease and retries; and the rule's SMTP
-- password, sealed. Keep it in step with ../sqlite/0028_alert_channels.sql.

ALTER TABLE alert_rules ADD COLUMN smtp_password BYTEA;

-- One row per transition and channel: `pending` until `delivered` or `failed`; `next_at` when
-- it is due; `lease_until`/`lease_holder` the node sending it now.
CREATE TABLE alert_deliveries (
    tenant_id     TEXT COLLATE "C" NOT NULL,
    rule_id       TEXT COLLATE "C" NOT NULL,
    seq           BIGINT NOT NULL,
    channel       TEXT COLLATE "C" NOT NULL CHECK (channel IN ('webhook', 'email')),
    delivery      TEXT NOT NULL CHECK (delivery IN ('pending', 'delivered', 'failed')),
    attempts      BIGINT NOT NULL,
    next_at       TEXT COLLATE "C" NOT NULL,
    lease_until   TEXT COLLATE "C",
    lease_holder  TEXT COLLATE "C",
    last_error    TEXT,
    delivered_at  TEXT,
    PRIMARY KEY (tenant_id, rule_id, seq, channel),
    FOREIGN KEY (tenant_id, rule_id, seq) REFERENCES alert_events (tenant_id, rule_id, seq) ON DELETE CASCADE
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_at) WHERE delivery = 'pending';

-- Every notification so far was a webhook.
INSERT INTO alert_deliveries (tenant_id, rule_id, seq, channel, delivery, attempts, next_at,
                              lease_until, lease_holder, last_error, delivered_at)
SELECT tenant_id, rule_id, seq, 'webhook', delivery, attempts, next_at, lease_until, lease_holder,
       last_error, delivered_at
FROM alert_events;

DROP INDEX alert_events_due;
ALTER TABLE alert_events
    DROP COLUMN delivery,
    DROP COLUMN attempts,
    DROP COLUMN next_at,
    DROP COLUMN lease_until,
    DROP COLUMN lease_holder,
    DROP COLUMN last_error,
    DROP COLUMN delivered_at;
