plan --model llama-2-7b --rate 2.5e10 --now 2026-11-30
