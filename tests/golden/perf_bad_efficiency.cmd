perf --model llama-2-7b --gpu l4 --efficiency speed=2
