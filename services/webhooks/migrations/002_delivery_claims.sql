-- Claims count a subscription's deliveries in flight in the worker's memory, per replica, instead of
-- counting leased rows: that count read every dead index entry the claims and records left behind
-- (thousands of heap blocks per claim under load). Without the index, a claim touches no indexed
-- column, so with room left on each page its lease update is a HOT update that adds no index entry.
DROP INDEX webhooks.delivery_leased_idx;
ALTER TABLE webhooks.delivery SET (fillfactor = 70);
