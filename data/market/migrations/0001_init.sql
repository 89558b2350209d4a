-- The market's schema, version 1. ONE file for both engines: the portable subset of SQLite 3.40 and
-- PostgreSQL 15. Ids are TEXT, times BIGINT Unix milliseconds, money BIGINT micro-units of the currency,
-- token digests SHA-256 as lowercase hex TEXT (no BLOB/BYTEA split). Applied by migrate()
-- (src/market/migrations.cc), one transaction per file, recorded in schema_migrations.
-- Statements end with ";" at the end of a line; no ";" inside string literals.

CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('renter', 'provider', 'platform')),
  credit_limit_micros BIGINT,                 -- NULL: unlimited
  created_at BIGINT NOT NULL
);

CREATE TABLE users (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants (id),
  name TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  created_at BIGINT NOT NULL,
  UNIQUE (tenant_id, name)
);

CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,                        -- public part of "gpl_<id>_<secret>"
  user_id TEXT NOT NULL REFERENCES users (id),
  secret_sha256 TEXT NOT NULL,                -- hex SHA-256 of the whole token; compared in constant time
  scope TEXT NOT NULL CHECK (scope IN ('full', 'read')),
  created_at BIGINT NOT NULL,
  expires_at BIGINT,                          -- NULL: never
  revoked_at BIGINT                           -- NULL: valid
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE nodes (
  id TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL REFERENCES tenants (id),
  name TEXT NOT NULL,
  region TEXT NOT NULL,
  interconnect TEXT NOT NULL CHECK (interconnect IN ('nvlink', 'pcie')),
  vcpus BIGINT NOT NULL,
  ram_gb BIGINT NOT NULL,
  disk_gb BIGINT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('ready', 'draining')),
  created_at BIGINT NOT NULL,
  UNIQUE (provider_id, name)
);

CREATE TABLE gpus (
  id TEXT PRIMARY KEY,
  node_id TEXT NOT NULL REFERENCES nodes (id),
  idx INTEGER NOT NULL,
  uuid TEXT NOT NULL UNIQUE,
  catalog_id TEXT NOT NULL,                   -- canonical catalog GPU id
  mig_policy TEXT NOT NULL CHECK (mig_policy IN ('none', 'static', 'dynamic')),
  mig_layout TEXT,                            -- static: "profile@start,..."; else NULL
  mem_slices INTEGER NOT NULL CHECK (mem_slices BETWEEN 1 AND 8),   -- 8 A100/H100/H200, 4 A30, 1 without MIG
  UNIQUE (node_id, idx)
);

CREATE TABLE offers (
  id TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL REFERENCES tenants (id),
  target TEXT NOT NULL,                       -- canonical: 'a100-80gb-sxm4' or 'a100-80gb-sxm4/1g.10gb'
  catalog_id TEXT NOT NULL,
  profile TEXT,                               -- NULL for whole GPUs
  gpus INTEGER NOT NULL CHECK (gpus IN (1, 2, 4, 8)),
  region TEXT NOT NULL,
  price_micros_per_hour BIGINT NOT NULL CHECK (price_micros_per_hour > 0),
  min_billable_seconds BIGINT NOT NULL DEFAULT 0 CHECK (min_billable_seconds >= 0),
  active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
  created_at BIGINT NOT NULL
);
CREATE INDEX offers_provider ON offers (provider_id);

CREATE TABLE templates (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  image TEXT NOT NULL,
  command TEXT NOT NULL,
  description TEXT NOT NULL
);
INSERT INTO templates (id, name, image, command, description) VALUES
  ('tpl_pytorch', 'pytorch', 'nvcr.io/nvidia/pytorch:24.10-py3', 'jupyter lab --ip=0.0.0.0 --no-browser',
   'PyTorch with CUDA, cuDNN and NCCL (NVIDIA NGC container), JupyterLab on start'),
  ('tpl_tensorflow', 'tensorflow', 'nvcr.io/nvidia/tensorflow:24.10-tf2-py3', 'jupyter lab --ip=0.0.0.0 --no-browser',
   'TensorFlow 2 with CUDA and cuDNN (NVIDIA NGC container), JupyterLab on start'),
  ('tpl_cuda', 'cuda', 'nvcr.io/nvidia/cuda:12.6.2-devel-ubuntu22.04', 'sleep infinity',
   'Plain CUDA 12.6 toolkit on Ubuntu 22.04: bring your own workload');

CREATE TABLE rentals (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants (id),
  created_by TEXT NOT NULL REFERENCES users (id),
  offer_id TEXT NOT NULL REFERENCES offers (id),
  provider_id TEXT NOT NULL REFERENCES tenants (id),
  target TEXT NOT NULL,
  units INTEGER NOT NULL CHECK (units >= 1),
  price_micros_per_hour BIGINT NOT NULL,      -- frozen at reservation (offer price x units)
  min_billable_seconds BIGINT NOT NULL,       -- frozen at reservation
  template_id TEXT REFERENCES templates (id),
  state TEXT NOT NULL CHECK (state IN ('requested', 'reserved', 'starting', 'running', 'stopping', 'stopped',
                                       'terminating', 'terminated', 'failed', 'lost')),
  state_reason TEXT NOT NULL DEFAULT '',
  version BIGINT NOT NULL,                    -- If-Match; +1 per transition
  idempotency_key TEXT,                       -- NULLs do not collide in UNIQUE on either engine
  ends_at BIGINT,
  prev_gpus TEXT NOT NULL DEFAULT '',         -- gpu ids it held last, comma-separated: start tries them first
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX rentals_tenant_state ON rentals (tenant_id, state);
CREATE INDEX rentals_provider ON rentals (provider_id);

-- What a live rental holds: one row per whole GPU or MIG instance (profile NULL for a whole GPU).
CREATE TABLE rental_placements (
  rental_id TEXT NOT NULL REFERENCES rentals (id),
  seq INTEGER NOT NULL,
  gpu_id TEXT NOT NULL REFERENCES gpus (id),
  profile TEXT,
  start_slice INTEGER NOT NULL,
  size_slices INTEGER NOT NULL,
  PRIMARY KEY (rental_id, seq)
);
CREATE INDEX rental_placements_gpu ON rental_placements (gpu_id);

-- THE double-booking guard: one row per held (GPU, memory slice); a whole GPU claims all of its slices.
CREATE TABLE slice_claims (
  gpu_id TEXT NOT NULL REFERENCES gpus (id),
  mem_slice INTEGER NOT NULL CHECK (mem_slice BETWEEN 0 AND 7),
  rental_id TEXT NOT NULL REFERENCES rentals (id),
  PRIMARY KEY (gpu_id, mem_slice)
);
CREATE INDEX slice_claims_rental ON slice_claims (rental_id);

-- Append-only history of every transition.
CREATE TABLE rental_events (
  rental_id TEXT NOT NULL REFERENCES rentals (id),
  seq BIGINT NOT NULL,
  at BIGINT NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  actor TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (rental_id, seq)
);

-- Metered time: one segment per stretch of running, at the frozen price.
CREATE TABLE usage_segments (
  rental_id TEXT NOT NULL REFERENCES rentals (id),
  seq BIGINT NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at BIGINT,                            -- NULL while running
  price_micros_per_hour BIGINT NOT NULL,
  PRIMARY KEY (rental_id, seq),
  CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX usage_one_open ON usage_segments (rental_id) WHERE ended_at IS NULL;
