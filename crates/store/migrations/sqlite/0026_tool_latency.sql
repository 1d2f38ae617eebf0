-- Each tool's observed latency as each node reports it (its p95 over its newest runs, and the
-- runs that covers), read back by every node for the adaptive policy. `updated_at` is epoch ms
-- on the database's clock; figures older than a day are dropped.
CREATE TABLE tool_latency (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    tool       TEXT NOT NULL,
    node_id    TEXT NOT NULL,
    p95_ms     BIGINT NOT NULL,
    samples    BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, tool, node_id)
);
