-- Version 3: when each target was last available (issue #14: the catalog's `last_available_at`).
-- Statements end with ";" at the end of a line; no ";" inside string literals.

-- One row per (target, region): the last instant a unit of the target (a GPU or a MIG profile,
-- canonical) was known free there. Every placement writes it, in its own transaction, for each target
-- sold on the GPUs it placed on that still had a unit free just before it took them; so a sell-out by
-- a rental leaves the instant just before it. Times are Unix ms.
CREATE TABLE target_last_available (
  target TEXT NOT NULL,
  region TEXT NOT NULL,
  at BIGINT NOT NULL,
  PRIMARY KEY (target, region)
);
