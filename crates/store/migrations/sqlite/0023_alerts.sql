-- Alerts: a tenant's rules, each rule's transitions (its history, and the outbox of their
-- notifications), and what nodes report that the store cannot see (a circuit breaker opening).
-- Keep it in step with ../postgres/0023_alerts.sql. Stamps are the database's clock, as text.

-- `definition` is the checked rule (JSON: kind, its fields, the webhook URL); `secret` the
-- rule's Standard Webhooks secret, sealed. `state` is `ok` or `firing`; `transitions` counts
-- its changes: a node moves a rule only from the `transitions` it read (compare-and-set), so
-- of nodes seeing one change, one records it. `uid` is fresh per rule, so a rule deleted and
-- made again under its name never repeats a webhook-id.
CREATE TABLE alert_rules (
    tenant_id    TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           TEXT NOT NULL,
    uid          TEXT NOT NULL UNIQUE,
    definition   TEXT NOT NULL,
    secret       BLOB NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('ok', 'firing')),
    transitions  INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    changed_at   TEXT,
    PRIMARY KEY (tenant_id, id)
) STRICT;

-- One row per transition (`seq` is the rule's `transitions` after it): what was seen, and its
-- notification's delivery (`pending` until `delivered` or `failed`; `next_at` when it is due;
-- `lease_until`/`lease_holder` the node sending it now).
CREATE TABLE alert_events (
    tenant_id     TEXT NOT NULL,
    rule_id       TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('firing', 'resolved')),
    at            TEXT NOT NULL,
    detail        TEXT NOT NULL,
    delivery      TEXT NOT NULL CHECK (delivery IN ('pending', 'delivered', 'failed')),
    attempts      INTEGER NOT NULL,
    next_at       TEXT NOT NULL,
    lease_until   TEXT,
    lease_holder  TEXT,
    last_error    TEXT,
    delivered_at  TEXT,
    PRIMARY KEY (tenant_id, rule_id, seq),
    FOREIGN KEY (tenant_id, rule_id) REFERENCES alert_rules (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE INDEX alert_events_due ON alert_events (next_at) WHERE delivery = 'pending';
CREATE INDEX alert_events_newest ON alert_events (tenant_id, at);

-- A circuit breaker that opened on some node (breakers live in each node's memory): the
-- newest opening per tenant, upstream and node.
CREATE TABLE alert_signals (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    node_id    TEXT NOT NULL,
    at         TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, subject, node_id)
) STRICT;

-- A tenant's invocations in a time window (failure rate and latency rules), newest first.
CREATE INDEX call_invocations_by_time ON call_invocations (tenant_id, created_at);
