fit --model data/models/phi-3-mini.json --gpu a40 --gpu a100-40gb-sxm4/2g.10gb --context 2048 --batch 8 --json
