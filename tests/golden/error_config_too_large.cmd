fit --model /dev/zero --gpu a40
