agent --once --json --nvml fake:tests/data/nvml/h100x8.json
