catalog show a100 --json
