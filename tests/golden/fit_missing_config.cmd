fit --model no/such/config.json
