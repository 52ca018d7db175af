-- An attempt is logged once, when it ends: recordAttempts inserts its row with the outcome (it
-- used to be opened when its delivery was leased, with no duration, and closed by the record: an
-- insert, a foreign-key check and an update per attempt: 17% of the database's time per
-- delivery in a fan-out, claim and record loop, 202-247 -> 167-207 us). Every request sent is still counted before it goes: the
-- lease raises the delivery's attempt_count and sets `attempt_started_at`. An attempt whose sender
-- stopped before recording it is logged by whoever ends its lease: the claim that takes the
-- delivery over (as abandoned) or the stopping sender's release; both start from these two
-- columns. The delivery log lists ended attempts only, as before, so nothing it shows changes.
-- Rows opened before this migration are closed by the same paths (queue-store.ts logUnrecorded).
ALTER TABLE webhooks.delivery ADD COLUMN attempt_started_at timestamptz;
