plan --model llama-2-13b --weights bf16 --engine vllm --rate 5 --input-tokens 512 --output-tokens 256 --tpot-slo 0.05 --now 2026-11-30 --top 5
