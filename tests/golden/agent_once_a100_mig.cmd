agent --once --json --nvml fake:tests/data/nvml/a100-mig.json
