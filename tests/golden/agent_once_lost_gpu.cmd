agent --once --json --nvml fake:tests/data/nvml/lost-gpu.json
