catalog show "NVIDIA H100 80GB HBM3" --json
