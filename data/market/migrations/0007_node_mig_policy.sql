-- Version 7: a node's MIG policy (issue #15; docs/market.md, "A node's MIG policy"). static: the agent
-- only reads (the provider keeps the GPU instances as declared); dynamic: the provider lets the agent
-- create and destroy GPU instances at the placements the market chose (the agent must also be started
-- with --mig-policy dynamic: both sides consent). Statements end with ";" at the end of a line.
ALTER TABLE nodes ADD COLUMN mig_policy TEXT NOT NULL DEFAULT 'static' CHECK (mig_policy IN ('static', 'dynamic'));
