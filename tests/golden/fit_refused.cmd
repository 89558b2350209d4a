fit --model llama-2-7b --weights int4-awq --gpu a100-40gb-sxm4/3g.20gbx3 --gpu a100-40gb-sxm4/3g.20gbx2 --gpu v100-32gb-sxm2
