-- GPT-Live: a call's `door` may be `live` (a new owner re-attaches the session's sideband), and
-- an agent keeps its GPT-Live settings (`live`, JSON: model, voice_instructions,
-- backend_model, voice; NULL when unset).
ALTER TABLE agents ADD COLUMN live TEXT;
ALTER TABLE calls DROP CONSTRAINT IF EXISTS calls_door_check;
ALTER TABLE calls ADD CONSTRAINT calls_door_check CHECK (door IN ('http', 'realtime', 'live'));
