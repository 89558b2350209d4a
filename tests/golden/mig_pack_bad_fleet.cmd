mig pack --fleet tests/fixtures/mig/bad_fleet.yaml --requests examples/mig/requests.yaml
