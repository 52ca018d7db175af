-- What every write that makes deliveries due does to subscription_due (queue-store.ts
-- bringDueForward calls it from the write's own statement). A function, VOLATILE, because each of
-- its statements then reads a snapshot of its own, taken after the one before: the subscription's
-- due lock is taken first (shared: writers never wait for one another, only for a refreshDue that
-- holds it), and only then is each row read and brought forward. Decided in the write's own
-- statement, on the snapshot it began with, a row a refresh moved on meanwhile was read as it was
-- before and left where the refresh put it, past the write's deliveries. Rows that move are locked
-- in subscription order first, so two writers never deadlock.
CREATE FUNCTION webhooks.bring_due_forward(subs uuid[], dues timestamptz[], scans timestamptz[])
RETURNS SETOF webhooks.subscription_due LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF subs IS NULL THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock_shared(hashtext('webhooks.subscription_due'), hashtext(s::text))
     FROM unnest(subs) AS s;
  INSERT INTO webhooks.subscription_due (subscription_id, due_at, scan_from)
  SELECT n.sub, n.due, n.scan FROM unnest(subs, dues, scans) AS n(sub, due, scan)
   ORDER BY n.sub
  ON CONFLICT (subscription_id) DO NOTHING;
  PERFORM 1 FROM webhooks.subscription_due q JOIN unnest(subs, dues, scans) AS n(sub, due, scan)
               ON q.subscription_id = n.sub
   WHERE q.due_at > n.due OR q.scan_from > n.scan
   ORDER BY q.subscription_id
     FOR NO KEY UPDATE OF q;
  UPDATE webhooks.subscription_due q
     SET due_at = LEAST(q.due_at, n.due), scan_from = LEAST(q.scan_from, n.scan)
    FROM unnest(subs, dues, scans) AS n(sub, due, scan)
   WHERE q.subscription_id = n.sub AND (q.due_at > n.due OR q.scan_from > n.scan);
END $$;
