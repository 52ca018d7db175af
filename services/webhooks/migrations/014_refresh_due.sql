-- A claim's refresh of subscription_due (queue-store.ts refreshDue) in one call instead of a
-- transaction of its own (BEGIN, the due locks, the update, COMMIT: four round trips after every
-- claim round). A function, VOLATILE, for the reason bring_due_forward is one (migration 010): its
-- update must read a snapshot taken after the due locks, so that a writer that made a delivery due
-- either committed before (and is seen), still holds its lock (the subscription is skipped), or
-- brings the row forward afterwards. Only where no writer holds the due lock; never waits for one.
-- Called on its own, the locks last to the end of that statement's transaction.
--
-- Each visited subscription's scan_from moves to its soonest pending delivery; a drained one's
-- due_at to when it may next have work (its first `head` pending deliveries bound it: more than can
-- be leased at once, so the first unleased one is among them, and past them the last one's due
-- time bounds the rest); a throttled one waits for the next second of the database's clock. A
-- disabled subscription's held deliveries are no work, even those a late record scheduled. The due
-- expression is delivery_due_idx's, word for word.
CREATE FUNCTION webhooks.refresh_due(visited uuid[], drained uuid[], head int, throttled uuid[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  locked uuid[];
BEGIN
  SELECT array_agg(v) INTO locked FROM unnest(visited) AS v
   WHERE pg_try_advisory_xact_lock(hashtext('webhooks.subscription_due'), hashtext(v::text));
  IF locked IS NULL THEN
    RETURN;
  END IF;
  UPDATE webhooks.subscription_due AS q
     SET scan_from = COALESCE((
           SELECT (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END)
             FROM webhooks.delivery x
            WHERE x.subscription_id = q.subscription_id AND x.status = 'pending'
              AND (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END) >= q.scan_from
              AND (x.manual_queued > 0 OR NOT s.disabled)
            ORDER BY (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END)
            LIMIT 1), 'infinity'),
         due_at = GREATEST(CASE WHEN q.subscription_id <> ALL (drained) THEN q.due_at ELSE (
           SELECT CASE WHEN count(*) = 0 THEN 'infinity'::timestamptz
                       ELSE LEAST(min(GREATEST(h.due, COALESCE(h.lease_expires_at, '-infinity'))),
                                  CASE WHEN count(*) = head THEN max(h.due) END)
                  END
             FROM (SELECT (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END) AS due,
                          x.lease_expires_at
                     FROM webhooks.delivery x
                    WHERE x.subscription_id = q.subscription_id AND x.status = 'pending'
                      AND (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END) >= q.scan_from
                      AND (x.manual_queued > 0 OR NOT s.disabled)
                    ORDER BY (CASE WHEN x.manual_queued > 0 THEN '-infinity'::timestamptz ELSE x.next_attempt_at END)
                    LIMIT head) h) END,
           CASE WHEN q.subscription_id = ANY (throttled) THEN to_timestamp(floor(EXTRACT(EPOCH FROM now())) + 1) END)
    FROM webhooks.subscription s
   WHERE q.subscription_id = ANY (locked) AND s.subscription_id = q.subscription_id;
END $$;
