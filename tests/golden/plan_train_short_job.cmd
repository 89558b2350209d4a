plan --offers tests/fixtures/plan/short_job_offers.csv --model llama-2-7b --task lora --batch 4 --context 2048 --checkpointing full --train-tokens 2e7 --now 2026-11-30 --top 10
