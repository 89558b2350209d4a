fit --model tests/fixtures/hostile/zero_heads.json --gpu a40
