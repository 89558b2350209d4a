-- Version 5: the hand-off outbox (issue #15, part 2; docs/market.md, "The outbox"), the node's scheduler
-- (Slurm-managed nodes) and the SSH endpoint a provider declares. Portable subset of SQLite 3.40 and
-- PostgreSQL 15, as 0001. Statements end with ";" at the end of a line; no ";" inside string literals.

-- One row per thing to hand to an engine: written in the SAME transaction as the rental's transition
-- (reserved: apply; stopped: stop; terminated or failed: delete), delivered by Market::deliver_outbox
-- after the transaction committed, marked delivered after the target answered. The key is what makes a
-- delivery idempotent: the target's names derive from (rental_id, generation).
CREATE TABLE outbox (
  rental_id TEXT NOT NULL REFERENCES rentals (id),
  generation BIGINT NOT NULL,                 -- the rental's version when the apply was written
  action TEXT NOT NULL CHECK (action IN ('apply', 'stop', 'delete')),
  target_kind TEXT NOT NULL,                  -- 'slurm', 'kubernetes' (a node's scheduler)
  node_id TEXT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,         -- deliveries started (a lease counts: a crash mid-delivery too)
  next_attempt_at BIGINT NOT NULL,            -- Unix ms: due then (a lease or a backoff pushes it on)
  delivered_at BIGINT,                        -- NULL until the target answered and this row was marked
  gave_up_at BIGINT,                          -- an apply that failed kMaxApplyAttempts times (rental failed)
  last_error TEXT,
  external_id TEXT,                           -- what the target answered: the Slurm job id, the Pod's name
  created_at BIGINT NOT NULL,
  PRIMARY KEY (rental_id, generation, action)
);
CREATE INDEX outbox_pending ON outbox (delivered_at, next_attempt_at);

-- Who runs the node's workloads: 'manual' (nothing: the hand-off is immediate), 'slurm', 'kubernetes'.
ALTER TABLE nodes ADD COLUMN scheduler TEXT NOT NULL DEFAULT 'manual';
ALTER TABLE nodes ADD COLUMN slurm_partition TEXT;
ALTER TABLE nodes ADD COLUMN slurm_node TEXT;  -- the node's Slurm NodeName; NULL: its gpuplan name
ALTER TABLE nodes ADD COLUMN ssh TEXT;         -- "user@host:port" the renter reaches a manual node at
