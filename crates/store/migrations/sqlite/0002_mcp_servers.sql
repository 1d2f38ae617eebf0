-- MCP servers a tenant registered as tool sources. Keep in step with ../postgres/0002_mcp_servers.sql.
-- `config` is sealed JSON (the URL and headers, or the stdio command, arguments and environment):
-- URLs and headers carry tokens. What may be shown back is in clear: the transport, the endpoint
-- without path or credentials, and the names of the headers and environment variables.
-- `revision` grows on every change, so client sessions opened for an older one are replaced.
-- `tools` is the last `tools/list` answer (JSON), so calls can start while the server is down.
CREATE TABLE mcp_servers (
    tenant_id        TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    label            TEXT NOT NULL,
    transport        TEXT NOT NULL CHECK (transport IN ('http', 'stdio')),
    endpoint         TEXT NOT NULL,
    header_names     TEXT NOT NULL,
    config           BLOB NOT NULL,
    revision         INTEGER NOT NULL,
    tools            TEXT,
    tools_listed_at  TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, label)
) STRICT;
