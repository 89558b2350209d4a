compare a100-40gb-sxm4 a100-80gb-sxm4 a40 h100-80gb-sxm5 --now 2026-11-30 --model llama-2-13b --engine vllm --input-tokens 512 --output-tokens 256
