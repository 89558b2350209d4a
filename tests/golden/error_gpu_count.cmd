fit --model llama-2-7b --gpu a40x99999999999
