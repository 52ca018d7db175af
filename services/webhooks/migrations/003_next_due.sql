-- When the worker next has an attempt due is read per subscription through delivery_due_idx (store.ts
-- nextDueInMs), which every pending delivery is in already: one index fewer to keep up on each
-- fan-out, claim record and replay.
DROP INDEX webhooks.delivery_next_due_idx;
