bench check tests/data/bench/minimal.json
