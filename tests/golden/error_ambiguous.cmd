catalog show a100
