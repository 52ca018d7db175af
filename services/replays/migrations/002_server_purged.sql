-- Servers purged (servers.server.purged): their projection row is deleted, and their id kept here so
-- that a created or connected event of the same server arriving late (subjects are consumed
-- independently) cannot bring it back.
CREATE TABLE replays.server_purged (
  server_id uuid PRIMARY KEY,
  purged_at timestamptz NOT NULL DEFAULT now()
);
