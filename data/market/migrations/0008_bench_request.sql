-- Version 8: benches on request (issue #16; docs/market.md, "Measured figures"). A provider asks the
-- node's agent to bench its GPUs again (POST /nodes/{id}/bench): the node's request generation goes up,
-- the heartbeat answer carries it while no bench has answered it, and the agent's PUT /agent/bench names
-- the request it answers. Statements end with ";" at the end of a line; no ";" inside string literals.

-- The node's latest request (0: none ever) and the latest an agent's bench answered.
ALTER TABLE nodes ADD COLUMN bench_request BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN bench_answered BIGINT NOT NULL DEFAULT 0;
-- The request a GPU's stored bench answered (0: an unrequested bench, at enrolment): a second report for
-- the same or an older request is refused (stale or a duplicate).
ALTER TABLE gpu_bench ADD COLUMN bench_request BIGINT NOT NULL DEFAULT 0;
