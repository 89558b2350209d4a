rent --plan --server http://127.0.0.1:1 --token gpl_wrong --model llama-3-8b --rate 2 --gpu a100-80gb-sxm4/3g.40gb
