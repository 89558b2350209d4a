perf --model llama-2-70b --weights fp16 --engine vllm --tp 2 --gpu a10 --gpu a100-80gb-sxm4/3g.40gb --gpu a100-80gb-sxm4
