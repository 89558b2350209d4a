plan --model llama-2-7b --task lora --batch 4 --context 2048 --checkpointing full --train-tokens 1e9 --deadline 30h --now 2026-11-30 --gpu a100-80gb-sxm4 --gpu h100-80gb-sxm5 --top 5
