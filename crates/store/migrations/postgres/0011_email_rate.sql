-- The per-tenant email send rate, shared by every node on this database. One row per tenant:
-- `tat` (epoch ms) is the rate's theoretical arrival time (GCRA): each send moves it one
-- interval (a minute divided by the sends allowed per minute) past max(tat, now), and a send is
-- refused when that would put it more than a minute ahead of now.
CREATE TABLE email_rate (
    tenant_id TEXT COLLATE "C" PRIMARY KEY,
    tat       BIGINT NOT NULL
);

-- Sends already counted, by idempotency key, so a retried send is not counted twice. Kept an
-- hour (pruned on the tenant's next send).
CREATE TABLE email_sends (
    tenant_id TEXT COLLATE "C" NOT NULL,
    send_key  TEXT COLLATE "C" NOT NULL,
    sent_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, send_key)
);
CREATE INDEX email_sends_by_age ON email_sends (tenant_id, sent_at);
