agent --once --json --nvml fake:tests/data/nvml/faults.json
