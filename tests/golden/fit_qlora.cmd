fit --model llama-3.1-8b --task qlora --batch 2 --context 2048 --lora-rank 8 --lora-targets q,k,v,o,gate,up,down --gpu rtx-4090
