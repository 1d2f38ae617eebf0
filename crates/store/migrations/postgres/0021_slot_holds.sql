-- Short-lived holds on calendar slots, taken before a booking writes to the calendar, so two
-- bookings of overlapping times on any nodes sharing this database never both reach it. A hold
-- is one booking's interval on one calendar (`calendar`: a hash naming the calendar, never its
-- URL or id in clear); it is released when the booking ends, and one left by a node that died
-- expires at `expires_at` (epoch ms, the database's clock).
CREATE TABLE slot_holds (
    tenant_id  TEXT COLLATE "C" NOT NULL,
    calendar   TEXT COLLATE "C" NOT NULL,
    holder     TEXT COLLATE "C" NOT NULL,
    starts_at  BIGINT NOT NULL,
    ends_at    BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, calendar, holder)
);
CREATE INDEX slot_holds_by_time ON slot_holds (tenant_id, calendar, starts_at);

-- One row per calendar that has had a hold, locked by each hold's transaction (PostgreSQL),
-- so two holds on one calendar are decided one after the other and the overlap check inside
-- each sees the other. SQLite's write lock does the same; the table exists on both so the
-- statements are the same.
CREATE TABLE slot_hold_calendars (
    tenant_id TEXT COLLATE "C" NOT NULL,
    calendar  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, calendar)
);
