plan --server http://127.0.0.1:1 --model llama-3-8b --rate 2
