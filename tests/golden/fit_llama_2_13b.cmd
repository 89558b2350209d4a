fit --model llama-2-13b --kv-cache fp16 --context 4096 --batch 4 --gpu a100-40gb-sxm4 --gpu a100-80gb-sxm4x2 --gpu h100-80gb-sxm5/3g.40gb --tp 1
