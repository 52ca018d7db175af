-- The delivery log in partitions, so that its retention drops a day's rows whole instead of
-- deleting them one by one (decisions.md §6.1 "Retention": dropping old rows costs the same however
-- large the log is; npm run bench scale). The layout is the one Oban Pro's partitioned queues use:
--
--   webhooks.delivery            LIST (status)
--     delivery_pending           'pending': what the worker claims, leases and records; small, hot
--     delivery_ended             'succeeded', 'failed': RANGE (delivery_id), a partition a UTC day
--       delivery_ended_YYYYMMDD  the deliveries created that day (their ids are UUID v7, migration 009)
--       delivery_ended_default   ids no day partition covers: version 4 ids from before 009, or a day
--                                whose partition was missing (the retention worker makes them ahead)
--   webhooks.attempt             RANGE (delivery_id), the same days and a default
--
-- The worker's claims, leases, releases and refreshes name status = 'pending' and so read
-- delivery_pending alone, however many days the log holds; its record reads every day (a late
-- record logs an attempt of an ended delivery), one probe by id in each. A delivery moves from delivery_pending to its day's partition
-- when it ends (recordAttempts' update), and back when a manual replay makes it pending again; its
-- attempts stay in their day's partition throughout, since the id never changes. Postgres refuses
-- with 40001 a statement that would lock a row a concurrent transaction moved to another partition
-- (it cannot follow it): the paths where that can happen run again (lib/db/errors.ts
-- retryingSerializationFailure).
--
-- A day is dropped (webhooks.drop_log_day) once none of its deliveries is pending and all ended
-- more than the window ago; the retention worker (log-retention.ts) makes the coming days' partitions
-- and deletes row by row only what a day that cannot be dropped still holds past its grace, and the
-- default partitions' rows.

-- The smallest UUID v7 of the millisecond `at`: the bound between two days' partitions.
CREATE FUNCTION webhooks.uuid7_floor(at timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT encode(substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3) || '\x00000000000000000000'::bytea,
                'hex')::uuid
$$;

-- The UTC day a UUID v7 was made on; null for any other version.
CREATE FUNCTION webhooks.uuid7_day(id uuid) RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN substr(id::text, 15, 1) = '7' THEN
    (to_timestamp(('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint / 1000.0)
       AT TIME ZONE 'UTC')::date
  END
$$;

-- The same columns, defaults and checks, under the same names.
CREATE TABLE webhooks.delivery_partitioned (LIKE webhooks.delivery INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY LIST (status);
-- Room for the lease's heap-only updates (002), where the rows are leased.
CREATE TABLE webhooks.delivery_pending PARTITION OF webhooks.delivery_partitioned
  FOR VALUES IN ('pending') WITH (fillfactor = 70);
CREATE TABLE webhooks.delivery_ended PARTITION OF webhooks.delivery_partitioned
  FOR VALUES IN ('succeeded', 'failed') PARTITION BY RANGE (delivery_id);
CREATE TABLE webhooks.delivery_ended_default PARTITION OF webhooks.delivery_ended DEFAULT;

CREATE TABLE webhooks.attempt_partitioned (LIKE webhooks.attempt INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY RANGE (delivery_id);
CREATE TABLE webhooks.attempt_default PARTITION OF webhooks.attempt_partitioned DEFAULT;

-- Makes day `day`'s (UTC) partitions of the ended deliveries and of the attempts unless they exist;
-- true when it made them. Postgres refuses (23514) while a default partition holds a row of that day.
CREATE FUNCTION webhooks.create_log_day(day date) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo uuid := webhooks.uuid7_floor(day::timestamp AT TIME ZONE 'UTC');
  hi uuid := webhooks.uuid7_floor((day + 1)::timestamp AT TIME ZONE 'UTC');
BEGIN
  -- One replica at a time makes or drops days: the other waits, then finds the day made or gone.
  PERFORM pg_advisory_xact_lock(hashtext('webhooks.log_days'));
  IF to_regclass('webhooks.delivery_ended_' || suffix) IS NOT NULL THEN
    RETURN false;
  END IF;
  EXECUTE format('CREATE TABLE webhooks.%I PARTITION OF webhooks.delivery_ended FOR VALUES FROM (%L) TO (%L)',
                 'delivery_ended_' || suffix, lo, hi);
  EXECUTE format('CREATE TABLE webhooks.%I PARTITION OF webhooks.attempt FOR VALUES FROM (%L) TO (%L)',
                 'attempt_' || suffix, lo, hi);
  RETURN true;
END $$;

-- The days that have partitions, oldest first.
CREATE FUNCTION webhooks.log_days() RETURNS SETOF date LANGUAGE sql STABLE AS $$
  SELECT to_date(substr(c.relname, length('delivery_ended_') + 1), 'YYYYMMDD')
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'webhooks.delivery_ended'::regclass AND c.relname ~ '^delivery_ended_[0-9]{8}$'
   ORDER BY 1
$$;

-- Drops day `day`'s partitions when none of its deliveries is pending and every one of them ended
-- before `cutoff`; true when it dropped them. Checked once without locks (a day that must stay costs
-- two index probes, and takes nothing from the queries), then again under the locks the drop takes
-- anyway, the parents' first (as a drop takes them), so that no delivery of the day moves between the
-- check and the drop: a manual replay, the one move out of an ended day, must lock the partition.
-- The caller bounds the wait with lock_timeout: queries queue behind a lock that waits.
CREATE FUNCTION webhooks.drop_log_day(day date, cutoff timestamptz) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  suffix text := to_char(day, 'YYYYMMDD');
  lo uuid := webhooks.uuid7_floor(day::timestamp AT TIME ZONE 'UTC');
  hi uuid := webhooks.uuid7_floor((day + 1)::timestamp AT TIME ZONE 'UTC');
  held boolean;
BEGIN
  FOR pass IN 1..2 LOOP
    IF pass = 2 THEN
      PERFORM pg_advisory_xact_lock(hashtext('webhooks.log_days'));
      IF to_regclass('webhooks.delivery_ended_' || suffix) IS NULL THEN
        RETURN false;
      END IF;
      EXECUTE format('LOCK TABLE webhooks.delivery_ended, webhooks.attempt, webhooks.%I, webhooks.%I IN ACCESS EXCLUSIVE MODE',
                     'delivery_ended_' || suffix, 'attempt_' || suffix);
    ELSIF to_regclass('webhooks.delivery_ended_' || suffix) IS NULL THEN
      RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM webhooks.delivery_pending WHERE delivery_id >= lo AND delivery_id < hi) THEN
      RETURN false;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM webhooks.%I WHERE updated_at >= $1)', 'delivery_ended_' || suffix)
       INTO held USING cutoff;
    IF held THEN
      RETURN false;
    END IF;
  END LOOP;
  EXECUTE format('DROP TABLE webhooks.%I, webhooks.%I', 'delivery_ended_' || suffix, 'attempt_' || suffix);
  RETURN true;
END $$;

-- The log as it is, into days of its own: today's and the next two, and every day a delivery holds.
ALTER TABLE webhooks.attempt RENAME TO attempt_unpartitioned;
ALTER TABLE webhooks.attempt_partitioned RENAME TO attempt;
SELECT webhooks.create_log_day(d)
  FROM (SELECT DISTINCT webhooks.uuid7_day(delivery_id) AS d FROM webhooks.delivery
        UNION SELECT (now() AT TIME ZONE 'UTC')::date + n FROM generate_series(0, 2) n) days
 WHERE d IS NOT NULL;

INSERT INTO webhooks.delivery_partitioned SELECT * FROM webhooks.delivery;
INSERT INTO webhooks.attempt SELECT * FROM webhooks.attempt_unpartitioned;
DROP TABLE webhooks.attempt_unpartitioned;
DROP TABLE webhooks.delivery;
ALTER TABLE webhooks.delivery_partitioned RENAME TO delivery;

-- The indexes of 001-014, each where its rows are. A delivery's id is the primary key of the pending
-- deliveries and of the ended ones, not of the two together (that key would have to hold the status):
-- the fan-out makes ids unique (webhooks.uuid7), and a row moves between the two, never copied. Keyed by
-- the id alone, the planner knows a lookup by id finds one row in each (keyed with the status, it
-- hashed the whole log to record a batch of attempts).
ALTER TABLE webhooks.delivery_pending ADD CONSTRAINT delivery_pending_pkey PRIMARY KEY (delivery_id);
ALTER TABLE webhooks.delivery_ended ADD CONSTRAINT delivery_ended_pkey PRIMARY KEY (delivery_id);
ALTER TABLE webhooks.attempt ADD CONSTRAINT attempt_pkey PRIMARY KEY (delivery_id, attempt);
CREATE INDEX delivery_log_idx ON webhooks.delivery (subscription_id, created_at DESC, delivery_id DESC);
CREATE INDEX delivery_due_idx ON webhooks.delivery_pending
  (subscription_id, (CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END), delivery_id);
-- When each delivery of a day ended, for drop_log_day and for the rows deleted one by one.
CREATE INDEX delivery_ended_idx ON webhooks.delivery_ended (updated_at);

-- The refresh reads each subscription's first pending deliveries in the due index's order and stops
-- there; a bitmap scan (which the planner picks on a partition it has no statistics of yet) reads
-- every entry of the subscription instead, those of deliveries long moved out among them, and never
-- marks them dead for the next scan: 35 ms a call after 100 000 deliveries (npm run bench webhooks).
ALTER FUNCTION webhooks.refresh_due(uuid[], uuid[], int, uuid[]) SET enable_bitmapscan = off;
