perf --model llama-2-7b --task train --gpu h100-80gb-sxm5x8 --batch 2 --context 4096 --zero 3 --checkpointing full --engine megatron --train-tokens 1e9 --json
