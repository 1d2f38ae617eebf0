-- One owner per call. Each `serve` process is a node: it registers under a fresh id and renews
-- `expires_at` (milliseconds since the Unix epoch, by the database's clock) on a heartbeat, one
-- row per node however many calls it serves. A node whose `expires_at` has passed is dead.
-- `address` is the base URL other nodes forward a call's requests to.
CREATE TABLE nodes (
    id          TEXT NOT NULL PRIMARY KEY,
    address     TEXT,
    started_at  TEXT NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX nodes_by_address ON nodes (address);

-- The call's owner and its fencing token: the token grows by one each time the call changes
-- owner, and every write of the call's journal names it, so a stale owner's write is refused.
-- `door` says how the call reaches the model (a Realtime call is re-attached by a new owner).
ALTER TABLE calls ADD COLUMN owner_node TEXT;
ALTER TABLE calls ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN door TEXT NOT NULL DEFAULT 'http' CHECK (door IN ('http', 'realtime'));
CREATE INDEX calls_active_by_owner ON calls (owner_node) WHERE status = 'active';

-- A function call claimed before it runs, until its record lands: no two nodes run one
-- function call, and a new owner reruns a claimed run that never reached an effect. The
-- invocation (the model's arguments) is sealed, bound to its row.
CREATE TABLE call_claims (
    tenant_id         TEXT NOT NULL,
    call_id           TEXT NOT NULL,
    function_call_id  TEXT NOT NULL,
    invocation        BLOB NOT NULL,
    fence             INTEGER NOT NULL,
    claimed_at        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, call_id, function_call_id),
    FOREIGN KEY (tenant_id, call_id) REFERENCES calls (tenant_id, id) ON DELETE CASCADE
) STRICT;
