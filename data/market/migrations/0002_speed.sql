-- Version 2: what keeps the market's hot paths off full scans (docs/market.md, "Speed").
-- Statements end with ";" at the end of a line; no ";" inside string literals.

-- One row: bumped by every write transaction that changes inventory, claims or offers. A server
-- process keeps its view of live offers while this number stays the same, and rebuilds it when
-- another process (or itself) wrote: one single-row read per list instead of a scan of GPUs and claims.
CREATE TABLE market_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version BIGINT NOT NULL
);
INSERT INTO market_version (id, version) VALUES (1, 0);

-- A final rental's charge (terminated or failed: no segment can open again), written by the
-- transition into the final state. The credit check sums these in SQL and computes only the rentals
-- still NULL (live, stopped, or final before this migration) from their segments.
ALTER TABLE rentals ADD COLUMN final_charge_micros BIGINT;
