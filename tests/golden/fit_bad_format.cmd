fit --model llama-2-7b --weights int3
