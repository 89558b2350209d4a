compare a100-40gb-sxm4 v100-16gb-sxm2 l4 --now 2026-11-30 --model llama-2-13b --weights bf16 --engine vllm
