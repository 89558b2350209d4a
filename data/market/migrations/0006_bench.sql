-- Version 6: measured figures of the GPUs (issue #16, part 2; docs/market.md, "Measured figures"). The node
-- agent PUTs the calibration file `gpuplan bench` wrote for one of its GPUs (or one MIG profile of it);
-- the live offers of that GPU carry the summary. Statements end with ";" at the end of a line; no ";"
-- inside string literals.

-- One row per (GPU, MIG profile measured; '' for the whole GPU): the last bench, replacing the one before.
-- No foreign key to gpus: a node's removal deletes its gpus rows, and offers join gpus, so the bench of
-- a GPU that is gone is never shown.
CREATE TABLE gpu_bench (
  gpu_id TEXT NOT NULL,
  profile TEXT NOT NULL,
  measured_at TEXT NOT NULL,              -- the file's created_at, RFC 3339 UTC
  measured_at_ms BIGINT NOT NULL,
  received_at BIGINT NOT NULL,            -- Unix ms of the PUT
  bf16_dense_tflops DOUBLE PRECISION,     -- NULL: bf16 not measured
  bf16_ratio DOUBLE PRECISION,            -- / the catalog's dense bf16 peak
  memory_gbps DOUBLE PRECISION,           -- NULL: no large-size memory point
  memory_ratio DOUBLE PRECISION,          -- / the catalog's peak bandwidth
  pcie_gen BIGINT,
  pcie_width BIGINT,
  driver_version TEXT,
  efficiency TEXT NOT NULL,               -- the fitted curves as `--efficiency` text
  calibration TEXT NOT NULL,              -- the file as received (at most 4 MiB)
  PRIMARY KEY (gpu_id, profile)
);
