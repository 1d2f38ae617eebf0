-- Alerts: a tenant's rules, each rule's transitions (its history, and the outbox of their
-- notifications), and what nodes report that the store cannot see (a circuit breaker opening).
-- Keep it in step with ../sqlite/0023_alerts.sql. Stamps are the database's clock, as text.

-- `definition` is the checked rule (JSON: kind, its fields, the webhook URL); `secret` the
-- rule's Standard Webhooks secret, sealed. `state` is `ok` or `firing`; `transitions` counts
-- its changes: a node moves a rule only from the `transitions` it read (compare-and-set), so
-- of nodes seeing one change, one records it. `uid` is fresh per rule, so a rule deleted and
-- made again under its name never repeats a webhook-id.
CREATE TABLE alert_rules (
    tenant_id    TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           TEXT COLLATE "C" NOT NULL,
    uid          TEXT COLLATE "C" NOT NULL UNIQUE,
    definition   TEXT NOT NULL,
    secret       BYTEA NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('ok', 'firing')),
    transitions  BIGINT NOT NULL,
    created_at   TEXT NOT NULL,
    changed_at   TEXT,
    PRIMARY KEY (tenant_id, id)
);

-- One row per transition (`seq` is the rule's `transitions` after it): what was seen, and its
-- notification's delivery (`pending` until `delivered` or `failed`; `next_at` when it is due;
-- `lease_until`/`lease_holder` the node sending it now).
CREATE TABLE alert_events (
    tenant_id     TEXT COLLATE "C" NOT NULL,
    rule_id       TEXT COLLATE "C" NOT NULL,
    seq           BIGINT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('firing', 'resolved')),
    at            TEXT COLLATE "C" NOT NULL,
    detail        TEXT NOT NULL,
    delivery      TEXT NOT NULL CHECK (delivery IN ('pending', 'delivered', 'failed')),
    attempts      BIGINT NOT NULL,
    next_at       TEXT COLLATE "C" NOT NULL,
    lease_until   TEXT COLLATE "C",
    lease_holder  TEXT COLLATE "C",
    last_error    TEXT,
    delivered_at  TEXT,
    PRIMARY KEY (tenant_id, rule_id, seq),
    FOREIGN KEY (tenant_id, rule_id) REFERENCES alert_rules (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX alert_events_due ON alert_events (next_at) WHERE delivery = 'pending';
CREATE INDEX alert_events_newest ON alert_events (tenant_id, at);

-- A circuit breaker that opened on some node (breakers live in each node's memory): the
-- newest opening per tenant, upstream and node.
CREATE TABLE alert_signals (
    tenant_id  TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind       TEXT COLLATE "C" NOT NULL,
    subject    TEXT COLLATE "C" NOT NULL,
    node_id    TEXT COLLATE "C" NOT NULL,
    at         TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, kind, subject, node_id)
);

-- A tenant's invocations in a time window (failure rate and latency rules), newest first.
CREATE INDEX call_invocations_by_time ON call_invocations (tenant_id, created_at);
