bench check tests/data/bench/above_peak.json
