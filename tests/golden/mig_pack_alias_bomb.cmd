mig pack --fleet examples/mig/fleet.yaml --requests tests/fixtures/mig/alias_bomb_requests.yaml
