-- Version 4: the node agent (issue #15, part 1; docs/market.md, "The node agent"): enrolment, the agent's
-- token, the last report (sequence number, boot id), heartbeats and loss, and what the last inventory said
-- about each GPU. Statements end with ";" at the end of a line; no ";" inside string literals.
-- The hand-off outbox (a later part) is a table of its own keyed by (rental_id, generation), written in
-- the rental's transaction; nothing here needs to change for it.

-- One row per node that has (or had) an enrolment token. Digests are lowercase hex SHA-256; the secrets
-- themselves are shown once and never stored.
CREATE TABLE node_agents (
  node_id TEXT PRIMARY KEY REFERENCES nodes (id),
  enroll_sha256 TEXT,                         -- the pending one-time enrolment token; NULL once used
  enroll_expires_at BIGINT,
  token_id TEXT UNIQUE,                       -- public part of the agent token "gpa_<id>_<secret>"
  token_sha256 TEXT,                          -- NULL until the agent enrolled
  boot_id TEXT,                               -- the boot id of the last accepted inventory
  seq BIGINT NOT NULL DEFAULT 0,              -- the highest sequence number accepted: older reports are fenced
  driver_version TEXT,
  features_off TEXT,                          -- comma-separated NVML features the agent turned off
  last_heartbeat_at BIGINT,                   -- Unix ms of the last accepted report
  lost_at BIGINT,                             -- set when three heartbeats were missed; NULL while alive
  created_at BIGINT NOT NULL
);

-- What the agent's last inventory said about a GPU. unsellable_reason NULL: it may be placed on; else the
-- reason it may not (a name the catalog does not know, missing from the last inventory).
ALTER TABLE gpus ADD COLUMN unsellable_reason TEXT;
ALTER TABLE gpus ADD COLUMN reported_name TEXT;
ALTER TABLE gpus ADD COLUMN pci_bus_id TEXT;
ALTER TABLE gpus ADD COLUMN memory_bytes BIGINT;
ALTER TABLE gpus ADD COLUMN mig_mode TEXT;
ALTER TABLE gpus ADD COLUMN reported_instances TEXT;  -- canonical "profile@start,..." of the last inventory
