fit --model mixtral-8x7b --weights q4_k_m --engine llama.cpp --gpu rtx-4090 --json
