perf --model llama-2-7b --gpu a100-80gb-sxm4 --gpu h100-80gb-sxm5 --gpu a100-80gb-sxm4/3g.40gb --engine vllm --batch 8 --rate 4
